"""Why a TLS connection to the control API fails, in words that name the credential.

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

A None leaves gRPC's own error (UNAVAILABLE, retried as usual) in place.
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass
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
class TlsSettings:
    host: str  # as dialled (no brackets)
    port: int
    server_name: str | None  # the name the certificate is checked against; None: host
    ca_pem: bytes | None  # None: the system roots
    ca_file: str | None  # for the message
    cert_file: str | None
    key_file: str | None


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
        context.set_alpn_protocols(["h2"])
        if tls.cert_file and tls.key_file:
            context.load_cert_chain(tls.cert_file, tls.key_file)
    except (ssl.SSLError, OSError, ValueError) as exc:
        return Diagnosis(
            f"TLS: the TLS files cannot be used ({exc})",
            "target.ca_file, target.cert_file and target.key_file",
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
                    conn.sendall(_H2_PREFACE)
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


def _server_certificate(
    tls: TlsSettings, name: str, exc: ssl.SSLCertVerificationError
) -> Diagnosis:
    message = exc.verify_message or str(exc)
    if "mismatch" in message.lower():
        return Diagnosis(
            f"TLS: the control API's certificate is not valid for {name!r} ({message})",
            "target.server_name (--server-name; the API server's certificate names "
            "api.ate-system.svc)",
        )
    trust = f"target.ca_file {tls.ca_file}" if tls.ca_file else "the system roots"
    return Diagnosis(
        f"TLS: the control API's certificate does not verify against {trust} ({message})",
        "target.ca_file (--ca-file): the CA that signed the control API's certificate",
    )


def _client_certificate(tls: TlsSettings, what: str) -> Diagnosis:
    check = "target.cert_file and target.key_file (--cert-file/--key-file)"
    if not tls.cert_file:
        return Diagnosis(
            f"TLS: the control API wants a client certificate (mTLS) and none was given ({what})",
            check,
        )
    return Diagnosis(
        f"TLS: the control API refused the client certificate {Path(tls.cert_file)} ({what})",
        f"{check}: a certificate signed by a CA the control API trusts",
    )
