"""Paired campaigns over real processes (docs/SPEC.md §6.8): a candidate and a reference arm
side by side, each against a local substrate of its own, judged as a paired difference.

* (A/A, both arms embedded local substrates of one build, passes: in
  test_flow_judging.py, through the Prefect flow;)
* A/B: the candidate's substrate (a process of its own) adds 200 ms to every wake, the
  reference is embedded; the generator's own loop is blocked for 2 s inside the second
  window, as a machine too busy to schedule the generator would: the stalled seconds drop
  their blocks from both arms, the windows and the comparison are still judged, and the gate
  fails naming TimeToWake and the arm;
* a reference that cannot be reached refuses the campaign in one line naming the arm;
* report.html shows the two arms side by side, looked at in headless Chromium.

In the A/B run only a stall saturates the generator: its other limits (loop lag, dispatch
lateness, CPU) are raised out of reach on the run's health, so the seconds this shared box's
load saturates drop none of the blocks the comparison needs, and the stall's seconds are
known: each whole second inside it has no heartbeat (measure/health.py). What a busy machine
does to a paired run's power is bench/paired_power.py's (bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import run_campaign_blocking
from agentsession_core.judge.hold_seconds import HOLD_SECONDS_FILE, parse
from agentsession_core.measure.health import GeneratorHealth
from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.run.run import Run, run_on_fresh_loop
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_client, ate_target
from tests.integration.ports import fixed_port
from tests.integration.test_report_browser import screenshot

pytestmark = pytest.mark.timeout(300)
ADDED_MS = 200  # unmistakable on a machine however busy: a wake takes 10-100 ms
STALL_S = 2.0  # holds at least one whole second without a heartbeat


def values(out: Path, name: str, **overrides: Any) -> dict[str, Any]:
    """Short paired windows: 5 swaps/s on each arm, paired blocks of 2 s."""
    base: dict[str, Any] = {
        "name": name,
        "tag": "test",
        "seed": 5,
        "out": str(out),
        "script": "smoke",
        "think_scale": 0.05,
        # About 3 wakes a second land in each arm (3 residents): 24 s keep some 60 past the
        # stall, where a p50 needs 40 (min_beyond).
        "hold_minutes": 24 / 60,
        "window_seconds": 12,
        "thresholds": ["TimeToWake: p99 < 10s", "Step_*: failure_ratio < 0.05"],
        "abort": {"rules": [], "sliding_seconds": 10, "delay_seconds": 10},
        "max_regression": 0.5,
        # A short hold's few wakes: p50 compared from 20 past it in each arm (default 50).
        "gate": {"block_seconds": 2, "min_blocks": 4, "min_beyond": 20},
        "population": {
            "kind": "turnover",
            "sessions": 12,
            "awake": 3,
            "target_rps": 5,
            "registration_quiet_seconds": 1,
        },
        "target": {"local_workers": 5},
        "reference": {"local_workers": 5},
        "cleanup": {"timeout_seconds": 20.0, "stop_grace_seconds": 0.5},  # nothing judged after
    }
    base.update(overrides)
    return base


def paired(run: Path) -> dict[str, Any]:
    return json.loads((run / "gate.json").read_text())["paired"]


def figure(section: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in section["metrics"] if m["metric"] == name)


def only_stalls_saturate(health: GeneratorHealth) -> None:
    """The generator's saturation limits out of reach but one: a second with no heartbeat."""
    health.loop_lag_p99_ms = health.dispatch_lag_p99_ms = health.cpu_percent_max = math.inf


def stall(run: Any) -> set[int]:
    """Block the generator's own loop for STALL_S: the whole seconds it held, by the run's
    clock."""
    first = run.recorder.second_of(run.recorder.now_ns())
    time.sleep(STALL_S)
    return set(range(first + 1, run.recorder.second_of(run.recorder.now_ns())))


async def stalled_campaign(p: CampaignParams) -> dict[str, Any]:
    """The campaign's phases, the generator stalled as the second window begins: it starts
    where the first ended (windows tile the hold), so the stall is inside it."""
    run = Run(p, handle_signals=False)
    stalled: set[int] = set()
    async with run:
        only_stalls_saturate(run.load.health)
        campaign = Campaign(p, run)
        await run.preflight()
        await run.register()
        await run.fill()
        for window in campaign.plan:
            if window.index == 1:
                stalled = stall(run)
            await campaign.hold_window(window.index)
        campaign.finish()
    assert run.result is not None
    return {"run_dir": run.result.run_dir, "stalled": stalled}


