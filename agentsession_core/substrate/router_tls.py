"""TLS to an https:// router (docs/SPEC.md §2.2): whom to trust, our client certificate for
mTLS, the name checked, and the one line a refused handshake becomes.

A router behind an ingress is https://. The settings are target.router_ca_file,
target.router_cert_file + target.router_key_file and target.router_server_name; the SSL
context is built once per client (its files read then: a bad file is refused before the
first request, naming the setting) and shared by every connection. A handshake the
credentials make fail is UNAUTHENTICATED naming the setting to fix (tls_check.py, Peer
ROUTER): the run stops with that line instead of counting the failure as a transport
error on every request.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from agentsession_core.errors import UsageError
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.tls_check import ROUTER, Diagnosis, TlsSettings

ROUTER_WHO = "the router"


@dataclass(frozen=True, slots=True)
class RouterTls:
    ca_file: str | None = None  # None: the system roots
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None  # None: the router URL's host

    def context(self) -> ssl.SSLContext:
        """The client context (HTTP/1.1 by ALPN); UsageError naming the setting whose file
        cannot be used."""
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"target.router_ca_file {self.ca_file}: {exc}") from None
        context.set_alpn_protocols(["http/1.1"])
        if self.cert_file and self.key_file:
            try:
                context.load_cert_chain(self.cert_file, self.key_file)
            except (OSError, ssl.SSLError) as exc:
                raise UsageError(
                    f"target.router_cert_file {self.cert_file} / target.router_key_file "
                    f"{self.key_file}: {exc}"
                ) from None
        return context

    def settings(self, host: str, port: int, *, read_ca: bool = False) -> TlsSettings:
        """What tls_check needs to name the setting, and with `read_ca` (blocking: in a
        thread) to repeat the handshake."""
        ca_pem = None
        if read_ca and self.ca_file:
            with open(self.ca_file, "rb") as ca:
                ca_pem = ca.read()
        return TlsSettings(
            host=host,
            port=port,
            server_name=self.server_name,
            ca_pem=ca_pem,
            ca_file=self.ca_file,
            cert_file=self.cert_file,
            key_file=self.key_file,
            peer=ROUTER,
        )


def refused(diagnosis: Diagnosis, route: str) -> SubstrateError:
    """The router refused our credentials (or we refused its certificate): the run stops."""
    return SubstrateError(
        "UNAUTHENTICATED",
        f"router {route}: {diagnosis.message}",
        check=diagnosis.check,
        by=ROUTER_WHO,
    )
