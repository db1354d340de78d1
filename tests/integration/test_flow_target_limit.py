"""One campaign per target (docs/SPEC.md §6.5), under Prefect's test harness: the target's
global concurrency limit, what two `agentsession campaign` processes on one substrate say
and report to Prefect (the verdict event, the engine's lines in the flow run's logs), and
the verdict report the example trigger runs for a failed campaign.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest

from agentsession_core.judge.stored_run import load_run
from agentsession_core.report.gate_summary import gate_summary
from flows.credentials import TOKEN_ENV
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration import flow_harness
from tests.integration.conftest import TOKEN, ate_target
from tests.integration.flow_harness import (
    TEST_TIMEOUT_S,
    flow_run_logs,
    flow_run_named,
    small_campaign,
    verdict_events,
)
from tests.unit import gate_runs

pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)
prefect_api = flow_harness.prefect_api  # this module's own Prefect API


async def test_an_operators_limit_is_left_as_it_is(prefect_api):
    """The flow creates a missing target limit with one slot, and never touches one that
    exists (an operator may have raised it on purpose)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    from flows.target_limit import ensure_limit

    assert await ensure_limit("agentsession-target-fresh-1") is True
    assert await ensure_limit("agentsession-target-fresh-1") is False
    async with get_client() as client:
        await client.create_global_concurrency_limit(
            GlobalConcurrencyLimitCreate(name="agentsession-target-raised-1", limit=3)
        )
        assert await ensure_limit("agentsession-target-raised-1") is False
        fresh = await client.read_global_concurrency_limit_by_name("agentsession-target-fresh-1")
        raised = await client.read_global_concurrency_limit_by_name("agentsession-target-raised-1")
    assert (fresh.limit, raised.limit) == (1, 3)


async def test_the_verdict_report_flow_writes_its_artifact(prefect_api, tmp_path: Path):
    """What the fail trigger runs: one markdown artifact naming the failure and the files; the
    gate's own summary when the run can be read where the event says it is."""
    from prefect.artifacts import Artifact

    from flows.verdict_report import verdict_report

    gone = tmp_path / "runs" / "gone-bad"  # the files moved away since (nothing there)
    state = await verdict_report(
        campaign="gone-bad",
        tag="n1",
        reason="window 0 at 1x: break",
        regressions=["TimeToWake p99"],
        location=str(gone),
        return_state=True,
    )
    assert state.is_completed(), state
    artifact = await Artifact.aget("gone-bad-failed")
    assert artifact is not None and artifact.type == "markdown"
    assert "window 0 at 1x: break" in artifact.data and "TimeToWake p99" in artifact.data
    assert f"`{gone}`" in artifact.data and "The gate's summary is not shown" in artifact.data
    # A failed run that is there: the artifact is the summary `gate --summary` writes.
    failed = gate_runs.write_run(
        tmp_path, 1_000, gate_runs.seconds(p50_ms=40, seconds=60, seed=1), outcomes=("break",)
    )
    state = await verdict_report(
        campaign="nightly",
        tag="night",
        reason="window 0: fail",
        location=str(failed),
        return_state=True,
    )
    assert state.is_completed(), state
    artifact = await Artifact.aget("nightly-failed")
    assert artifact is not None
    assert artifact.data == gate_summary(load_run(str(failed)).gate, location=str(failed))
    assert "gate: FAIL" in artifact.data and "| --- |" in artifact.data


async def apply_report_deployment() -> None:
    """The `verdict-report` deployment and its trigger, applied as `agentsession serve`
    applies them (from deployments/prefect.yaml)."""
    from flows.serve import build_deployments

    # In a thread: called from a running loop, Prefect's to_deployment returns a coroutine.
    deployments = await asyncio.to_thread(build_deployments)
    (report,) = [d for d in deployments if d.name == "verdict-report"]
    await report.aapply()


async def report_runs(timeout: float) -> list:
    """Flow runs of `verdict-report` (the trigger creates them; nothing executes them here),
    once there is one; `timeout` only catches a trigger that never fired."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    deadline = time.monotonic() + timeout
    async with get_client() as client:
        while True:
            runs = await client.read_flow_runs(
                deployment_filter=DeploymentFilter(
                    name=DeploymentFilterName(any_=["verdict-report"])
                )
            )
            if runs or time.monotonic() > deadline:
                return runs
            await asyncio.sleep(0.5)


def start_campaign(values: dict, env: dict[str, str], where: Path) -> subprocess.Popen[str]:
    """`agentsession campaign --params where.json`, its stderr in where.err."""
    params = where.with_suffix(".json")
    params.write_bytes(orjson.dumps(values))
    with where.with_suffix(".err").open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "agentsession_core", "campaign", "--params", str(params)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )


def wait_until_each_says(procs: dict[str, subprocess.Popen[str]], errs: Path, line: str) -> None:
    """Until every campaign's stderr (errs/NAME.err) holds `line`; each must still run."""
    deadline = time.monotonic() + 300  # a cap for a campaign that never gets there
    for name, proc in procs.items():
        while line not in (errs / f"{name}.err").read_text():
            assert proc.poll() is None, (errs / f"{name}.err").read_text()[-3000:]
            assert time.monotonic() < deadline, (errs / f"{name}.err").read_text()[-3000:]
            time.sleep(0.2)


