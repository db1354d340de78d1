"""`agentsession report RUN --baseline auto` (issue #29): the report beside the newest of the
last good comparable runs of the same campaign, the comparison against all of them, as
`agentsession gate --baseline auto` judges it (judge/baselines.py `auto_baselines`); a run
with no earlier good run says so on the page. Real commands over stored, sealed runs in the
campaign layout (tests/unit/gate_runs.py)."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit import gate_runs
from tests.unit.gate_runs import seconds

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

CLI = [sys.executable, "-m", "agentsession_core"]


def command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


def test_report_baseline_auto_draws_the_newest_good_run_and_judges_against_all(
    tmp_path: Path,
) -> None:
    good = [
        gate_runs.write_run(tmp_path, ts, seconds(p50_ms=40 + ts, seconds=120, seed=ts))
        for ts in (1, 2, 3)
    ]
    void = gate_runs.write_run(tmp_path, 4, seconds(p50_ms=40, seconds=120), outcomes=("void",))
    current = gate_runs.write_run(tmp_path, 5, seconds(p50_ms=120, seconds=120, seed=5))
    page = tmp_path / "page.html"
    done = command("report", str(current), "--baseline", "auto", "-o", str(page))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == str(page) and "Traceback" not in done.stderr
    text = page.read_text()
    assert '<section id="baseline">' in text
    # Drawn beside the newest good run (the void night is no baseline), judged against all three.
    assert f"baseline: auto, drawn beside {html.escape(str(good[-1]))}" in text, text[:2000]
    assert str(void) not in text
    assert "the last 3 good comparable runs" in text
    gate = command("gate", str(current), "--baseline", "auto")
    doc = json.loads(gate.stdout)
    assert doc["baseline"]["locations"] == [str(p) for p in good]
    assert f"With this baseline the gate says <b>{doc['verdict'].upper()}</b>" in text
    assert doc["verdict"] == "fail" and "REGRESSION" in text  # three times slower
    # --history 1: only the newest good run.
    done = command("report", str(current), "--baseline", "auto", "--history", "1", "-o", str(page))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the last good comparable run" in page.read_text()


def test_report_baseline_auto_without_an_earlier_good_run_says_so(tmp_path: Path) -> None:
    first = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=60))
    done = command("report", str(first), "--baseline", "auto")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    text = (first / "report.html").read_text()
    assert '<section id="baseline">' in text
    assert "no earlier comparable run of this campaign" in text
    assert "The two runs" not in text  # nothing to draw beside


def test_report_baseline_auto_outside_the_campaign_layout_is_one_line(tmp_path: Path) -> None:
    run = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=60))
    moved = tmp_path / "elsewhere"
    run.rename(moved)
    done = command("report", str(moved), "--baseline", "auto")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--baseline auto needs a run in the campaign layout" in lines[0]