@pytest.fixture(scope="module")
def ab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The A/B campaign, its generator stalled for 2 s in the second window."""
    out = tmp_path_factory.mktemp("ab")
    with LocalSubstrateProcess(workers=5, faults=[f"wake:latency:fixed:{ADDED_MS}ms"]) as cand:
        p = CampaignParams(**values(out, "pairedab", target=ate_target(cand)))
        ab = run_on_fresh_loop(stalled_campaign(p))
        status = json.loads((ab["run_dir"] / "status.json").read_text())
        ab["left_on_candidate"] = asyncio.run(actors_left(cand, status))
    return ab


async def actors_left(proc: LocalSubstrateProcess, status: dict[str, Any]) -> int:
    client = ate_client(proc)
    try:
        return len(await client.list_actors(status["atespace"]))
    finally:
        await client.aclose()


def test_a_slower_candidate_fails_naming_time_to_wake_and_the_arm(ab: dict[str, Any]) -> None:
    run = ab["run_dir"]
    gate = json.loads((run / "gate.json").read_text())
    assert gate["verdict"] == "fail", gate["reason"]
    assert gate["reason"].startswith("the candidate regressed against the reference arm: ")
    assert "TimeToWake.p50" in gate["paired"]["regressions"]
    wake = figure(gate["paired"], "TimeToWake.p50")
    assert wake["candidate"] > wake["reference"] + ADDED_MS / 2
    assert wake["ratio_interval"][0] > 1.5
    # The gate command a release pipeline runs says the same.
    done = subprocess.run(
        [sys.executable, "-m", "agentsession_core", "gate", str(run)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "reference arm" in done.stderr
    # Re-judged with a margin the change does not reach: it passes.
    wide = subprocess.run(
        [sys.executable, "-m", "agentsession_core", "gate", str(run), "--max-regression", "50"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wide.returncode == 0, wide.stderr


def test_the_stalled_seconds_drop_their_blocks_from_both_arms(ab: dict[str, Any]) -> None:
    run, stalled = ab["run_dir"], ab["stalled"]
    assert stalled  # a 2 s stall holds a whole second
    records = parse((run / HOLD_SECONDS_FILE).read_text())
    marked = {
        arm: {r["t"] for r in records if r.get("saturated") and r.get("arm", "candidate") == arm}
        for arm in ("candidate", "reference")
    }
    assert stalled <= marked["candidate"] and marked["candidate"] == marked["reference"]
    assert all("no heartbeat" in r["saturated"] for r in records if r["t"] in stalled)
    # Blocks of 2 s over the hold's seconds: each one holding a marked second is dropped.
    section = paired(run)
    hold = sorted({r["t"] for r in records})
    dropped = {i // 2 for i, t in enumerate(hold) if t in marked["candidate"]}
    assert section["status"] == "compared"
    assert section["saturated_seconds"] == len(marked["candidate"])
    assert section["blocks_planned"] == math.ceil(len(hold) / 2)
    assert section["blocks_dropped"] == len(dropped) >= 1
    assert section["blocks"] == section["blocks_planned"] - section["blocks_dropped"]
    windows = [json.loads(line) for line in (run / "windows.jsonl").read_text().splitlines()]
    assert [w["outcome"] for w in windows] == ["pass", "pass"]  # judged, not void
    assert windows[1]["saturated_seconds"] == windows[1]["left_out_seconds"] >= len(stalled)


def test_every_artifact_says_which_arm_and_both_arms_clean_up(ab: dict[str, Any]) -> None:
    run = ab["run_dir"]
    rows = [json.loads(line) for line in (run / "stats.jsonl").read_text().splitlines()]
    arms = {(r["metric"], r.get("arm")) for r in rows}
    assert ("rps_TimeToWake", "candidate") in arms
    assert ("rps_TimeToWake:arm=reference", "reference") in arms
    assert ("turnover_window", "candidate") in arms and ("turnover_window", "reference") in arms
    with (run / "stats.csv").open() as f:
        names = {row["Name"] for row in csv.DictReader(f)}
    assert {"TimeToWake", "TimeToWake:arm=reference"} <= names
    status = json.loads((run / "status.json").read_text())
    reference = status["reference"]
    assert status["actors_created"] == status["actors_deleted"] == 12
    assert reference["actors_created"] == reference["actors_deleted"] == 12
    assert status["leaked_actors"] == [] and reference["leaked_actors"] == []
    assert ab["left_on_candidate"] == 0
    assert reference["atespace"] == f"{status['atespace']}-reference"
    assert (run / "substrate.reference.log").is_file()  # the reference substrate's own log
    assert "reference" in json.loads((run / "server_summary.json").read_text())
    assert verify_manifest(run) == []


def test_an_unreachable_reference_refuses_the_campaign_in_one_line(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    closed = f"127.0.0.1:{fixed_port()}"  # nothing listens there
    spec = values(
        tmp_path,
        "pairedrefused",
        target=ate_target(substrate, token=TOKEN),
        reference={"substrate": f"grpc://{closed}", "router": f"http://{closed}"},
    )
    result = run_campaign_blocking(CampaignParams(**spec))
    assert result.verdict == "void" and result.run.status == "refused"
    assert result.reason.startswith("the campaign could not start: reference arm: substrate ")
    assert "\n" not in result.reason
    logs = (result.run_dir / "logs.txt").read_text()
    assert logs.count("refused: reference arm:") == 1
    status = json.loads((result.run_dir / "status.json").read_text())
    assert status["actors_created"] == 0 and status["reference"]["actors_created"] == 0


def test_the_report_shows_the_arms_side_by_side(ab: dict[str, Any], tmp_path: Path) -> None:
    page = ab["run_dir"] / "report.html"
    html = page.read_text()
    assert 'id="paired"' in html and "Candidate against reference" in html
    assert "REGRESSION" in html and "TimeToWake p50 per second, both arms" in html
    screenshot(
        page,
        tmp_path,
        "paired",
        expect=("Candidate against reference", "candidate / reference", "TimeToWake.p50"),
    )
