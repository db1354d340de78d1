"""The capacity search against what a hostile user does to it (issue 29, docs/SPEC.md §6.7,
§3.5):

* a search that cannot finish within its own bound (`search.factor 1.0001` with
  `search.resolution 1e-9`: tens of thousands of probes) is refused by the real
  `agentsession campaign` command in one line, saying how many probes, how long and which
  fields to change;
* a substrate killed (SIGKILL) in the middle of a probe is an outage, not a break: the search
  ends `aborted` with the outage as its reason, the probe is not `broke` and gate.json claims
  no break at its level; and the cleanup that follows, against a substrate that is gone, ends
  on its silence rule, not its deadline (it once spent 116 s of its 120 s retrying), and
  lists every actor it could not delete as leaked, with the reason.

The generator's saturated seconds are counted but void no window
(generator.void_when_saturated false): a saturated second on a loaded machine says nothing
about the substrate, and the hold must pass for the search to start.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import CleanupParams
from agentsession_core.run.run import Run
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import ate_target

pytestmark = pytest.mark.timeout(300)
CLI = [sys.executable, "-m", "agentsession_core"]
# The cleanup's default deadline: what it used to spend against a dead substrate.
CLEANUP_DEADLINE_S = CleanupParams().timeout_seconds


def test_a_search_that_cannot_finish_in_its_bound_is_refused_by_the_command(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    sets = [
        f"dest={tmp_path / 'art'}",
        "search.threshold=TimeToWake: p99 < 2s",
        "search.factor=1.0001",
        "search.resolution=1e-9",
    ]
    args = [*CLI, "campaign", "--preset", "demo"]
    for setting in sets:
        args += ["--set", setting]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    line = lines[0]
    assert "parameter search: " in line, line
    probes = re.search(r"make up to ([\d,]+) probes", line)
    assert probes and int(probes.group(1).replace(",", "")) > 20_000, line
    assert "days" in line and "at most 1,000 probes and 7 days" in line, line
    assert "search.factor" in line and "search.resolution" in line, line
    assert not (tmp_path / "art").exists()


def outage_params(proc: LocalSubstrateProcess, out: Path) -> CampaignParams:
    return CampaignParams(
        target=ate_target(proc, atespace="outage", request_timeout_seconds=5.0),
        script="smoke",
        think_scale=0.05,
        seed=29,
        name="outage",
        out=str(out),
        hold_minutes=3 / 60,
        window_seconds=3,
        thresholds=["TimeToWake: failure_ratio < 0.5"],
        population={
            "sessions": 8,
            "awake": 3,
            "target_rps": 0.5,
            "spawn_rate": 50,
            "registration_quiet_seconds": 0.5,
        },
        cleanup={"stop_grace_seconds": 2},  # the cleanup deadline stays the default 120 s
        generator={"void_when_saturated": False},
        abort={"rules": [], "delay_seconds": 0},
        search={
            "threshold": "TimeToWake: p99 < 5s",
            "start": 2,
            "factor": 2,
            "resolution": 0.25,
            "max_level": 8,
            "settle_seconds": 1,
            # Long enough for the watchdog to call the killed substrate gone inside it.
            "window_seconds": 25,
        },
    )


async def kill_during_the_first_probe(campaign: Campaign, proc: LocalSubstrateProcess) -> None:
    """SIGKILL the substrate once the first probe's judged window (after its settling) runs."""
    probe_s = campaign.params.search_window_seconds
    for _ in range(6000):  # polled; five minutes at most
        window = campaign.run.current_window
        if window is not None and window["index"] >= len(campaign.plan):
            if window["seconds"] == probe_s:
                break
        await asyncio.sleep(0.05)
    await asyncio.to_thread(proc.kill)


async def test_a_substrate_killed_mid_probe_is_an_outage_not_a_break(tmp_path: Path) -> None:
    proc = LocalSubstrateProcess(workers=4, store=tmp_path / "store", log_path=tmp_path / "log")
    await asyncio.to_thread(proc.start)
    try:
        params = outage_params(proc, tmp_path / "runs")
        run = Run(params, handle_signals=False)
        async with run:
            campaign = Campaign(params, run)
            await run.preflight()
            await run.register()
            await run.fill()
            for window in campaign.plan:
                if campaign.stopped:
                    break
                await campaign.hold_window(window.index)
            killer = asyncio.create_task(kill_during_the_first_probe(campaign, proc))
            number = 0
            while campaign.searching:
                await campaign.probe(number)
                number += 1
            campaign.finish()
            assert killer.done(), "the search ended before the substrate was killed"
    finally:
        await asyncio.to_thread(proc.stop)
    assert run.result is not None
    gate = json.loads((run.result.run_dir / "gate.json").read_text())
    capacity = gate["capacity"]
    print(f"capacity: {capacity['status']}: {capacity['reason']}")
    # The hold passed, the search started, and the outage cut its first probe short.
    assert capacity["anchor_level"] == 1.0, capacity
    probes = capacity["probes"]
    assert probes and probes[-1]["level"] == 2.0, probes
    # An outage is not a break: no probe broke, no level is claimed broken.
    assert all(p["outcome"] != "broke" for p in probes), probes
    assert probes[-1]["outcome"] == "aborted", probes[-1]
    assert "substrate unreachable" in (probes[-1]["why"] or ""), probes[-1]
    assert capacity["status"] == "aborted", capacity
    assert capacity["broke_at_level"] is None and capacity["broke_at_rate"] is None, capacity
    assert "broke" not in capacity["reason"], capacity["reason"]
    assert "substrate unreachable" in capacity["reason"], capacity["reason"]
    # The run failed on the outage (the substrate is gone), said once.
    assert run.result.status == "failed" and "substrate unreachable" in (run.result.reason or "")
    # Cleanup, against a substrate that is gone, lists every actor it could not delete, with
    # the reason (the watchdog's), and ends on its silence rule (UNANSWERED_S without an
    # answer), not its deadline, as its reasons and its own line say.
    status = json.loads((run.result.run_dir / "status.json").read_text())
    leaked = status["leaked_actors"]
    created = {leak["actor"] for leak in leaked if leak["created"] == "yes"}
    assert len(created) == status["actors_created"] - status["actors_deleted"] >= 8, status
    assert all("unreachable" in leak["reason"] for leak in leaked), leaked
    assert all("gave no answer to cleanup for" in leak["reason"] for leak in leaked), leaked
    logs = (run.result.run_dir / "logs.txt").read_text()
    took = re.search(r"cleanup: 0 actors deleted, \d+ left, ([\d.]+)s", logs)
    assert took and float(took.group(1)) < CLEANUP_DEADLINE_S, logs[-3000:]
