"""Why a TLS connection to the control API or the router fails, in words that name the
credential (docs/SPEC.md §2, §2.2).

gRPC reports every TLS failure as UNAVAILABLE, which the failure table reads as "try again
later", and its text is the TLS library's ("Socket closed", "Tls handshake failed
(TSI_PROTOCOL_FAILURE) ..."). A wrong CA, a certificate issued for another name or a client
certificate the server refuses never heals by retrying, so when a call on a grpcs:// target
fails like that, ControlClient asks `diagnose` to repeat the handshake with the same settings
on a plain socket and say what went wrong:

| what the handshake shows                                   | verdict                      |
|------------------------------------------------------------|------------------------------|
| the server's certificate does not verify against the CA    | target.ca_file               |
| it verifies, but not for the name checked                  | target.server_name           |
| the server sends an alert about our certificate, or closes  | target.cert_file / key_file  |
| the connection right after the handshake, before HTTP/2    | (mTLS: missing or refused)   |
| the server answers HTTP/2                                   | None: TLS is fine            |
| nothing listens, the handshake is not TLS, time runs out    | None: not a credential       |

A None leaves gRPC's own error (UNAVAILABLE, retried as usual) in place. An expired
certificate is named as such: the server's (renewed on the server; no setting of ours fixes
it) or ours (the server's alert says so: target.cert_file).

The router (an https:// target.router) is diagnosed the same way with its own settings
(`Peer`: ROUTER names target.router_ca_file and the rest): its client sees most verdicts
in-line, the handshake's own exception or the server's alert on the first read
(`in_line`), and asks `diagnose` only when a fresh connection closed without a word.
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

# HTTP/2's client connection preface and an empty SETTINGS frame: a gRPC server that accepted
# the handshake answers with its own SETTINGS; one that refused our certificate closes.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_CERT_ALERTS = (
    "BAD_CERTIFICATE",
    "UNKNOWN_CA",
    "CERTIFICATE_UNKNOWN",
    "UNSUPPORTED_CERTIFICATE",
    "CERTIFICATE_EXPIRED",
    "CERTIFICATE_REVOKED",
    "DECRYPT_ERROR",
    "ACCESS_DENIED",
    "HANDSHAKE_FAILURE",
)
_TLS_WORDS = ("handshake", "socket closed", "verif", "certificate", "ssl", "tls")


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What is wrong (`message`) and the parameter to fix (`check`)."""

    message: str
    check: str


@dataclass(frozen=True, slots=True)
class Peer:
    """Who a diagnosis is about and the settings it names."""

    who: str
    ca: str
    cert: str
    server_name: str
    alpn: tuple[str, ...]
    probe: bytes  # our first bytes after the handshake: a server that accepted us answers


CONTROL_API = Peer(
    "the control API",
    "target.ca_file (--ca-file)",
    "target.cert_file and target.key_file (--cert-file/--key-file)",
    "target.server_name (--server-name; the API server's certificate names api.ate-system.svc)",
    ("h2",),
    _H2_PREFACE,
)
ROUTER = Peer(
    "the router",
    "target.router_ca_file",
    "target.router_cert_file and target.router_key_file",
    "target.router_server_name",
    ("http/1.1",),
    b"HEAD / HTTP/1.1\r\nHost: tls-check\r\nConnection: close\r\n\r\n",
)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    host: str  # as dialled (no brackets)
    port: int
    server_name: str | None  # the name the certificate is checked against; None: host
    ca_pem: bytes | None  # None: the system roots
    ca_file: str | None  # for the message
    cert_file: str | None
    key_file: str | None
    peer: Peer = CONTROL_API


def looks_like_tls(details: str) -> bool:
    """Whether gRPC's UNAVAILABLE text could be a TLS failure (worth a diagnosis)."""
    text = details.lower()
    return any(word in text for word in _TLS_WORDS)


def diagnose(tls: TlsSettings, timeout: float = 3.0) -> Diagnosis | None:
    """What is wrong with the credentials, naming the parameter to fix, or None when it is not
    a credential problem. Blocking (run it in a thread). A server that closes the connection
    right after the handshake without a word is asked twice, 0.3 s apart, before that counts
    as refusing the client certificate (a server going down closes connections too)."""
    try:
        context = ssl.create_default_context(
            cadata=tls.ca_pem.decode("ascii", "replace") if tls.ca_pem else None
        )
        context.set_alpn_protocols(list(tls.peer.alpn))
        if tls.cert_file and tls.key_file:
            context.load_cert_chain(tls.cert_file, tls.key_file)
    except (ssl.SSLError, OSError, ValueError) as exc:
        return Diagnosis(
            f"TLS: the TLS files cannot be used ({exc})", f"{tls.peer.ca}, {tls.peer.cert}"
        )
    verdict = _handshake(tls, context, timeout)
    if verdict is _CLOSED:
        time.sleep(0.3)
        verdict = _handshake(tls, context, timeout)
    if verdict is _CLOSED:
        return _client_certificate(tls, "the server closed the connection after the handshake")
    return verdict if isinstance(verdict, Diagnosis) else None


