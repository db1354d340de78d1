"""The local substrate's gRPC port with TLS and mTLS (certificates made here with
`cryptography`), and `substrate serve`'s gRPC flags and output (docs/SPEC.md §2, §2.4)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentsession_core.errors import UsageError
from agentsession_core.substrate.ate import control_codec as cc
from agentsession_core.substrate.ate.control import ControlClient
from agentsession_core.substrate.errors import SubstrateError
from local_substrate.cli import parse_grpc_port
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.ate_pki import Pki, make_pki

TOKEN = "ate-tls-token"
GLUTTON = ("benchmark-workloads", "glutton")


# ---- TLS and mTLS on the gRPC port -------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


async def _refused(client: ControlClient) -> str:
    """The refusal's code, and for a refused credential the parameter it names."""
    try:
        with pytest.raises(SubstrateError) as caught:
            await client.get_actor_template(*GLUTTON)
        error = caught.value
        if error.credential_refused:
            assert error.check, error  # a refused credential always says what to check
            return f"{error.code}: {error.check}"
        return error.code
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
        # Plaintext against TLS is not a credential: gRPC's UNAVAILABLE stays.
        assert await _refused(ControlClient(plaintext, timeout=30)) == "UNAVAILABLE"
        # A TLS failure that is the credentials is named (tls_check), not retried forever.
        wrong_ca = await _refused(ControlClient(tls.grpc_url, ca_file=pki.other_ca, timeout=30))
        assert wrong_ca.startswith("UNAUTHENTICATED: target.ca_file"), wrong_ca
        wrong_name = await _refused(
            ControlClient(tls.grpc_url, ca_file=pki.ca, server_name="other.name", timeout=30)
        )
        assert wrong_name.startswith("UNAUTHENTICATED: target.server_name"), wrong_name

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
        no_cert = ControlClient(mtls.grpc_url, ca_file=pki.ca, token=TOKEN, timeout=30)
        assert (await _refused(no_cert)).startswith("UNAUTHENTICATED: target.cert_file")
        stranger = ControlClient(
            mtls.grpc_url,
            ca_file=pki.ca,
            cert_file=pki.stranger_cert,
            key_file=pki.stranger_key,
            token=TOKEN,
            timeout=30,
        )
        refused = await _refused(stranger)
        assert refused.startswith("UNAUTHENTICATED: target.cert_file and target.key_file")
        assert "signed by a CA the control API trusts" in refused
        # A good certificate does not stand in for the token.
        no_token = ControlClient(
            mtls.grpc_url, ca_file=pki.ca, cert_file=pki.client_cert, key_file=pki.client_key
        )
        refused = await _refused(no_token)
        assert refused.startswith("UNAUTHENTICATED: target.token"), refused
        assert "no bearer token was sent" in refused


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
        done = subprocess.run([*serve, *flags], capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and says in done.stderr, done.stderr
