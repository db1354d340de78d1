"""The campaign flow stopped, and spread over shards, under Prefect's test harness: a SIGTERM
to `agentsession campaign` (Prefect's cancellation) once its hold has begun, with one
generator and with two shards on a local Dask cluster, and a two-shard campaign run to its
end.

A stop is sent once the command says the fill is done: the hold starts there, and from then
on the run takes the signal itself, whatever it is doing at that moment (the window it cuts
short is judged void, docs/SPEC.md §6.6). A lost signal shows as a campaign that runs its
two minutes and exits 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import orjson
import pytest

from agentsession_core.output.run_dir import verify_manifest
from flows.credentials import TOKEN_ENV
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration import flow_harness
from tests.integration.conftest import TOKEN
from tests.integration.flow_harness import (
    TEST_TIMEOUT_S,
    demo_campaign,
    on_substrate,
    read_until,
    run_flow,
    small_campaign,
    verdict_events,
)

pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)
prefect_api = flow_harness.prefect_api  # this module's own Prefect API
# Far longer than a stop takes: a campaign that missed its signal ends in state, not in time.
LONG_HOLD = ["hold_minutes=2", "window_seconds=30"]


def test_sigterm_mid_hold_cleans_up_writes_artifacts_and_exits_143(prefect_api, tmp_path):
    """A scheduler or an operator stops the campaign process: the flow still deletes every
    actor it created and writes its artifacts, marked cancelled."""
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    args = demo_campaign("name=term", "tag=t1", f"dest={tmp_path / 'art'}", *LONG_HOLD)
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        read_until(proc, "turnover fill done")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in err and "received SIGTERM" in err
    run_dir = Path(out.strip().splitlines()[-1])
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "cancelled", status
    assert status["actors_created"] == 6 and status["actors_deleted"] == 6
    assert status["leaked_actors"] == []
    assert verify_manifest(run_dir) == []
    gate = orjson.loads((run_dir / "gate.json").read_bytes())
    assert gate["verdict"] == "void" and "cancelled" in gate["reason"], gate["reason"]
    assert gate["windows"][-1]["outcome"] == "void"  # the window the signal cut short
    # A cancelled campaign announces its verdict too (sent before the process exits).
    (event,) = asyncio.run(verdict_events("term", run_dir))
    assert event.payload["verdict"] == "void" and event.payload["reason"] == gate["reason"]


async def test_a_two_shard_campaign_runs_end_to_end_on_a_local_dask_cluster(
    prefect_api, substrate: LocalSubstrateProcess, tmp_path, monkeypatch
):
    """generator.shards=2 with no cluster address: a local Dask cluster of two worker
    processes, one run directory with the merged rows and each shard's health beside it."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    values = on_substrate({**small_campaign(tmp_path), "generator": {"shards": 2}}, substrate)
    state = await run_flow(values)
    assert state.is_completed(), state
    result = await state.result()
    assert result["run_status"] == "completed", result
    run_dir = Path(result["run_dir"])
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["generator"]["shards"] == 2 and status["generator"]["lost"] == []
    assert [s["state"] for s in status["shards"]] == ["stopped", "stopped"]
    assert [s["sessions"] for s in status["shards"]] == [3, 3]
    assert status["actors_created"] == status["actors_deleted"] == 6
    assert status["leaked_actors"] == []
    for k in (0, 1):
        health = orjson.loads((run_dir / f"shards/{k}/health.json").read_bytes())
        assert health["shard"] == k and health["state"] == "stopped" and health["monitored"]
    rows = [orjson.loads(r) for r in (run_dir / "stats.jsonl").read_text().splitlines()]
    metrics = {r["metric"] for r in rows}
    assert {"step_window", "turnover_window"} <= metrics
    created = next(r for r in rows if r["metric"].endswith("_CreateActor"))
    assert created["measurements"]["request_count"] == 6  # both shards' rows, merged
    windows = [orjson.loads(w) for w in (run_dir / "windows.jsonl").read_text().splitlines()]
    assert [w["index"] for w in windows] == [0, 1]
    assert windows[0]["end_unix"] == windows[1]["start_unix"]
    gate = orjson.loads((run_dir / "gate.json").read_bytes())
    assert gate["verdict"] == result["verdict"] and len(gate["windows"]) == 2
    assert "shard 0: agentsession: turnover fill done" in (run_dir / "logs.txt").read_text()
    assert verify_manifest(run_dir) == []


def test_sigterm_stops_every_shard(prefect_api, tmp_path):
    """Prefect's cancellation (SIGTERM to the flow-run process) with two shards: every
    shard stops and deletes its actors, their worker processes are gone, artifacts say
    cancelled."""
    import psutil

    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    args = demo_campaign(
        "name=term", "tag=shards", f"dest={tmp_path / 'art'}", *LONG_HOLD, "generator.shards=2"
    )
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        # The coordinator says so once every shard has filled (each shard's line names it).
        read_until(proc, "turnover fill done", unless="shard ")
        # Dask's processes (nannies, workers): every child but the local substrate.
        dask_procs = [
            c
            for c in psutil.Process(proc.pid).children(recursive=True)
            if "agentsession" not in " ".join(c.cmdline())
        ]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in err and "received SIGTERM" in err
    run_dir = Path(out.strip().splitlines()[-1])
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "cancelled", status
    assert [s["state"] for s in status["shards"]] == ["stopped", "stopped"]
    assert status["actors_created"] == 6 and status["actors_deleted"] == 6
    assert status["leaked_actors"] == []
    assert {s["pid"] for s in status["shards"]} <= {p.pid for p in dask_procs}
    # Gone with the command (a cap for the kernel to reap them, not a time to meet).
    _, alive = psutil.wait_procs(dask_procs, timeout=120)
    assert not alive, [" ".join(p.cmdline()) for p in alive]
    gate = orjson.loads((run_dir / "gate.json").read_bytes())
    assert gate["verdict"] == "void" and "cancelled" in gate["reason"], gate["reason"]
    assert verify_manifest(run_dir) == []
