"""`agentsession report RUN [--baseline RUN] [-o FILE]` on local runs (S3: the integration
tests)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from agentsession_core.cli import main
from agentsession_core.cli.report import compare_runs, gate_of
from agentsession_core.output.run_dir import RunDir, verify_manifest
from agentsession_core.report.page import read_run
from tests.unit.report_run import build_run
from tests.unit.test_report import assert_self_contained


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    current, baseline = tmp_path / "runs" / "current", tmp_path / "runs" / "baseline"
    build_run(current, name="current", slow=8.0)  # wakes eight times slower than the baseline's
    build_run(baseline, name="baseline")
    return current, taken(baseline)


def taken(run: Path) -> Path:
    """build_run's runs break a window (their verdict is fail, which no gate takes as a
    baseline): this one's gate.json says pass, and the run is sealed, so the gate takes it."""
    doc = json.loads((run / "gate.json").read_text())
    doc.update(verdict="pass", reason="taken as a baseline by the test")
    (run / "gate.json").write_text(json.dumps(doc))
    RunDir(run).write_manifest()
    return run


def test_report_rebuilds_the_page_in_the_run_directory(runs, capsys):
    current, _ = runs
    assert main(["report", str(current)]) == 0
    out = capsys.readouterr().out.strip()
    assert out == str(current / "report.html")
    page = (current / "report.html").read_text()
    assert 'id="windows"' in page and 'id="baseline"' not in page
    assert "TimeToWake: p50 &lt; 300ms" in page  # the thresholds of campaign.json, drawn
    assert 'href="stats_history.csv"' in page
    assert_self_contained(page)


def test_rebuilding_a_sealed_run_in_place_keeps_it_verifiable(runs):
    current, _ = runs
    RunDir(current).write_manifest()
    (current / "report.html").write_text("an older page")
    assert main(["report", str(current)]) == 0
    assert verify_manifest(current) == []


def test_report_with_a_baseline_shows_both_runs_and_the_judged_deltas(runs, tmp_path, capsys):
    current, baseline = runs
    target = tmp_path / "out" / "compare.html"
    assert main(["report", str(current), "--baseline", str(baseline), "-o", str(target)]) == 0
    assert capsys.readouterr().out.strip() == str(target)
    page = target.read_text()
    assert '<section id="baseline">' in page and 'href="#baseline"' in page
    assert "With this baseline the gate says <b>FAIL</b>" in page
    assert re.search(r"<td>TimeToWake\.p99</td><td>[\d.]+</td><td>[\d.]+</td><td>\+\d", page)
    assert "REGRESSION" in page and "worse by more than 20%" in page
    assert "Per window, side by side" in page and "The two runs" in page
    assert "TimeToWake p99 per second, from each hold" in page
    assert 'href="../runs/current/stats.jsonl"' in page  # links relative to the page
    assert_self_contained(page)
    # A looser limit is the gate's too: nothing regresses by more than 500 %.
    assert (
        main(
            [
                "report",
                str(current),
                "--baseline",
                str(baseline),
                "-o",
                str(target),
                "--max-regression",
                "5",
            ]
        )
        == 0
    )
    assert "REGRESSION" not in target.read_text()


def test_comparison_is_the_gates(runs):
    current, baseline = runs
    comparison = compare_runs(read_run(current), read_run(baseline), None)
    assert comparison.verdict == "fail" and "regression" not in (comparison.reason or "")
    assert comparison.judged is not None
    metrics = {m.metric: m for m in comparison.judged.metrics}
    assert metrics["TimeToWake.p50"].regression and comparison.judged.max_regression == 0.2


def test_a_baseline_without_windows_is_shown_but_not_judged(runs, tmp_path):
    current, _ = runs
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "status.json").write_text('{"status": "completed"}')
    assert gate_of(read_run(bare)) is None
    target = tmp_path / "r.html"
    assert main(["report", str(current), "--baseline", str(bare), "-o", str(target)]) == 0
    page = target.read_text()
    assert "not judged: the baseline has no judged windows" in page
    assert "The gate refuses this baseline" in page and "manifest.json: missing" in page


def test_a_baseline_the_gate_refuses_is_drawn_with_the_gates_line(runs, tmp_path, capsys):
    current, _ = runs
    failed = tmp_path / "runs" / "failed"
    build_run(failed, name="failed")  # a window broke: its verdict is fail
    RunDir(failed).write_manifest()
    RunDir(current).write_manifest()
    assert main(["gate", str(current), "--baseline", str(failed)]) == 2
    line = capsys.readouterr().err.strip().removeprefix("agentsession: ")
    assert "not a baseline: its verdict is fail" in line
    target = tmp_path / "r.html"
    assert main(["report", str(current), "--baseline", str(failed), "-o", str(target)]) == 0
    page = target.read_text()
    assert "The gate refuses this baseline" in page and html.escape(line) in page
    assert "the gate says" not in page  # never a verdict the gate would not give
    assert "The two runs" in page  # still side by side


def test_an_unreadable_run_exits_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    assert main(["report", "s3://"]) == 2
