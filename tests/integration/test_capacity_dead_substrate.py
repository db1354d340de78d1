"""A capacity probe run wholly against a substrate that is already dead is an outage, not a
break (issue 38, docs/SPEC.md §6.7): the substrate is killed (SIGKILL) after the hold passed
and before the search's first probe; that probe's window is shorter than the watchdog's ten
seconds of silence, so it used to end before the run saw the outage and was booked `broke`,
a load break at a level the substrate never served. Now the probe is `aborted` with the
watchdog's line, the search ends there, and gate.json claims no break. If the box is slow
enough for the watchdog to fail the run inside the probe, the probe is aborted by that
instead: either way, never `broke`. A real local substrate, a real campaign in process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.run.run import Run
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import ate_target

pytestmark = pytest.mark.timeout(300)


def params(proc: LocalSubstrateProcess, out: Path) -> CampaignParams:
    return CampaignParams(
        target=ate_target(proc, atespace="dead", request_timeout_seconds=5.0),
        script="smoke",
        think_scale=0.05,
        seed=38,
        name="dead",
        out=str(out),
        hold_minutes=3 / 60,
        window_seconds=3,
        thresholds=["TimeToWake: failure_ratio < 0.5"],
        generator={"void_when_saturated": False},  # this box is shared; not under test
        population={
            "sessions": 8,
            "awake": 3,
            "target_rps": 0.5,
            "spawn_rate": 50,
            "registration_quiet_seconds": 0.5,
        },
        cleanup={"stop_grace_seconds": 2, "timeout_seconds": 30},
        abort={"rules": [], "delay_seconds": 0},
        search={
            "threshold": "TimeToWake: p99 < 5s",
            "start": 2,
            "factor": 2,
            "resolution": 0.25,
            "max_level": 8,
            "settle_seconds": 1,
            "window_seconds": 5,  # shorter than the watchdog's 10 s of silence
        },
    )


async def test_a_probe_against_a_substrate_already_dead_is_aborted_not_broke(
    tmp_path: Path,
) -> None:
    proc = LocalSubstrateProcess(workers=4, store=tmp_path / "store", log_path=tmp_path / "log")
    await asyncio.to_thread(proc.start)
    try:
        campaign_params = params(proc, tmp_path / "runs")
        run = Run(campaign_params, handle_signals=False)
        async with run:
            campaign = Campaign(campaign_params, run)
            await run.preflight()
            await run.register()
            await run.fill()
            for window in campaign.plan:
                await campaign.hold_window(window.index)
            assert not campaign.stopped and campaign.searching
            await asyncio.to_thread(proc.kill)  # before the first probe begins
            number = 0
            while campaign.searching:
                await campaign.probe(number)
                number += 1
            campaign.finish()
    finally:
        await asyncio.to_thread(proc.stop)
    assert run.result is not None
    capacity = json.loads((run.result.run_dir / "gate.json").read_text())["capacity"]
    probes = capacity["probes"]
    assert [p["level"] for p in probes] == [2.0], probes  # the first probe, and no other
    assert probes[0]["outcome"] == "aborted", probes[0]
    why = probes[0]["why"] or ""
    assert "the substrate answered none of the watchdog's probes" in why or (
        "substrate unreachable" in why
    ), probes[0]
    assert capacity["status"] == "aborted", capacity
    assert capacity["broke_at_level"] is None and capacity["broke_at_rate"] is None, capacity
    assert "broke" not in capacity["reason"], capacity["reason"]
