"""tls_check.diagnose against TLS servers that behave unlike gRPC's: Python's `ssl` server, which
(like Go's, the real API server's) sends an alert when it refuses the client certificate,
where gRPC's closes without a word (covered in test_local_substrate_ate_tls.py)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from agentsession_core.substrate.ate.control import DEFAULT_SERVER_NAME
from agentsession_core.substrate.tls_check import TlsSettings, diagnose, looks_like_tls
from tests.integration.ate_pki import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@contextlib.contextmanager
def server(pki: Pki | None, *, mtls: bool = False) -> Iterator[int]:
    """A loopback server on a thread: TLS (mTLS when asked) answering every connection with a
    few bytes, or plaintext (pki None) that closes at once."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    context = None
    if pki is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(pki.server_cert, pki.server_key)
        if mtls:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(pki.ca)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with contextlib.suppress(OSError), conn:
                if context is None:
                    continue
                with context.wrap_socket(
                    conn, server_side=True, do_handshake_on_connect=False
                ) as tls:
                    try:
                        tls.do_handshake()
                    except ssl.SSLError:
                        linger(tls)
                        continue
                    tls.recv(64)
                    tls.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def linger(refused: socket.socket) -> None:
    """After refusing the client certificate (the alert is sent): close as servers do, our
    side first, then read what the client sent until it closes. Closing with the client's
    first bytes unread would send a reset, which can overtake the alert (one run in ten)."""
    refused.shutdown(socket.SHUT_WR)
    refused.settimeout(2)
    with contextlib.suppress(OSError):
        while refused.recv(4096):
            pass


def settings(port: int, pki: Pki, *, ca: Path | None = None, cert: bool = False) -> TlsSettings:
    ca_file = ca or pki.ca
    return TlsSettings(
        host="127.0.0.1",
        port=port,
        server_name=DEFAULT_SERVER_NAME,
        ca_pem=ca_file.read_bytes(),
        ca_file=str(ca_file),
        cert_file=str(pki.client_cert) if cert else None,
        key_file=str(pki.client_key) if cert else None,
    )


def test_alerts_about_the_client_certificate_name_it(pki: Pki) -> None:
    with server(pki, mtls=True) as port:
        assert diagnose(settings(port, pki, cert=True)) is None  # accepted: TLS is fine
        missing = diagnose(settings(port, pki))
        assert missing is not None and "none was given" in missing.message
        assert "ALERT" in missing.message.upper()  # the server's own word for it
        assert missing.check.startswith("target.cert_file and target.key_file")


def test_the_servers_certificate_and_name(pki: Pki) -> None:
    with server(pki) as port:
        assert diagnose(settings(port, pki)) is None
        wrong_ca = diagnose(settings(port, pki, ca=pki.other_ca))
        assert wrong_ca is not None and wrong_ca.check.startswith("target.ca_file")
        assert str(pki.other_ca) in wrong_ca.message
        wrong_name = diagnose(replace(settings(port, pki), server_name="x.example"))
        assert wrong_name is not None and wrong_name.check.startswith("target.server_name")


def test_what_is_not_a_credential_is_left_alone(pki: Pki) -> None:
    with server(None) as port:  # plaintext: not TLS at all
        assert diagnose(settings(port, pki), timeout=2) is None
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    assert diagnose(settings(port, pki), timeout=2) is None  # nothing listens
    unusable = replace(settings(port, pki), cert_file="/nonexistent", key_file="/nonexistent")
    broken = diagnose(unusable)
    assert broken is not None and "cannot be used" in broken.message


@pytest.mark.parametrize(
    ("details", "expected"),
    [
        ("failed to connect to all addresses; last error: UNAVAILABLE: ipv4:1: Socket closed", 1),
        ("Tls handshake failed (TSI_PROTOCOL_FAILURE): CERTIFICATE_VERIFY_FAILED", 1),
        ("Failed to connect to remote host: Connection refused", 0),
        ("", 0),
    ],
)
def test_which_grpc_failures_are_worth_a_diagnosis(details: str, expected: int) -> None:
    assert looks_like_tls(details) is bool(expected)
