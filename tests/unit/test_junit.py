"""`agentsession gate --junit FILE` (judge/junit.py): the verdict as JUnit XML, read back by a
JUnit parser (junitparser) as a CI system reads it, and validated against the JUnit schema
CI systems read (tests/data/junit.xsd, written from the format's facts, checked by
xmlschema): a case per judged window and per compared figure, failures carrying the rule or
the regression line, inconclusive figures and void windows skipped, hostile text escaped."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml, Skipped, TestCase

from agentsession_core.cli import main
from agentsession_core.judge.gate import gate_document
from agentsession_core.judge.gate_document import GateDocument
from agentsession_core.judge.junit import junit_xml, suite_of, write_junit, xml_text
from agentsession_core.judge.verdict import ThresholdResult, WindowVerdict
from tests.unit import gate_runs
from tests.unit.gate_runs import seconds, window
from tests.unit.test_paired import arm_records, compared

SCHEMA = xmlschema.XMLSchema(Path(__file__).parent.parent / "data" / "junit.xsd")


def cases(path: Path) -> dict[str, TestCase]:
    """Every case of the file's one suite by name, after the schema check."""
    SCHEMA.validate(str(path))
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert len(suites) == 1
    return {case.name: case for case in suites[0]}


def result(case: TestCase) -> Any:
    found = case.result
    return found[0] if found else None


def test_a_regression_against_a_baseline_is_a_failed_figure_case(tmp_path: Path, capsys) -> None:
    base = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=600, seed=1))
    slow = gate_runs.write_run(tmp_path, 2, seconds(p50_ms=200, seconds=600, seed=2))
    out = tmp_path / "junit.xml"
    assert main(["gate", str(slow), "--baseline", str(base), "--junit", str(out)]) == 1
    doc = json.loads(capsys.readouterr().out)
    found = cases(out)
    gate = result(found["gate"])
    assert isinstance(gate, Failure) and gate.message.startswith("regression against the baseline")
    assert found["window 0 @1x"].is_passed
    assert float(found["window 0 @1x"].time) == pytest.approx(30.0)
    wake = result(found["baseline: TimeToWake.p50"])
    assert isinstance(wake, Failure) and wake.type == "regressed"
    assert wake.message.startswith("regressed against the baseline: TimeToWake.p50 +")
    assert "vs" in wake.message and "samples" in wake.message
    # Every compared figure is a case, each as the comparison judged it.
    for m in doc["baseline"]["metrics"]:
        case = found[f"baseline: {m['metric']}"]
        if m["status"] == "regressed":
            assert case.is_failure
        elif m["status"] == "inconclusive":
            assert case.is_skipped and m["why"] in result(case).message
        else:
            assert case.is_passed
    assert any(m["status"] == "inconclusive" for m in doc["baseline"]["metrics"])
    xml = JUnitXml.fromfile(str(out))
    suite = next(iter(xml))
    assert suite.tests == 2 + len(doc["baseline"]["metrics"])
    assert suite.failures == 1 + len(doc["baseline"]["regressions"])


def test_windows_break_abort_and_void_as_failures_and_skips(tmp_path: Path) -> None:
    broke = WindowVerdict(
        index=1,
        level=2.0,
        start_unix=1_030.0,
        end_unix=1_060.0,
        outcome="break",
        results=[
            ThresholdResult("TimeToWake: p99 < 2s", 2500.0, 120, False, ""),
            ThresholdResult("Step_*: failure_ratio < 0.01", 0.05, 300, False, ""),
        ],
        headline={},
    )
    aborted = WindowVerdict(
        index=2,
        level=2.0,
        start_unix=1_060.0,
        end_unix=1_070.0,
        outcome="aborted",
        results=[],
        headline={},
        abort_reason="TimeToWake: p99 < 5s tripped",
    )
    doc = gate_document(
        [window(0), broke, aborted, window(3, "void")],
        abort_reason="TimeToWake: p99 < 5s tripped",
        run_status="aborted",
        run={"name": "nightly", "tag": "night"},
    )
    path = write_junit(tmp_path / "j.xml", doc)
    found = cases(path)
    assert found["window 0 @1x"].is_passed
    failure = result(found["window 1 @2x"])
    assert isinstance(failure, Failure) and failure.type == "break"
    assert "TimeToWake: p99 < 2s" in failure.message
    assert failure.text.splitlines() == [
        "missed: TimeToWake: p99 < 2s",
        "missed: Step_*: failure_ratio < 0.01",
    ]
    abort = result(found["window 2 @2x"])
    assert isinstance(abort, Failure) and abort.message == "aborted: TimeToWake: p99 < 5s tripped"
    void = result(found["window 3 @1x"])
    assert isinstance(void, Skipped) and void.message == "void: generator saturated 2 s"
    assert found["gate"].is_failure
    suite = next(iter(JUnitXml.fromfile(str(path))))
    assert suite.name == "nightly/night"


