"""`agentsession gate --summary FILE` and the job summary (report/gate_summary.py,
docs/SPEC.md §6.1): the verdict as Markdown, read back as a Markdown reader reads its tables
(tests/unit/markdown_tables.py) and each cell checked against gate.json's own values; hostile
text stays inside its cell and its line; tables are bounded, regressions never cut; the
GITHUB_STEP_SUMMARY file is appended to, never truncated, and a failure there is a warning."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.cli import main
from agentsession_core.errors import UsageError
from agentsession_core.judge.gate import gate_document
from agentsession_core.judge.gate_document import GateDocument
from agentsession_core.judge.verdict import ThresholdResult, WindowVerdict
from agentsession_core.output.output_file import append_output
from agentsession_core.report.gate_summary import gate_summary
from tests.unit import gate_runs
from tests.unit.gate_runs import seconds, window
from tests.unit.markdown_tables import number, table_after, tables, unescape
from tests.unit.test_paired import arm_records, compared

SIDES = {"this run": "current", "baseline": "baseline"}


def check_rows(rows: list[dict[str, str]], metrics: list[dict[str, Any]], sides: dict) -> None:
    """Every judged figure is a row whose cells say what gate.json says of it."""
    by_metric = {m["metric"]: m for m in metrics}
    assert sorted(r["figure"] for r in rows) == sorted(by_metric)
    for row in rows:
        m = by_metric[row["figure"]]
        for column, field in sides.items():
            assert number(row[column]) == pytest.approx(m[field], rel=0.01, abs=0.06), row
        assert number(row["change (+ worse)"]) == pytest.approx(m["change"], abs=0.0006), row
        if m.get("interval"):
            low, high = row["interval"].strip("[]").split(", ")
            assert number(low) == pytest.approx(m["interval"][0], abs=0.0006), row
            assert number(high) == pytest.approx(m["interval"][1], abs=0.0006), row
        else:
            assert row["interval"] == "–"
        assert row["status"].split(":")[0].strip("*") == m["status"], row
        if m["status"] == "inconclusive":
            assert m["why"] in row["status"]


def test_the_baseline_table_says_what_the_comparison_judged(tmp_path: Path, capsys) -> None:
    base = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=600, seed=1))
    slow = gate_runs.write_run(tmp_path, 2, seconds(p50_ms=200, seconds=600, seed=2))
    out = tmp_path / "summary.md"
    assert main(["gate", str(slow), "--baseline", str(base), "--summary", str(out)]) == 1
    doc = json.loads(capsys.readouterr().out)
    text = out.read_text()
    assert text.splitlines()[0] == "### ❌ gate: FAIL — nightly"
    rows = table_after(text, "**Against the baseline**")
    metrics = doc["baseline"]["metrics"]
    check_rows(rows, metrics, SIDES)
    assert {m["status"] for m in metrics} >= {"regressed", "inconclusive"}
    # The regressions lead; a latency is shown in ms, the rate per second, as the report does.
    statuses = [r["status"].split(":")[0] for r in rows]
    assert statuses[: len(doc["baseline"]["regressions"])] == ["**regressed**"] * len(
        doc["baseline"]["regressions"]
    )
    wake = next(r for r in rows if r["figure"] == "TimeToWake.p50")
    assert wake["baseline"].endswith(" ms") and wake["this run"].endswith(" ms")
    rate = next(r for r in rows if r["figure"] == "requests.achieved_rps")
    assert rate["this run"].endswith("/s")
    assert f"Baseline: `{base}`" in text
    assert f"Report: `{slow}/report.html`" in text
    windows = table_after(text, "**Windows**")
    assert [(w["window"], w["outcome"]) for w in windows] == [
        (str(w["index"]), w["outcome"]) for w in doc["windows"]
    ]


def test_nothing_compared_is_said_and_the_run_s_own_figures_shown(tmp_path, capsys) -> None:
    run = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=120))
    out = tmp_path / "summary.md"
    assert main(["gate", str(run), "--summary", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    text = out.read_text()
    assert "**Nothing was compared** (no baseline, not a paired campaign)" in text
    rows = table_after(text, "**Nothing was compared**")
    assert [r["figure"] for r in rows] == list(doc["figures"])
    for row in rows:
        figure = doc["figures"][row["figure"]]
        assert number(row["value"]) == pytest.approx(figure["value"], rel=0.01, abs=0.006)
        assert int(row["samples"]) == figure["n"]
    # baseline auto with no earlier run: said so, not taken for "no regression"
    assert main(["gate", str(run), "--baseline", "auto", "--summary", str(out)]) == 0
    capsys.readouterr()
    assert "**No baseline compared**: no earlier comparable run" in out.read_text()


def test_the_paired_table_and_the_capacity_line() -> None:
    section = compared(arm_records(30, seed=1), arm_records(20, seed=2))
    capacity = {"status": "found", "reason": "held 4x, broke 8x", "probes": []}
    doc = gate_document(
        [window(0)], abort_reason=None, run_status="completed", paired=section, capacity=capacity
    )
    text = gate_summary(GateDocument.read(doc, "x"))
    head = f"**Candidate against the reference arm**: {section['blocks']} paired blocks"
    rows = table_after(text, head)
    check_rows(rows, section["metrics"], {"candidate": "candidate", "reference": "reference"})
    assert "**Capacity search**: found — held 4x, broke 8x" in text
    void = dict(section, status="void", why="6 of 12 paired blocks left", metrics=[])
    doc = gate_document([window(0)], abort_reason=None, run_status="completed", paired=void)
    text = gate_summary(GateDocument.read(doc, "x"))
    assert "— void: 6 of 12 paired blocks left" in text
    assert len(tables(text)) == 1  # the windows only


def hostile_doc() -> dict[str, Any]:
    threshold = "TimeToWake: p99 < 2s | evil\n# heading\n| a | b |"
    broke = WindowVerdict(
        index=0,
        level=1.0,
        start_unix=1.0,
        end_unix=31.0,
        outcome="break",
        results=[ThresholdResult(threshold, 2500.0, 120, False, "")],
        headline={},
    )
    doc = gate_document([broke], abort_reason=None, run_status="completed")
    doc["reason"] = "line one | two\n- a list?\n<img src=x> `tick` *bold* \\| \x07"
    return doc


def test_hostile_text_stays_in_its_cell_and_on_its_line() -> None:
    doc = hostile_doc()
    text = gate_summary(GateDocument.read(doc, "x"), location="/runs/a|b")
    lines = text.splitlines()
    reason = lines[2]
    assert reason.startswith("Reason: ") and not re.search(r"(?<!\\)<img", reason)
    assert not any(line.startswith(("- ", "# ")) for line in lines)
    (windows,) = tables(text)
    assert windows[0] == ["window", "level", "outcome", "missed / why"]
    (row,) = windows[1:]
    assert row[3] == "missed " + doc["windows"][0]["missed"][0]  # whole, newlines as <br>
    # The reason, read back, is the reason (the bell as a visible escape).
    assert unescape(reason.removeprefix("Reason: ")) == doc["reason"].replace("\x07", "\\x07")


def test_tables_are_bounded_and_no_regression_is_cut() -> None:
    metrics = [
        {
            "metric": f"Step_{i}.p50",
            "current": 10.0,
            "baseline": 10.0,
            "change": 0.0,
            "interval": [-0.1, 0.1],
            "status": "unchanged",
        }
        for i in range(45)
    ]
    metrics.append({**metrics[0], "metric": "TimeToWake.p50", "change": 1.0, "status": "regressed"})
    doc = gate_document([window(i) for i in range(40)], abort_reason=None, run_status="completed")
    doc["baseline"] = {"status": "compared", "runs": 1, "metrics": metrics}
    text = gate_summary(GateDocument.read(doc, "x"))
    figures, windows = tables(text)
    assert len(figures) == 1 + 30 and len(windows) == 1 + 24
    assert figures[1][0] == "TimeToWake.p50" and figures[1][-1] == "**regressed**"
    assert "… and 16 more figures (gate.json has them all)" in text
    assert "… and 16 more windows (gate.json has them all)" in text


# --------------------------------------------------------------------------- the job summary
def test_the_step_summary_is_appended_to_never_truncated(tmp_path, capsys, monkeypatch) -> None:
    run = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=120))
    step = tmp_path / "step_summary.md"
    step.write_text("## an earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    assert main(["gate", str(run)]) == 0
    assert main(["gate", str(run)]) == 0
    capsys.readouterr()
    text = step.read_text()
    assert text.startswith("## an earlier step\n\n### ✅ gate: PASS")
    assert text.count("### ✅ gate: PASS") == 2


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo", "unwritable"])
def test_a_step_summary_that_cannot_be_written_is_a_warning(
    tmp_path, capsys, monkeypatch, kind
) -> None:
    run = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=120))
    slow = gate_runs.write_run(tmp_path, 2, seconds(p50_ms=200, seconds=120, seed=2))
    step = tmp_path / "step"
    target = tmp_path / "elsewhere.md"
    if kind == "directory":
        step.mkdir()
    elif kind == "symlink":
        target.write_text("kept\n")
        step.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(step)  # no one reads it: appending would wait forever
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes a read-only file")
        step.write_text("kept\n")
        step.chmod(0o400)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    assert main(["gate", str(run)]) == 0  # the verdict's code, pass
    assert main(["gate", str(slow), "--baseline", str(run)]) == 1  # and fail
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 2, err
    assert warnings[0].startswith(f"agentsession gate: warning: GITHUB_STEP_SUMMARY {step}: ")
    if kind == "symlink":
        assert target.read_text() == "kept\n"


def test_append_output_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"cannot open it: Is a directory"):
        append_output("X", tmp_path, "text")
    fresh = tmp_path / "new.md"
    append_output("X", fresh, "one\n")
    append_output("X", fresh, "two\n")
    assert fresh.read_text() == "one\n\ntwo\n"


def test_an_unusable_run_has_a_summary_saying_so(tmp_path, capsys, monkeypatch) -> None:
    step = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    out = tmp_path / "summary.md"
    missing = tmp_path / "gone"
    assert main(["gate", str(missing), "--summary", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    text = out.read_text()
    shown = unescape(text)
    assert shown.startswith(f"### ⚪ gate: NOT JUDGED — {missing}\n")
    assert f"Reason: {err.removeprefix('agentsession: ')}" in shown
    assert step.read_text() == text


def test_a_summary_path_that_is_no_regular_file_is_refused(tmp_path: Path, capsys) -> None:
    run = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=120))
    assert main(["gate", str(run), "--summary", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--summary {tmp_path}: a directory is there; refused" in err
