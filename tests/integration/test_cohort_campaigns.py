"""Spawn and burst campaigns (docs/SPEC.md §4.5, §4.6) against the real local substrate
(a subprocess, real sockets), judged window by window and gated by `agentsession gate`:

* a spawn campaign passes its kind's default thresholds and the gate passes it (exit 0), its
  windows judge the cohorts that ended in them, and stats.csv has upstream's rows
  (`summary`/TimeToReady_<k>pct, TimeToAllReady, `actor`/CrashCount's rule);
* a burst campaign holding its defaults and one rule no burst meets breaks, and the gate
  fails it (exit 1) naming the rule; its stats.csv has TimeToFirstResume_<k>pct,
  TimeToAllResumed and TimeToAllSuspended.

Both judge the substrate, not the generator: the generator's void rule is off, so a busy
machine's saturated seconds void no window. How many cohorts a window holds depends on how
fast the machine runs them; the counts asserted follow from the kinds' rules instead (a
cohort starts at most every cohort_period_seconds, never while the last one runs).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import run_campaign
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_target

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
SIZE = 3  # actors per cohort
HOLD_S, PERIOD_S = 10, 2
# The k-th cohort starts no earlier than k periods after the hold's start (never while the
# last one runs): at most 6 start in the hold, its last instant included.
MOST = HOLD_S // PERIOD_S + 1


def campaign(proc: LocalSubstrateProcess, out: Path, kind: str, **extra: Any) -> CampaignParams:
    return CampaignParams(
        target=ate_target(proc, token=TOKEN),
        script="smoke",
        seed=11,
        name=f"cohorts-{kind}",
        tag="test",
        out=str(out),
        hold_minutes=HOLD_S / 60,  # two 5 s windows
        window_seconds=HOLD_S // 2,
        population={
            "kind": kind,
            "sessions": SIZE,
            "spawn_rate": 20,
            "registration_quiet_seconds": 0.5,
            "cohort_period_seconds": PERIOD_S,
            "cohort_deadline_seconds": 20,
        },
        cleanup={"stop_grace_seconds": 2.0},
        generator={"void_when_saturated": False},
        **extra,
    )


def gate_cli(run_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentsession_core", "gate", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def csv_rows(run_dir: Path) -> dict[tuple[str, str], dict[str, str]]:
    with (run_dir / "stats.csv").open() as f:
        return {(r["Type"], r["Name"]): r for r in csv.DictReader(f)}


def windows(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "windows.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


async def test_a_spawn_campaign_is_judged_on_its_cohorts_and_gated(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    params = campaign(substrate, tmp_path, "spawn")
    assert [t.text for t in params.thresholds] == [
        "ActorTimeToReady: p99 < 10s",
        "ActorTimeToReady: failure_ratio < 0.01",
        "TimeToAllReady: failure_ratio < 0.01",
        "TimeToAllReady: count >= 1",
        "CrashCount: events < 1",
    ]
    result = await run_campaign(params, handle_signals=False)
    assert result.run.status == "completed", result.run.reason
    run_dir = result.run_dir

    judged = windows(run_dir)
    assert [window["outcome"] for window in judged] == ["pass", "pass"], judged
    cohorts = ready = 0
    for window in judged:
        rules = {t["threshold"]: t for t in window["thresholds"]}
        assert all(rule["passed"] is True for rule in rules.values()), rules
        # Each window judges the cohorts that ended in it: one sample each, at least one.
        cohorts += int(rules["TimeToAllReady: count >= 1"]["observed"])
        ready += rules["ActorTimeToReady: p99 < 10s"]["samples"]
    # Every actor of an ended cohort was ready inside the hold (a cohort starts on it), and
    # the one running at its end may have some ready too.
    assert 2 <= cohorts <= MOST
    assert SIZE * cohorts <= ready < SIZE * (cohorts + 1)

    rows = csv_rows(run_dir)
    # The run's books hold the windows' cohorts, and the marks of one the hold's end cut.
    for name in ("TimeToReady_50pct", "TimeToReady_90pct", "TimeToReady_99pct", "TimeToAllReady"):
        row = rows[("summary", name)]
        assert cohorts <= int(row["Request Count"]) <= cohorts + 1, row
        assert row["Failure Count"] == "0", row
    # Each cohort's actors are deleted once it is measured, not left for cleanup: every
    # ended cohort's but the last, whose deletion the hold's end may cut, came before the
    # next cohort began.
    assert int(rows[("grpc", "DeleteActor")]["Request Count"]) >= SIZE * (cohorts - 1)
    # The marks are figures, not requests: the Aggregated row counts the requests only.
    requests = sum(
        int(r["Request Count"]) for (kind, name), r in rows.items() if kind in ("grpc", "http")
    )
    assert int(rows[("", "Aggregated")]["Request Count"]) == requests

    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == result.verdict == "pass", gate["reason"]
    done = gate_cli(run_dir)
    assert done.returncode == 0, done.stderr


async def test_a_burst_campaign_that_misses_a_rule_breaks_and_the_gate_fails_it(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    unmeetable = "TimeToAllSuspended: max < 0.001ms"  # no burst parks its cohort that fast
    defaults = [
        "ActorTimeToResume: p99 < 5s",
        "TimeToAllResumed: failure_ratio < 0.01",
        "TimeToAllSuspended: failure_ratio < 0.01",
        "TimeToAllResumed: count >= 1",
        "Step_*: failure_ratio < 0.01",
    ]
    assert [t.text for t in campaign(substrate, tmp_path, "burst").thresholds] == defaults
    params = campaign(substrate, tmp_path, "burst", thresholds=[*defaults, unmeetable])
    result = await run_campaign(params, handle_signals=False)
    assert result.run.status == "completed", result.run.reason
    run_dir = result.run_dir

    judged = windows(run_dir)
    assert [window["outcome"] for window in judged] == ["break", "break"], judged
    for window in judged:
        rules = {t["threshold"]: t for t in window["thresholds"]}
        assert rules[unmeetable]["passed"] is False and rules[unmeetable]["observed"] > 0
        held = [r for text, r in rules.items() if text != unmeetable]
        assert all(r["passed"] is True for r in held), held

    rows = csv_rows(run_dir)
    marks = {name: row for (kind, name), row in rows.items() if kind == "summary"}
    assert all(row["Failure Count"] == "0" for row in marks.values()), marks
    counts = {name: int(row["Request Count"]) for name, row in marks.items()}
    # At least one burst a window (count >= 1 held in both); the hold's end may cut the last
    # burst after its resumes, before its parks ended.
    bursts = counts["TimeToAllResumed"]
    assert 2 <= bursts <= MOST
    for mark in ("TimeToFirstResume_50pct", "TimeToFirstResume_99pct"):
        assert bursts <= counts[mark] <= bursts + 1, (mark, counts)
    for mark in ("TimeToSuspend_90pct", "TimeToAllSuspended"):
        assert bursts - 1 <= counts[mark] <= bursts, (mark, counts)
    # Every burst woke all three actors; one the hold's end cut may have woken some.
    assert SIZE * bursts <= counts["ActorTimeToResume"] < SIZE * (bursts + 1)

    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == result.verdict == "fail", gate["reason"]
    done = gate_cli(run_dir)
    assert done.returncode == 1, done.stderr
    assert unmeetable in done.stderr
