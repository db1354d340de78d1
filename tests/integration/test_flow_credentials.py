"""The campaign flow's bearer token, under Prefect's test harness: it comes from
AGENTSESSION_TOKEN or a Prefect Secret block, reaches the substrate and never Prefect's
records, a command line or the command's output; typed into the flow's form it is refused
(docs/SPEC.md §6.6, flows/credentials.py).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import orjson
import pytest

from agentsession_core.output.run_dir import verify_manifest
from flows.credentials import TOKEN_ENV, TOKEN_PARAMETER_REFUSED
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration import flow_harness
from tests.integration.conftest import TOKEN
from tests.integration.flow_harness import (
    TEST_TIMEOUT_S,
    demo_campaign,
    flow_run_named,
    on_substrate,
    read_until,
    run_flow,
    small_campaign,
    stored_runs,
)

pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)
prefect_api = flow_harness.prefect_api  # this module's own Prefect API


async def test_a_token_from_the_environment_reaches_the_substrate_not_prefect(
    prefect_api, substrate: LocalSubstrateProcess, tmp_path, monkeypatch
):
    """The substrate requires TOKEN: the campaign completes only if the flow took it from
    AGENTSESSION_TOKEN, and Prefect's records of the run never hold it."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    values = on_substrate(small_campaign(tmp_path, hold_minutes=0.05), substrate)
    state = await run_flow(values)
    assert state.is_completed(), state
    result = await state.result()
    assert result["run_status"] == "completed", result
    assert TOKEN not in await stored_runs(state.state_details.flow_run_id)
    campaign_json = (Path(result["run_dir"]) / "campaign.json").read_bytes()
    assert TOKEN.encode() not in campaign_json
    assert orjson.loads(campaign_json)["params"]["target"]["token"] == "***"  # it was used


async def test_a_secret_block_names_the_token(
    prefect_api, substrate: LocalSubstrateProcess, tmp_path, monkeypatch
):
    """target.token_secret: the token comes from a Secret block on the flow's Prefect API;
    a block with a wrong token makes the substrate refuse the campaign (void, one reason)."""
    from prefect.blocks.system import Secret

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    await Secret(value=TOKEN).asave("substrate-token", overwrite=True)
    await Secret(value="not-the-token").asave("stale-token", overwrite=True)

    values = on_substrate(small_campaign(tmp_path, hold_minutes=0.05), substrate)
    values["target"]["token_secret"] = "substrate-token"
    state = await run_flow(values)
    assert state.is_completed(), state
    result = await state.result()
    assert result["run_status"] == "completed", result
    assert TOKEN not in await stored_runs(state.state_details.flow_run_id)

    values["target"]["token_secret"] = "stale-token"
    state = await run_flow(values)
    assert state.is_completed(), state  # a refusal is a verdict
    result = await state.result()
    assert result["verdict"] == "void" and result["run_status"] == "refused", result
    assert "credentials refused" in result["reason"], result["reason"]
    assert "target.token_secret" in result["reason"] and "not-the-token" not in result["reason"]
    assert "not-the-token" not in await stored_runs(state.state_details.flow_run_id)


async def test_a_token_parameter_or_a_missing_block_is_refused_before_anything(
    prefect_api, tmp_path, monkeypatch
):
    """Someone typed the token into the flow's form: the flow refuses it in one line naming
    what to use instead, and starts nothing."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    for target, message in (
        ({"token": "typed-into-the-form"}, TOKEN_PARAMETER_REFUSED),
        ({"token_secret": "no-such-block"}, "no Prefect Secret block named 'no-such-block'"),
    ):
        state = await run_flow(small_campaign(tmp_path, target=target))
        assert state.is_failed(), state
        assert state.message.startswith("campaign not started: "), state.message
        assert message in state.message and "typed-into-the-form" not in state.message
        assert not (tmp_path / "art").exists()


def test_cli_runs_the_flow_and_prints_the_run_directory_last(prefect_api, tmp_path):
    """Also: a token in AGENTSESSION_TOKEN (the demo preset's embedded substrate then
    requires it) is on no command line of the campaign or any process it started, and
    not in the flow run Prefect recorded."""
    import psutil

    token = "cli-token-" + os.urandom(8).hex()
    env = {**os.environ, "PREFECT_API_URL": prefect_api, TOKEN_ENV: token}
    args = demo_campaign(
        "name=cli", "tag=t1", f"dest={tmp_path / 'art'}", "hold_minutes=0.05", "window_seconds=3"
    )
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        early = read_until(proc, "turnover fill done")  # every process is up by now
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        cmdlines = [" ".join(p.cmdline()) for p in family if p.is_running()]
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert any("substrate serve" in c for c in cmdlines), cmdlines  # the embedded substrate
    assert not [c for c in cmdlines if token in c]
    assert proc.returncode == 0, err[-3000:]
    assert token not in out + "".join(early) + err
    run_dir = Path(out.strip().splitlines()[-1])
    assert run_dir.is_dir() and run_dir.name == "run_tag=t1"
    assert (run_dir / "gate.json").is_file() and verify_manifest(run_dir) == []
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "completed", status  # the substrate took the token
    flow_run_id = asyncio.run(flow_run_named("cli-t1"))
    assert flow_run_id is not None
    assert token not in asyncio.run(stored_runs(flow_run_id))
