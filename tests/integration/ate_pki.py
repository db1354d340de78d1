"""Certificates for the ate wire's TLS tests, made with `cryptography`: a CA, the control API's
serving certificate (naming only the service, like the real API server's, never 127.0.0.1), a
client certificate the CA signed, and a stranger: a client certificate from another CA; for
the https router (docs/SPEC.md §2.2) its serving certificate (ROUTER_NAME) and expired ones,
a router certificate and a client certificate, both signed by the CA.
Use `make_pki(directory)` from a module-scoped fixture."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agentsession_core.substrate.ate.control import DEFAULT_SERVER_NAME


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    stranger_cert: Path  # signed by other_ca
    stranger_key: Path
    router_cert: Path  # names ROUTER_NAME only
    router_key: Path
    expired_router_cert: Path
    expired_router_key: Path
    expired_client_cert: Path
    expired_client_key: Path


ROUTER_NAME = "router.ate-system.svc"


def _issue(
    root: Path,
    stem: str,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    dns: str | None = None,
    expired: bool = False,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    if expired:  # valid for an hour that ended a day ago
        now -= datetime.timedelta(days=1, hours=1)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, stem)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if dns:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(dns)]), False)
    cert = builder.sign(issuer[1] if issuer else key, hashes.SHA256())
    (root / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (root / f"{stem}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, key


def make_pki(root: Path) -> Pki:
    ca = _issue(root, "ca", None)
    other = _issue(root, "other-ca", None)
    _issue(root, "server", ca, dns=DEFAULT_SERVER_NAME)
    _issue(root, "client", ca, dns="bench.client")
    _issue(root, "stranger", other, dns="bench.client")
    _issue(root, "router", ca, dns=ROUTER_NAME)
    _issue(root, "expired-router", ca, dns=ROUTER_NAME, expired=True)
    _issue(root, "expired-client", ca, dns="bench.client", expired=True)
    return Pki(
        *(root / f for f in ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")),
        other_ca=root / "other-ca.crt",
        stranger_cert=root / "stranger.crt",
        stranger_key=root / "stranger.key",
        router_cert=root / "router.crt",
        router_key=root / "router.key",
        expired_router_cert=root / "expired-router.crt",
        expired_router_key=root / "expired-router.key",
        expired_client_cert=root / "expired-client.crt",
        expired_client_key=root / "expired-client.key",
    )