_CLOSED = object()  # the handshake completed, then the server closed without a word


def _handshake(tls: TlsSettings, context: ssl.SSLContext, timeout: float) -> object:
    """One handshake and one read: a Diagnosis, _CLOSED, or None (TLS is not the problem)."""
    name = tls.server_name or tls.host
    try:
        with socket.create_connection((tls.host, tls.port), timeout=timeout) as raw:
            try:
                conn = context.wrap_socket(raw, server_hostname=name)
            except ssl.SSLCertVerificationError as exc:
                return _server_certificate(tls, name, exc)
            except ssl.SSLError as exc:
                reason = str(exc.reason or exc)
                if "ALERT" in reason.upper():  # the server objected to our certificate
                    return _client_certificate(tls, reason)
                return None  # not TLS at all (a plaintext server), or a protocol mismatch
            with conn:
                # TLS 1.3: the server checks our certificate after the client's handshake
                # is done; its verdict is the answer to our first bytes.
                try:
                    conn.sendall(tls.peer.probe)
                    answered = conn.recv(9)
                except ssl.SSLError as exc:
                    reason = str(exc.reason or exc)
                    if "ALERT" in reason.upper():
                        return _client_certificate(tls, reason)
                    return _CLOSED
                except (ConnectionResetError, BrokenPipeError):
                    return _CLOSED
    except OSError:
        return None  # nothing listens, reset mid-handshake, or no answer in time
    return None if answered else _CLOSED


def in_line(tls: TlsSettings, exc: ssl.SSLError) -> Diagnosis | None:
    """The verdict on a TLS failure a client met itself: the handshake refusing the server's
    certificate, or the server's alert about ours (on the handshake or the first read); None
    for anything else (not TLS at all, a protocol mismatch)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return _server_certificate(tls, tls.server_name or tls.host, exc)
    reason = str(exc.reason or exc)
    if "ALERT" in reason.upper():
        return _client_certificate(tls, reason)
    return None


def _server_certificate(
    tls: TlsSettings, name: str, exc: ssl.SSLCertVerificationError
) -> Diagnosis:
    peer = tls.peer
    message = exc.verify_message or str(exc)
    if "mismatch" in message.lower():
        return Diagnosis(
            f"TLS: {peer.who}'s certificate is not valid for {name!r} ({message})",
            peer.server_name,
        )
    if "expired" in message.lower():
        return Diagnosis(
            f"TLS: {peer.who}'s certificate has expired ({message})",
            f"{peer.who}'s own serving certificate: it must be renewed there ({peer.ca} only "
            "says whom to trust)",
        )
    trust = f"{peer.ca.split()[0]} {tls.ca_file}" if tls.ca_file else "the system roots"
    return Diagnosis(
        f"TLS: {peer.who}'s certificate does not verify against {trust} ({message})",
        f"{peer.ca}: the CA that signed {peer.who}'s certificate",
    )


def _expired_on(cert_file: str) -> str | None:
    """When our own certificate expired, if it has: a server that closes without an alert
    (aiohttp's, Python's) does not say why it refused it."""
    try:
        # Imported here: only a refused client certificate pays for it (prefect needs it
        # anyway, so it is installed wherever agentsession is).
        from cryptography import x509

        certificate = x509.load_pem_x509_certificate(Path(cert_file).read_bytes())
    except (ImportError, OSError, ValueError):
        return None
    ends = certificate.not_valid_after_utc
    return ends.isoformat(timespec="seconds") if ends < datetime.now(UTC) else None


def _client_certificate(tls: TlsSettings, what: str) -> Diagnosis:
    peer = tls.peer
    if not tls.cert_file:
        return Diagnosis(
            f"TLS: {peer.who} wants a client certificate (mTLS) and none was given ({what})",
            peer.cert,
        )
    expired = "EXPIRED" in what.upper() or _expired_on(tls.cert_file)
    if expired:
        when = f" on {expired}" if isinstance(expired, str) else ""
        return Diagnosis(
            f"TLS: {peer.who} refused the client certificate {Path(tls.cert_file)}: it "
            f"expired{when} ({what})",
            f"{peer.cert}: a certificate that is valid now",
        )
    return Diagnosis(
        f"TLS: {peer.who} refused the client certificate {Path(tls.cert_file)} ({what})",
        f"{peer.cert}: a certificate signed by a CA {peer.who} trusts",
    )
