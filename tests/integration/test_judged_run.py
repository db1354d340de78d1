"""Judged runs against a real local substrate (subprocess, real sockets):

* a threshold the substrate cannot meet yields `break` in every window, gate.json says fail
  and `agentsession gate` exits 1; the report is written;
* an abort rule trips on the first second whose sliding window its rule fails (as the run
  booked it), never before, ends the hold in that second, and the run still writes complete
  artifacts.

The generator's health is counted but voids no window here (generator.void_when_saturated
false): these windows judge the substrate's figures and the abort rule, and a saturated
second on a loaded machine says nothing of either.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.measure.stats import CONTROL_KIND
from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.run.run import Run
from local_substrate.launcher import LocalSubstrate, LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_target

pytestmark = pytest.mark.timeout(180)


def params(
    proc: Any, out: Path, name: str, token: str | None = None, **campaign: Any
) -> CampaignParams:
    return CampaignParams(
        target=ate_target(proc, token=token, request_timeout_seconds=5.0),
        script="smoke",
        population={
            "kind": "turnover",
            "sessions": 8,
            "awake": 3,
            "target_rps": 2.0,
            "registration_quiet_seconds": 1.0,
        },
        think_scale=0.05,
        seed=7,
        name=name,
        tag="test",
        out=str(out),
        cleanup={"timeout_seconds": 20.0, "stop_grace_seconds": 2.0},
        generator={"void_when_saturated": False},
        **campaign,
    )


def gate_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentsession_core", "gate", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_an_unmeetable_threshold_breaks_and_the_gate_exits_1(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    """Two 3 s windows judged against a wake threshold no wake meets: both break on it and
    pass the step one."""
    p = params(
        substrate,
        tmp_path / "out",
        "unmeetable",
        TOKEN,  # the session's shared substrate
        thresholds=[
            "TimeToWake: p99 < 0.001ms",  # no wake is that fast
            "Step_*: failure_ratio < 0.5",
        ],
        window_seconds=3,
        hold_minutes=6 / 60,
    )
    run = Run(p, handle_signals=False)
    async with run:
        campaign = Campaign(p, run)
        await run.preflight()
        await run.register()
        await run.fill()
        for window in campaign.plan:
            await campaign.hold_window(window.index)
        campaign.finish()
    assert run.result is not None and run.result.status == "completed"
    outcomes = [v.outcome for v in campaign.verdicts]
    assert outcomes == ["break", "break"], [v.void_reason for v in campaign.verdicts]
    for verdict in campaign.verdicts:
        wake, steps = verdict.results
        assert wake.passed is False and wake.samples > 0 and wake.observed > 0.001
        assert steps.passed is True

    run_dir = run.result.run_dir
    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == "fail"
    assert [w["outcome"] for w in gate["windows"]] == outcomes
    lines = (run_dir / "windows.jsonl").read_text().splitlines()
    assert len(lines) == 2
    step_rows = [
        json.loads(line)
        for line in (run_dir / "stats.jsonl").read_text().splitlines()
        if '"step_window"' in line
    ]
    assert [r["measurements"]["outcome"] for r in step_rows] == outcomes
    report = (run_dir / "report.html").read_text()
    assert "FAIL" in report and "<svg" in report and "<script" not in report
    assert verify_manifest(run_dir / "manifest.json") == []

    done = gate_cli(str(run_dir))
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["verdict"] == "fail"
    assert "FAIL" in done.stderr and "TimeToWake: p99 < 0.001ms" in done.stderr


async def test_an_abort_rule_trips_once_its_rule_fails_and_ends_the_hold(tmp_path: Path) -> None:
    # Once the substrate refuses every control call (a fault rule put through its control
    # endpoint) every tick's parks fail (a swap's wake then waits for its park, docs/SPEC.md
    # §4.2): the rule's condition holds from then on. Cleared again for the cleanup.
    rule_row, sliding, least = (CONTROL_KIND, "SuspendActor"), 3, 3
    async with LocalSubstrate(workers=3, store=tmp_path / "store") as local:
        p = params(
            local,
            tmp_path / "out",
            "refused",
            thresholds=[],
            abort={
                "rules": [f"SuspendActor: failure_ratio < 0.5 (min {least})"],
                "sliding_seconds": sliding,
                "delay_seconds": 2,
            },
            window_seconds=120,
            hold_minutes=2,
        )
        run = Run(p, handle_signals=False)
        async with run:
            campaign = Campaign(p, run)
            await run.preflight()
            await run.register()
            await run.fill()
            spy = MonitorSpy(campaign)  # made as the hold starts, as the window does
            hold = asyncio.create_task(campaign.hold_window(0))
            await spy.warmed_up(hold)  # the monitor judged a second of the healthy load
            faulted = time.time()
            await local.set_faults(["control:fail:1"])
            verdict = await hold
            await local.set_faults([])
            campaign.finish()
        reason = campaign.stop_reason
    assert reason is not None and reason.startswith("abort rule 'SuspendActor"), reason
    assert verdict is not None and verdict.outcome == "aborted"
    assert run.result is not None and run.result.status == "aborted"

    # The rule, from the run's books: the sliding window of whole seconds before the judged
    # one, from the second after the monitor started.
    assert campaign.monitor is not None
    first = run.recorder.second_of(campaign.monitor.start_ns) + 1

    def fails(second: int) -> bool:
        row = run.recorder.window_seconds(max(first, second - sliding), second).row(*rule_row)
        return row.count >= least and row.failures / row.count >= 0.5

    judged = spy.judged
    tripped = judged[-1]
    print(f"judged {[s % 1000 for s in judged]}; faulted {faulted % 1000:.1f}; {reason}")
    # It tripped on the first second it judged whose window fails the rule, after the fault,
    # and the hold ended in that second.
    assert fails(tripped) and not any(fails(s) for s in judged[:-1]), judged
    assert tripped > faulted, (tripped, faulted)
    assert tripped <= verdict.end_unix < tripped + 1, (tripped, verdict.end_unix)

    run_dir = run.result.run_dir
    status = json.loads((run_dir / "status.json").read_text())
    assert status["abort_reason"] == reason and status["stats_generated"] is True
    assert status["leaked_actors"] == []
    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == "fail" and gate["windows"][0]["outcome"] == "aborted"
    for name in (
        "stats.csv",
        "stats_history.csv",
        "stats.jsonl",
        "windows.jsonl",
        "report.html",
        "manifest.json",
    ):
        assert (run_dir / name).is_file(), name
    assert verify_manifest(run_dir / "manifest.json") == []
    assert gate_cli(str(run_dir)).returncode == 1


class MonitorSpy:
    """The seconds a campaign's abort monitor judged, in order (`judged`; the last one
    tripped, if it did). Its clock is the run's recorder's: a sharded run's is the merged
    stream's watermark."""

    def __init__(self, campaign: Campaign) -> None:
        monitor = campaign._monitor()
        self.judged: list[int] = []
        self._two = asyncio.Event()
        check = monitor.check

        def spied(now_ns: int | None = None) -> str | None:
            reason = check(now_ns)
            second = monitor._judged_second
            if second is not None and (not self.judged or self.judged[-1] != second):
                self.judged.append(second)
                if len(self.judged) >= 2:  # the first may be the window's empty edge
                    self._two.set()
            return reason

        monitor.check = spied  # type: ignore[method-assign]

    async def warmed_up(self, hold: asyncio.Task) -> None:
        """Until the monitor judged a second past its warm-up, without tripping."""
        two = asyncio.create_task(self._two.wait())
        await asyncio.wait({hold, two}, return_when=asyncio.FIRST_COMPLETED)
        two.cancel()
        assert not hold.done(), f"tripped before the fault: {hold.result()}"