async def test_two_campaigns_on_one_substrate_take_turns_and_report_to_prefect(
    prefect_api, substrate: LocalSubstrateProcess, tmp_path
):
    """Two `agentsession campaign` processes against one standalone local substrate whose
    target is taken when they arrive (the test holds the limit's slot, as a campaign in
    progress would): each says it waits, and once the slot is free the target's global
    concurrency limit lets one drive it at a time, the other starting only after the first
    cleaned up. Each ends with its verdict event (one fail, one pass); the fail fires the
    example trigger; the engine's own lines are in each flow run's logs on the Prefect API."""
    from prefect.client.orchestration import get_client
    from prefect.concurrency.asyncio import concurrency

    from flows.target_limit import LEASE_SECONDS, ensure_limit, limit_name

    await apply_report_deployment()
    port = urlsplit(substrate.grpc_url).port  # a target is its control endpoint's host:port
    limit = limit_name(f"127.0.0.1:{port}")
    waiting = f"waiting for the global concurrency limit {limit}"
    env = {
        **os.environ,
        "PREFECT_API_URL": prefect_api,
        TOKEN_ENV: TOKEN,
        "PREFECT_LOGGING_TO_API_ENABLED": "true",  # the suite turns it off; a user has it on
    }
    # turn-a fails by an abort rule (any wake breaks it, a second into the hold), turn-b
    # passes. Neither judges the generator: on a busy machine a short window could be void.
    thresholds = {"turn-a": ["TimeToWake: p99 < 1ms (abort)"], "turn-b": None}
    procs: dict[str, subprocess.Popen[str]] = {}
    outs = {}
    await ensure_limit(limit)
    try:
        async with concurrency(limit, occupy=1, lease_duration=LEASE_SECONDS, strict=True):
            for name, rules in thresholds.items():
                values = small_campaign(
                    tmp_path,
                    name=name,
                    hold_minutes=0.2 if rules else 0.05,
                    target=ate_target(substrate),
                    generator={"void_when_saturated": False},
                )
                values["levels"] = [1.0]
                if rules:
                    values["thresholds"] = rules
                procs[name] = start_campaign(values, env, tmp_path / name)
            await asyncio.to_thread(wait_until_each_says, procs, tmp_path, waiting)
        # The slot is free: they take turns.
        for name, proc in procs.items():
            outs[name], _ = await asyncio.to_thread(proc.communicate, timeout=300)
    finally:
        for proc in procs.values():
            proc.kill()
    errs = {name: (tmp_path / f"{name}.err").read_text() for name in procs}
    for name, proc in procs.items():
        assert proc.returncode == 0, errs[name][-3000:]
    run_dirs = {name: Path(out.strip().splitlines()[-1]) for name, out in outs.items()}
    status = {n: orjson.loads((d / "status.json").read_bytes()) for n, d in run_dirs.items()}
    first, second = sorted(status, key=lambda n: status[n]["started_unix"])
    print(
        f"{first}: {status[first]['started_unix']:.2f} .. {status[first]['updated_unix']:.2f}; "
        f"{second}: from {status[second]['started_unix']:.2f}"
    )
    assert status["turn-a"]["status"] == "aborted" and status["turn-b"]["status"] == "completed"
    for name in procs:
        assert status[name]["actors_created"] == status[name]["actors_deleted"] == 6
        assert waiting in errs[name], errs[name][-3000:]
    # The final status.json is written once every actor is deleted (and the substrate's
    # metrics stopped); the second run's clock started after that, not beside it.
    assert status[second]["started_unix"] >= status[first]["updated_unix"]

    events = {name: await verdict_events(name, run_dirs[name]) for name in procs}
    logs = {name: await flow_run_logs(await flow_run_named(f"{name}-flow")) for name in procs}
    async with get_client() as client:
        gcl = await client.read_global_concurrency_limit_by_name(limit)
    assert (gcl.limit, gcl.active_slots) == (1, 0)
    reports = await report_runs(timeout=120)
    for name in procs:
        gate = orjson.loads((run_dirs[name] / "gate.json").read_bytes())
        (event,) = events[name]
        assert event.resource.id == f"agentsession.campaign.{name}"
        assert event.resource["agentsession.target"] == f"127.0.0.1:{port}"
        assert event.payload["verdict"] == gate["verdict"], event.payload
        assert event.payload["run_dir"] == str(run_dirs[name])
        # The engine's lines, read back from the API: the fill, a window's verdict, the wait.
        text = "\n".join(logs[name])
        assert "agentsession: turnover fill done" in text, text[-3000:]
        said = r"window \d ended early: abort rule" if thresholds[name] else r"window 0 at 1x: \w+"
        assert re.search(rf"agentsession: {said}", text), text[-3000:]
        assert waiting in text, text[-3000:]
    assert events["turn-a"][0].payload["verdict"] == "fail"
    assert events["turn-b"][0].payload["verdict"] == "pass"
    # The example trigger ran the report for the failed campaign, and only for it.
    assert [r.parameters.get("campaign") for r in reports] == ["turn-a"], reports
    assert reports[0].parameters["location"] == str(run_dirs["turn-a"])
