"""The local substrate's gRPC port with TLS and mTLS (certificates made here with
`cryptography`), and `substrate serve`'s gRPC flags and output (docs/SPEC.md §2, §2.4)."""

from __future__ import annotations

import datetime
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agentsession_core.cli.substrate import parse_grpc_port
from agentsession_core.errors import UsageError
from agentsession_core.substrate.ate import control_codec as cc
from agentsession_core.substrate.ate.control import DEFAULT_SERVER_NAME, ControlClient
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.local.launcher import LocalSubstrateProcess

TOKEN = "ate-tls-token"
GLUTTON = ("benchmark-workloads", "glutton")


# ---- TLS and mTLS on the gRPC port -------------------------------------------------------------


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


def _issue(
    root: Path,
    stem: str,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    dns: str | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
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


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca = _issue(root, "ca", None)
    other = _issue(root, "other-ca", None)
    # Like the real API server's, the certificate names the service, not 127.0.0.1.
    _issue(root, "server", ca, dns=DEFAULT_SERVER_NAME)
    _issue(root, "client", ca, dns="bench.client")
    _issue(root, "stranger", other, dns="bench.client")
    return Pki(
        *(root / f for f in ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")),
        other_ca=root / "other-ca.crt",
        stranger_cert=root / "stranger.crt",
        stranger_key=root / "stranger.key",
    )


async def _refused(client: ControlClient) -> str:
    try:
        with pytest.raises(SubstrateError) as caught:
            await client.get_actor_template(*GLUTTON)
        return caught.value.code
    finally:
        await client.aclose()


async def test_tls_then_mtls(pki: Pki) -> None:
    with LocalSubstrateProcess(
        workers=1, grpc_tls_cert=pki.server_cert, grpc_tls_key=pki.server_key
    ) as tls:
        assert tls.grpc_url.startswith("grpcs://127.0.0.1:")
        good = ControlClient(tls.grpc_url, ca_file=pki.ca)
        try:
            assert (await good.get_actor_template(*GLUTTON)).server_elapsed_us is not None
        finally:
            await good.aclose()
        plaintext = tls.grpc_url.replace("grpcs://", "grpc://")
        assert await _refused(ControlClient(plaintext, timeout=3)) == "UNAVAILABLE"
        assert await _refused(ControlClient(tls.grpc_url, ca_file=pki.other_ca, timeout=3)) == (
            "UNAVAILABLE"
        )

    with LocalSubstrateProcess(
        workers=1,
        token=TOKEN,
        grpc_tls_cert=pki.server_cert,
        grpc_tls_key=pki.server_key,
        grpc_client_ca=pki.ca,
    ) as mtls:
        good = ControlClient(
            mtls.grpc_url,
            ca_file=pki.ca,
            cert_file=pki.client_cert,
            key_file=pki.client_key,
            token=TOKEN,
        )
        try:
            await good.create_atespace("mtls")
            created = await good.create_actor("mtls", "a", *GLUTTON)
            assert cc.actor_status(created.message.status.state) == "SUSPENDED"
        finally:
            await good.aclose()
        no_cert = ControlClient(mtls.grpc_url, ca_file=pki.ca, token=TOKEN, timeout=3)
        assert await _refused(no_cert) == "UNAVAILABLE"
        stranger = ControlClient(
            mtls.grpc_url,
            ca_file=pki.ca,
            cert_file=pki.stranger_cert,
            key_file=pki.stranger_key,
            token=TOKEN,
            timeout=3,
        )
        assert await _refused(stranger) == "UNAVAILABLE"
        # A good certificate does not stand in for the token.
        no_token = ControlClient(
            mtls.grpc_url, ca_file=pki.ca, cert_file=pki.client_cert, key_file=pki.client_key
        )
        assert await _refused(no_token) == "UNAUTHENTICATED"


# ---- serve's flags and output ------------------------------------------------------------------


def test_grpc_off_prints_off_and_bad_flags_are_usage_errors(pki: Pki) -> None:
    with LocalSubstrateProcess(workers=1, grpc=False) as off:
        assert off.url.startswith("http://") and off.grpc_url == ""
    assert parse_grpc_port("none") is None and parse_grpc_port("0") == 0
    for bad in ("x", "-1", "70000"):
        with pytest.raises(UsageError):
            parse_grpc_port(bad)
    serve = [sys.executable, "-m", "agentsession_core", "substrate", "serve", "--workers", "1"]
    for flags, says in (
        (["--grpc-tls-cert", str(pki.server_cert)], "--grpc-tls-key"),
        (["--grpc-tls-cert", str(pki.server_cert), "--grpc-tls-key", "/nonexistent"], "key"),
        (["--grpc-port", "none", "--grpc-client-ca", str(pki.ca)], "--grpc-port none"),
    ):
        done = subprocess.run([*serve, *flags], capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and says in done.stderr, done.stderr