def test_a_void_verdict_is_a_skipped_gate_case(tmp_path: Path) -> None:
    doc = gate_document([window(0, "void")], abort_reason=None, run_status="completed")
    found = cases(write_junit(tmp_path / "j.xml", doc))
    assert found["gate"].is_skipped and "void" in result(found["gate"]).message


def test_paired_figures_and_a_capacity_search_have_their_cases(tmp_path: Path) -> None:
    section = compared(arm_records(30, seed=1), arm_records(20, seed=2))
    capacity = {"status": "found", "reason": "held 4x, broke 8x", "probes": []}
    doc = gate_document(
        [window(0)],
        abort_reason=None,
        run_status="completed",
        paired=section,
        capacity=capacity,
    )
    found = cases(write_junit(tmp_path / "j.xml", doc))
    wake = result(found["paired: TimeToWake.p50"])
    assert isinstance(wake, Failure)
    assert wake.message.startswith("regressed against the reference arm: TimeToWake.p50 +")
    assert "(candidate/reference, 60 blocks)" in wake.message
    assert len([n for n in found if n.startswith("paired: ")]) == len(section["metrics"])
    assert found["capacity search"].is_passed
    assert "held 4x" in found["capacity search"].system_out
    void = dict(section, status="void", why="6 of 12 paired blocks left", metrics=[])
    none = {"status": "void", "reason": "a probe was void", "probes": []}
    doc = gate_document(
        [window(0)], abort_reason=None, run_status="completed", paired=void, capacity=none
    )
    found = cases(write_junit(tmp_path / "j2.xml", doc))
    assert result(found["paired comparison"]).message == "void: 6 of 12 paired blocks left"
    assert result(found["capacity search"]).message == "void: a probe was void"


def test_a_baseline_that_compared_nothing_is_one_skipped_case(tmp_path: Path, capsys) -> None:
    first = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=60))
    out = tmp_path / "junit.xml"
    assert main(["gate", str(first), "--baseline", "auto", "--junit", str(out)]) == 0
    found = cases(out)
    skipped = result(found["baseline comparison"])
    assert isinstance(skipped, Skipped)
    assert skipped.message == "none: no earlier comparable run of this campaign"
    assert found["gate"].is_passed


def test_a_run_the_gate_cannot_read_is_an_error_case(tmp_path: Path, capsys) -> None:
    out = tmp_path / "junit.xml"
    assert main(["gate", str(tmp_path / "missing"), "--junit", str(out)]) == 2
    line = capsys.readouterr().err
    found = cases(out)
    error = result(found["gate"])
    assert isinstance(error, Error) and error.message in line
    assert next(iter(JUnitXml.fromfile(str(out)))).errors == 1


def test_an_unwritable_junit_file_is_one_line_naming_the_flag(tmp_path: Path, capsys) -> None:
    run = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=60))
    assert main(["gate", str(run), "--junit", str(tmp_path / "no" / "such" / "j.xml")]) == 2
    assert "--junit " in capsys.readouterr().err


HOSTILE = 'p99 < 2s]]><x a="1"/>&amp; \x00\x1b[31m\x7f\ud800\ufffe end'


def test_hostile_text_is_escaped_and_the_file_stays_valid(tmp_path: Path) -> None:
    hostile = WindowVerdict(
        index=0,
        level=1.0,
        start_unix=1_000.0,
        end_unix=1_030.0,
        outcome="break",
        results=[ThresholdResult(HOSTILE, 1.0, 1, False, "")],
        headline={},
    )
    doc = gate_document(
        [hostile, window(1, "void")],
        abort_reason=None,
        run_status="completed",
        run={"name": "night\x01<ly>", "location": "s3://b/\x0b"},
    )
    doc["windows"][1]["void_reason"] = "saturated \x08 & <>"
    path = tmp_path / "j.xml"
    path.write_bytes(junit_xml([suite_of(GateDocument.read(doc, "hostile"))]))
    ET.parse(path)  # well-formed
    found = cases(path)
    failure = result(found["window 0 @1x"])
    assert 'p99 < 2s]]><x a="1"/>&amp; \\x00\\x1b[31m\x7f\\ud800\\ufffe end' in failure.text
    assert result(found["window 1 @1x"]).message == "void: saturated \\x08 & <>"
    suite = next(iter(JUnitXml.fromfile(str(path))))
    assert suite.name == "night\\x01<ly>"
    assert xml_text("tab\tnew\nline") == "tab\tnew\nline"  # XML holds these as they are
