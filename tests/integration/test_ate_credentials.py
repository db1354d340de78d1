"""Credentials at run level: `agentsession run` (a subprocess, as a person runs it) over the ate
wire against a local substrate process whose gRPC port speaks TLS or mTLS and wants a bearer
token, with certificates made here (ate_pki.py).

With the right credentials the run passes. With a wrong or missing one (no token, a wrong
token, no client certificate under mTLS, a client certificate from a stranger CA, a CA that
did not sign the server, a server name the certificate does not carry) the run ends at
preflight with ONE line on stderr that names the credential, exit 1, status.json `refused`
with no actor created, and the substrate holds no actor in the run's atespace."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.ate_pki import Pki, make_pki

pytestmark = pytest.mark.timeout(240)
TOKEN = "ate-run-token"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def mtls(pki: Pki) -> Iterator[LocalSubstrateProcess]:
    with LocalSubstrateProcess(
        workers=2,
        token=TOKEN,
        grpc_tls_cert=pki.server_cert,
        grpc_tls_key=pki.server_key,
        grpc_client_ca=pki.ca,
    ) as proc:
        yield proc


def command(sub: LocalSubstrateProcess, out: Path, atespace: str, *flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "agentsession_core",
        "run",
        "--substrate",
        sub.grpc_url,
        "--router",
        sub.url,
        "--atespace",
        atespace,
        "--out",
        str(out),
        "--script",
        "smoke",
        "--sessions",
        "2",
        "--think-scale",
        "0.05",
        "--hold",
        "2s",
        "--request-timeout-seconds",
        "10s",
        "--progress",
        "plain",
        *flags,
    ]


def environment(token: str | None = None) -> dict[str, str]:
    # No token from the caller's environment: each case gives exactly what it tests, in the
    # environment (`--token` on a command line is refused).
    env = {k: v for k, v in os.environ.items() if k != "AGENTSESSION_TOKEN"}
    return env if token is None else {**env, "AGENTSESSION_TOKEN": token}


def status_of(stdout: str) -> dict:
    run_dir = Path(stdout.strip().splitlines()[-1])
    return orjson.loads((run_dir / "status.json").read_bytes())


def actors_in(sub: LocalSubstrateProcess, atespace: str) -> list[str]:
    async def listed() -> list[str]:
        client = HttpSubstrate(sub.url, token=TOKEN, control_timeout=10)
        try:
            return [actor.name for actor in await client.list_actors(atespace)]
        except SubstrateError as exc:
            assert exc.code == "NOT_FOUND", exc  # not even the atespace exists
            return []
        finally:
            await client.aclose()

    return asyncio.run(listed())


def tls_flags(pki: Pki, *, ca: Path | None = None, cert: bool = True) -> list[str]:
    flags = ["--ca-file", str(ca or pki.ca)]
    if cert:
        flags += ["--cert-file", str(pki.client_cert), "--key-file", str(pki.client_key)]
    return flags


def test_tls_and_a_token_pass(pki: Pki, tmp_path: Path) -> None:
    with LocalSubstrateProcess(
        workers=2, token=TOKEN, grpc_tls_cert=pki.server_cert, grpc_tls_key=pki.server_key
    ) as tls:
        assert tls.grpc_url.startswith("grpcs://")
        args = command(tls, tmp_path, "tls-ok", *tls_flags(pki, cert=False))
        env = environment(TOKEN)
        done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        status = status_of(done.stdout)
        assert status["status"] == "completed"
        assert status["actors_created"] == status["actors_deleted"] == 2
        assert actors_in(tls, "tls-ok") == []


def test_mtls_and_a_token_pass(mtls: LocalSubstrateProcess, pki: Pki, tmp_path: Path) -> None:
    args = command(mtls, tmp_path, "mtls-ok", *tls_flags(pki))
    done = subprocess.run(args, capture_output=True, text=True, env=environment(TOKEN), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "credentials refused" not in done.stderr
    status = status_of(done.stdout)
    assert status["status"] == "completed" and status["leaked_actors"] == []
    assert status["actors_created"] == status["actors_deleted"] == 2


# case → (the token in AGENTSESSION_TOKEN, flags, what the one line must name)
REFUSALS: dict[str, tuple[str | None, list[str], list[str]]] = {
    "no-token": (None, [], ["no bearer token was sent", "target.token"]),
    "wrong-token": ("not-the-token", [], ["target.token", "it was sent"]),
    "no-client-cert": (TOKEN, [], ["client certificate", "none was given"]),
    "stranger-cert": (TOKEN, [], ["refused the client certificate", "stranger.crt"]),
    "wrong-ca": (TOKEN, [], ["other-ca.crt", "check target.ca_file"]),
    "wrong-server-name": (
        TOKEN,
        ["--server-name", "api.elsewhere.svc"],
        ["not valid for 'api.elsewhere.svc'", "check target.server_name"],
    ),
}


def refusal_flags(case: str, pki: Pki) -> list[str]:
    _, flags, _ = REFUSALS[case]
    if case == "no-client-cert":
        return [*tls_flags(pki, cert=False), *flags]
    if case == "stranger-cert":
        stranger = ["--cert-file", str(pki.stranger_cert), "--key-file", str(pki.stranger_key)]
        return ["--ca-file", str(pki.ca), *stranger, *flags]
    if case == "wrong-ca":
        return [*tls_flags(pki, ca=pki.other_ca), *flags]
    return [*tls_flags(pki), *flags]


def test_a_wrong_or_missing_credential_ends_the_run_in_one_line(
    mtls: LocalSubstrateProcess, pki: Pki, tmp_path: Path
) -> None:
    # The refusals run side by side: each ends at preflight, within seconds.
    running = {
        case: subprocess.Popen(
            command(mtls, tmp_path / case, case, *refusal_flags(case, pki)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(REFUSALS[case][0]),
        )
        for case in REFUSALS
    }
    for case, proc in running.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (case, err[-3000:])
        assert "Traceback" not in err, (case, err)
        # gRPC's own TLS chatter stays out of it (GRPC_VERBOSITY, substrate/__init__.py).
        assert "ssl_transport_security" not in err, (case, err)
        lines = [line for line in err.splitlines() if "credentials refused" in line]
        assert len(lines) == 1, (case, err)
        line = lines[0]
        assert "credentials refused by the control API: " in line, (case, line)
        for words in REFUSALS[case][2]:
            assert words in line, (case, words, line)
        assert TOKEN not in err, (case, "the token leaked into stderr")
        status = status_of(out)
        assert status["status"] == "refused", (case, status)
        assert status["actors_created"] == 0 and status["leaked_actors"] == [], (case, status)
        assert actors_in(mtls, case) == [], case
