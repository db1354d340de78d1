"""An https:// router (docs/SPEC.md §2.2): a run through the local substrate's TLS router port
with mTLS completes, and every wrong credential is named in one line, the setting to check
in it (tls_check.py's ROUTER): a CA that did not sign the router's certificate, no client
certificate, a name the certificate does not carry, an expired client certificate and an
expired router certificate."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.run.run import Run
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.router_client import FastRouterClient
from agentsession_core.substrate.router_tls import RouterTls
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.ate_pki import ROUTER_NAME, Pki, make_pki

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_substrate(
    pki: Pki, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalSubstrateProcess]:
    """A local substrate whose router also listens with TLS, client certificates required."""
    log = tmp_path_factory.mktemp("tls-substrate") / "substrate.log"
    with LocalSubstrateProcess(
        workers=2,
        router_tls_cert=pki.router_cert,
        router_tls_key=pki.router_key,
        router_client_ca=pki.ca,
        log_path=log,
    ) as sub:
        assert sub.tls_url.startswith("https://127.0.0.1:"), sub.tls_url
        yield sub


async def test_a_run_over_an_https_router_with_mtls(
    pki: Pki, tls_substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    params = RunParams(
        target={
            "substrate": tls_substrate.url,  # the JSON control API, plain
            "router": tls_substrate.tls_url,
            "router_ca_file": str(pki.ca),
            "router_cert_file": str(pki.client_cert),
            "router_key_file": str(pki.client_key),
            "router_server_name": ROUTER_NAME,  # dialled as 127.0.0.1
            "atespace": "tls",
        },
        script="smoke",
        population={"kind": "closed", "sessions": 2},
        think_scale=0.05,
        out=str(tmp_path),
        name="router-tls",
    )
    run = Run(params)

    def stepped_enough() -> str | None:
        """Held until four steps went through the TLS router (a count, not a time)."""
        rows = run.recorder.totals().rows.items()
        done = sum(r.count for (kind, name), r in rows if kind == "http" and "Step_" in name)
        return "enough" if done >= 4 else None

    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(60.0, should_stop=stepped_enough)
        assert reason == "enough", reason
        run.finish("completed")
    assert run.result is not None and run.result.status == "completed", run.result
    rows = {
        json.loads(line)["metric"]: json.loads(line)["measurements"]
        for line in (run.result.run_dir / "stats.jsonl").read_text().splitlines()
    }
    steps = [m for name, m in rows.items() if name.startswith("http_Step_")]
    assert sum(m["request_count"] for m in steps) >= 4
    assert sum(m["failure_count"] for m in steps) == 0


async def test_a_run_with_the_wrong_router_ca_ends_in_one_line(
    pki: Pki, tls_substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    params = RunParams(
        target={
            "substrate": tls_substrate.url,
            "router": tls_substrate.tls_url,
            "router_ca_file": str(pki.other_ca),
            "router_cert_file": str(pki.client_cert),
            "router_key_file": str(pki.client_key),
            "router_server_name": ROUTER_NAME,
            "atespace": "tls-wrong-ca",
        },
        script="smoke",
        population={"kind": "closed", "sessions": 2},
        out=str(tmp_path),
        name="router-tls-wrong-ca",
    )
    run = Run(params, handle_signals=False)
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(30.0)
        run.finish("completed" if reason is None else "failed", reason)
    assert run.result is not None and run.result.status == "failed", run.result
    reason = run.result.reason or ""
    assert reason.startswith("credentials refused by the router"), reason
    assert "check target.router_ca_file" in reason and "\n" not in reason, reason


async def _refusal(url: str, tls: RouterTls) -> SubstrateError:
    client = FastRouterClient(url, timeout=30, tls=tls)
    try:
        with pytest.raises(SubstrateError) as refused:
            await client.request("tls/nobody", "ping", json={"message": "hi"})
        return refused.value
    finally:
        await client.aclose()


async def test_each_wrong_credential_is_named(
    pki: Pki, tls_substrate: LocalSubstrateProcess
) -> None:
    url = tls_substrate.tls_url
    good = RouterTls(str(pki.ca), str(pki.client_cert), str(pki.client_key), ROUTER_NAME)
    # Right credentials: TLS passes and the router itself answers (no such actor).
    answered = await _refusal(url, good)
    assert answered.code == "ACTOR_NOT_FOUND", answered
    cases = {
        "wrong CA": (
            RouterTls(str(pki.other_ca), str(pki.client_cert), str(pki.client_key), ROUTER_NAME),
            "target.router_ca_file",
            "does not verify",
        ),
        "no client certificate": (
            RouterTls(str(pki.ca), None, None, ROUTER_NAME),
            "target.router_cert_file",
            "none was given",
        ),
        "wrong server name": (
            RouterTls(str(pki.ca), str(pki.client_cert), str(pki.client_key)),  # 127.0.0.1
            "target.router_server_name",
            "not valid for '127.0.0.1'",
        ),
        "expired client certificate": (
            RouterTls(
                str(pki.ca), str(pki.expired_client_cert), str(pki.expired_client_key), ROUTER_NAME
            ),
            "target.router_cert_file",
            "it expired on",
        ),
        "client certificate of another CA": (
            RouterTls(str(pki.ca), str(pki.stranger_cert), str(pki.stranger_key), ROUTER_NAME),
            "target.router_cert_file",
            "refused the client certificate",
        ),
    }
    for case, (tls, setting, words) in cases.items():
        error = await _refusal(url, tls)
        line = str(error)
        assert error.credential_refused and error.by == "the router", (case, line)
        assert error.check is not None and error.check.startswith(setting), (case, error.check)
        assert words in line and "\n" not in line, (case, line)


async def test_an_expired_router_certificate_is_named(pki: Pki) -> None:
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(pki.expired_router_cert, pki.expired_router_key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=serving)
    port = server.sockets[0].getsockname()[1]
    try:
        error = await _refusal(
            f"https://127.0.0.1:{port}", RouterTls(str(pki.ca), server_name=ROUTER_NAME)
        )
    finally:
        server.close()
    assert error.credential_refused and "has expired" in str(error), error
    assert error.check is not None and "serving certificate" in error.check, error.check
