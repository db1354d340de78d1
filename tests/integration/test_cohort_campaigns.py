"""Spawn and burst campaigns (docs/SPEC.md §4.5, §4.6) against the real local substrate
(a subprocess, real sockets), judged window by window and gated by `agentsession gate`:

* a spawn campaign passes its kind's default thresholds (or is void on a busy machine), its
  windows judge the cohorts that ended in them, and stats.csv has upstream's rows
  (`summary`/TimeToReady_<k>pct, TimeToAllReady, `actor`/CrashCount's rule);
* a burst campaign holding its defaults and one rule no burst meets breaks, and the gate
  fails it (exit 1) naming the rule; its stats.csv has TimeToFirstResume_<k>pct,
  TimeToAllResumed and TimeToAllSuspended.
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
from agentsession_core.campaign.rules import DEFAULT_THRESHOLDS_BY_KIND
from agentsession_core.campaign.run import run_campaign
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def campaign(url: str, out: Path, kind: str, **extra: Any) -> CampaignParams:
    population = extra.pop("population")
    return CampaignParams(
        target={"substrate": url, "token": TOKEN},
        script="smoke",
        seed=11,
        name=f"cohorts-{kind}",
        tag="test",
        out=str(out),
        hold_minutes=10 / 60,  # two 5 s windows
        window_seconds=5,
        population={
            "kind": kind,
            "spawn_rate": 20,
            "registration_quiet_seconds": 0.5,
            "cohort_period_seconds": 2,
            "cohort_deadline_seconds": 20,
            **population,
        },
        cleanup={"stop_grace_seconds": 2.0},
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
    params = campaign(substrate.url, tmp_path, "spawn", population={"sessions": 3})
    assert params.thresholds == list(DEFAULT_THRESHOLDS_BY_KIND["spawn"])
    result = await run_campaign(params, handle_signals=False)
    assert result.run.status == "completed", result.run.reason
    run_dir = result.run_dir

    judged = windows(run_dir)
    assert len(judged) == 2
    for window in judged:
        assert window["outcome"] in ("pass", "void"), window
        rules = {t["threshold"]: t for t in window["thresholds"]}
        # Two or three cohorts of 3 end in each 5 s window: one sample each.
        cohorts = rules["TimeToAllReady: count >= 1"]
        assert cohorts["passed"] is True and 2 <= cohorts["observed"] <= 3, cohorts
        ready = rules["ActorTimeToReady: p99 < 10s"]
        assert ready["passed"] is True and ready["samples"] >= 6 and ready["observed"] > 0
        assert rules["CrashCount: events < 1"]["passed"] is True

    rows = csv_rows(run_dir)
    for name in ("TimeToReady_50pct", "TimeToReady_90pct", "TimeToReady_99pct", "TimeToAllReady"):
        row = rows[("summary", name)]
        assert int(row["Request Count"]) >= 4 and row["Failure Count"] == "0", row
    # Each cohort's actors are deleted once it is measured, not left for cleanup.
    assert int(rows[("grpc", "DeleteActor")]["Request Count"]) >= 12
    # The marks are figures, not requests: the Aggregated row counts the requests only.
    requests = sum(
        int(r["Request Count"]) for (kind, name), r in rows.items() if kind in ("grpc", "http")
    )
    assert int(rows[("", "Aggregated")]["Request Count"]) == requests

    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == result.verdict and gate["verdict"] in ("pass", "void")
    done = gate_cli(run_dir)
    assert done.returncode == (0 if gate["verdict"] == "pass" else 2), done.stderr


async def test_a_burst_campaign_that_misses_a_rule_breaks_and_the_gate_fails_it(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    unmeetable = "TimeToAllSuspended: max < 0.001ms"  # no burst parks its cohort that fast
    params = campaign(
        substrate.url,
        tmp_path,
        "burst",
        population={"sessions": 3},
        thresholds=[*DEFAULT_THRESHOLDS_BY_KIND["burst"], unmeetable],
    )
    result = await run_campaign(params, handle_signals=False)
    assert result.run.status == "completed", result.run.reason
    run_dir = result.run_dir

    judged = windows(run_dir)
    assert len(judged) == 2
    for window in judged:
        assert window["outcome"] in ("break", "void"), window
        rules = {t["threshold"]: t for t in window["thresholds"]}
        assert rules[unmeetable]["passed"] is False and rules[unmeetable]["observed"] > 0
        held = [r for text, r in rules.items() if text != unmeetable]
        assert all(r["passed"] is True for r in held), held
    assert "break" in {w["outcome"] for w in judged} or result.verdict == "void"

    rows = csv_rows(run_dir)
    for name in (
        "TimeToFirstResume_50pct",
        "TimeToFirstResume_99pct",
        "TimeToAllResumed",
        "TimeToSuspend_90pct",
        "TimeToAllSuspended",
        "ActorTimeToResume",
    ):
        row = rows[("summary", name)]
        assert int(row["Request Count"]) >= 4 and row["Failure Count"] == "0", (name, row)
    # Every burst woke all three actors: three per-actor resumes per TimeToAllResumed.
    bursts = int(rows[("summary", "TimeToAllResumed")]["Request Count"])
    assert int(rows[("summary", "ActorTimeToResume")]["Request Count"]) == 3 * bursts

    done = gate_cli(run_dir)
    if result.verdict == "void":  # a busy machine voided both windows: nothing to fail
        assert done.returncode == 2, done.stderr
        return
    assert result.verdict == "fail"
    assert done.returncode == 1, done.stderr
    assert unmeetable in done.stderr
