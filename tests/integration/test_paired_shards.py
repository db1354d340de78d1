"""A paired campaign over shards (docs/SPEC.md §6.8, §5.8): every shard drives both arms,
on a real Dask cluster of worker processes, against two local substrates of their own.

* A/B over two shards: the candidate's substrate adds 200 ms to every wake; the merged
  stream holds both arms' rows from both shards, the campaign fails naming TimeToWake and
  the arm, and both arms' actors are deleted on both substrates;
* a shard's worker killed mid-hold, once the coordinator knows its reference actors: the
  coordinator deletes the lost shard's actors on *both* substrates (its reference actors
  too), and nothing is left on either.

The A/B run's saturation limits are out of reach on the coordinator's merged health (from
which a paired run's saturated seconds come), so this shared box's busy seconds drop none of
the blocks the comparison needs; that saturated seconds drop blocks from both arms is
test_paired_campaign.py's.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.shards.load import ShardedLoad
from agentsession_core.judge.hold_seconds import HOLD_SECONDS_FILE, parse
from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.run.run import Run
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import ate_client, ate_target
from tests.integration.dask_cluster import local_scheduler
from tests.integration.test_paired_campaign import only_stalls_saturate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
ADDED_MS = 200


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    with local_scheduler(2) as address:
        yield address


def params(
    out: Path,
    name: str,
    candidate: LocalSubstrateProcess,
    reference: LocalSubstrateProcess,
    scheduler: str,
    **more: Any,
):
    values: dict[str, Any] = {
        "name": name,
        "tag": "test",
        "seed": 5,
        "out": str(out),
        "script": "smoke",
        "think_scale": 0.05,
        "hold_minutes": 20 / 60,
        "window_seconds": 20,
        "thresholds": ["TimeToWake: p99 < 10s"],
        "abort": {"rules": []},
        "max_regression": 0.5,
        "gate": {"block_seconds": 2, "min_blocks": 4, "min_beyond": 20},
        "population": {
            "kind": "turnover",
            "sessions": 8,
            "awake": 4,
            "target_rps": 4,
            "registration_quiet_seconds": 0.5,
        },
        "target": ate_target(candidate, request_timeout_seconds=5),
        "reference": ate_target(reference, request_timeout_seconds=5),
        "cleanup": {"timeout_seconds": 20, "stop_grace_seconds": 1},
        "generator": {"shards": 2, "cluster": scheduler},
    }
    values.update(more)
    return CampaignParams(**values)


async def actors_on(proc: LocalSubstrateProcess, atespace: str) -> list[str]:
    client = ate_client(proc)
    try:
        return [a.name for a in await client.list_actors(atespace)]
    finally:
        await client.aclose()


async def held_campaign(p: CampaignParams) -> Path:
    """The campaign's phases, with no saturated second in the merged view (module docstring);
    its run directory."""
    run = Run(p, handle_signals=False)
    async with run:
        only_stalls_saturate(run.load.health)  # the merged view has no heartbeat: none saturates
        campaign = Campaign(p, run)
        await run.preflight()
        await run.register()
        await run.fill()
        for window in campaign.plan:
            await campaign.hold_window(window.index)
        campaign.finish()
    assert run.result is not None
    return run.result.run_dir


async def test_a_paired_campaign_over_two_shards_fails_a_slower_candidate(scheduler, tmp_path):
    fault = [f"wake:latency:fixed:{ADDED_MS}ms"]
    with (
        LocalSubstrateProcess(workers=4, faults=fault) as cand,
        LocalSubstrateProcess(workers=4) as ref,
    ):
        run_dir = await held_campaign(params(tmp_path, "pairshards", cand, ref, scheduler))
        status = json.loads((run_dir / "status.json").read_text())
        left = (
            await actors_on(cand, status["atespace"]),
            await actors_on(ref, status["reference"]["atespace"]),
        )
    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == "fail", gate["reason"]
    assert gate["reason"].startswith("the candidate regressed against the reference arm: ")
    assert "TimeToWake.p50" in gate["paired"]["regressions"]
    wake = next(m for m in gate["paired"]["metrics"] if m["metric"] == "TimeToWake.p50")
    assert wake["candidate"] > wake["reference"] + ADDED_MS / 2
    # Both shards drove both arms: each arm's wakes came from both shards' actor prefixes.
    assert [s["state"] for s in status["shards"]] == ["stopped", "stopped"]
    assert gate["paired"]["blocks_dropped"] == 0 and gate["paired"]["status"] == "compared"
    records = parse((run_dir / HOLD_SECONDS_FILE).read_text())
    assert {r.get("arm", "candidate") for r in records} == {"candidate", "reference"}
    rows = [json.loads(line) for line in (run_dir / "stats.jsonl").read_text().splitlines()]
    counts = {r["metric"]: r["measurements"].get("request_count", 0) for r in rows}
    assert counts["rps_TimeToWake"] > 0 and counts["rps_TimeToWake:arm=reference"] > 0
    reference = status["reference"]
    assert reference["atespace"] == f"{status['atespace']}-reference"
    assert reference["actors_created"] == reference["actors_deleted"] >= 8
    assert status["actors_created"] == status["actors_deleted"] >= 8
    assert status["leaked_actors"] == [] and reference["leaked_actors"] == []
    assert left == ([], [])
    assert verify_manifest(run_dir) == []


async def test_a_lost_shard_s_reference_actors_are_deleted_too(scheduler, tmp_path):
    with LocalSubstrateProcess(workers=4) as cand, LocalSubstrateProcess(workers=4) as ref:
        # Both shards needed: losing one ends the run (no carry-on to wait for).
        generator = {"shards": 2, "min_shards": 2, "cluster": scheduler}
        p = params(tmp_path, "pairlost", cand, ref, scheduler, generator=generator)
        run = Run(p, handle_signals=False)
        assert isinstance(run.load, ShardedLoad)
        async with run:
            campaign = Campaign(p, run)
            await run.preflight()
            await run.register()
            await run.fill()
            window = asyncio.create_task(campaign.hold_window(0))
            assert run.load.stream is not None
            # Mid-hold, once the shard's reference actors' names reached the coordinator
            # (state the product holds; there is no event to await: polled).
            while run.current_window is None or not run.load.stream.reference_names[1]:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
            published = set(run.load.stream.reference_names[1])
            os.kill(run.load.fleet.info[1]["pid"], signal.SIGKILL)
            verdict = await window
            campaign.finish()
        assert run.result is not None
        status = json.loads((run.result.run_dir / "status.json").read_text())
        left = (
            await actors_on(cand, status["atespace"]),
            await actors_on(ref, status["reference"]["atespace"]),
        )
    assert published  # the shard's reference actors, known before it died, are gone too
    assert verdict is not None and verdict.outcome == "void"
    assert "shard 1 lost" in (verdict.void_reason or "")
    assert [s["state"] for s in status["shards"]] == ["stopped", "lost"]
    assert status["leaked_actors"] == [] and status["reference"]["leaked_actors"] == []
    assert left == ([], [])
