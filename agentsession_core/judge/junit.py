"""gate.json as JUnit XML (docs/SPEC.md §6.1, §7): what a CI system's test report reads.

One `<testsuite>` for the campaign, inside a `<testsuites>` root, with these test cases:

* `gate` — the verdict itself (pass passed, fail a `<failure>` with the reason, void
  `<skipped>` with it), so a CI that reads only the JUnit file sees what the exit code says;
* one per judged window (`window 0 @1x`): pass passed; break a `<failure>` with each missed
  rule on a line of its own; aborted a `<failure>` with the abort's reason; void `<skipped>`
  with the void reason;
* one per figure compared with a baseline (`baseline: TimeToWake.p50`) and per figure of a
  paired campaign (`paired: TimeToWake.p50`): regressed a `<failure>` with the regression's
  line; improved and unchanged passed; inconclusive `<skipped>` with its why: the gate
  decides nothing on an inconclusive figure, so it is neither a pass nor a failure. A
  comparison that compared nothing (not comparable, no baseline, a void paired comparison)
  is one skipped case saying why;
* `capacity search` when the campaign searched: found or above max_level passed, anything
  else skipped with the reason (a probe that broke is the search working; a capacity that
  regressed is the `baseline: capacity.rate` case).

A run the gate cannot judge at all (exit 2: unreadable, unsealed, a refused baseline) gets a
suite whose one `gate` case is an `<error>` with the gate's line (`unreadable_suite`).

XML 1.0 cannot carry most control characters, not even as character references, and no
surrogate code point: each is written as a visible `\\xNN` / `\\uNNNN` escape, so a hostile
rule name or reason never makes the file unreadable. Markup characters are escaped by the
serializer.
"""

from __future__ import annotations

import math
import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentsession_core.judge.compare import describe_metric
from agentsession_core.judge.gate import describe_paired
from agentsession_core.judge.gate_document import (
    Baseline,
    Capacity,
    GateDocument,
    JudgedFigure,
    Paired,
    RunInfo,
    Window,
)
from agentsession_core.output.output_file import write_output

# Every code point XML 1.0 refuses (C0 controls but tab, newline and return; surrogates;
# U+FFFE and U+FFFF).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# A message attribute is one line: CI systems show it as the failure's title.
_MESSAGE_LIMIT = 500
PASSED_COMPARISON = ("improved", "unchanged")
CAPACITY_PASSED = ("found", "above")
Describe = Callable[[JudgedFigure], str]


def xml_text(value: Any) -> str:
    """`value` as text XML 1.0 can hold: each code point it cannot, as a visible escape."""

    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _NOT_XML.sub(escape, str(value))


def _message(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MESSAGE_LIMIT else line[: _MESSAGE_LIMIT - 1] + "…"


@dataclass
class Case:
    """One `<testcase>`: `result` is None (passed), "failure", "error" or "skipped"."""

    name: str
    classname: str
    seconds: float = 0.0
    result: str | None = None
    message: str = ""
    kind: str = ""  # the failure's type attribute
    text: str = ""  # the failure's body
    out: str = ""  # system-out: what the case measured, for a person reading the report

    def element(self) -> ET.Element:
        case = ET.Element(
            "testcase",
            {
                "name": xml_text(self.name),
                "classname": xml_text(self.classname),
                "time": _seconds(self.seconds),
            },
        )
        if self.result in ("failure", "error"):
            failure = ET.SubElement(
                case,
                self.result,
                {"message": xml_text(_message(self.message)), "type": xml_text(self.kind)},
            )
            failure.text = xml_text(self.text or self.message)
        elif self.result == "skipped":
            ET.SubElement(case, "skipped", {"message": xml_text(_message(self.message))})
        if self.out:
            ET.SubElement(case, "system-out").text = xml_text(self.out)
        return case


@dataclass
class Suite:
    name: str
    cases: list[Case] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    started_unix: float | None = None
    seconds: float = 0.0

    def count(self, result: str) -> int:
        return sum(c.result == result for c in self.cases)


def _seconds(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) and value > 0 else "0.000"


# --------------------------------------------------------------------------- cases
def _gate_case(doc: GateDocument, classname: str) -> Case:
    verdict, reason = doc.verdict, doc.reason or ""
    case = Case("gate", classname, out=f"verdict {verdict}: {reason}")
    if verdict == "fail":
        case.result, case.kind, case.message = "failure", "fail", reason
    elif verdict != "pass":
        case.result, case.message = "skipped", f"void: {reason}"
    return case


def _window_case(w: Window, classname: str) -> Case:
    at = f" @{w.level:g}x" if w.level is not None else ""
    start, end = w.start_unix, w.end_unix
    seconds = end - start if start is not None and end is not None else 0.0
    case = Case(f"window {w.index}{at}", classname, seconds)
    missed = w.missed or []
    if w.outcome == "break":
        case.result, case.kind = "failure", "break"
        case.message = f"missed {'; '.join(missed) or 'a threshold'}"
        case.text = "\n".join(f"missed: {m}" for m in missed) or case.message
    elif w.outcome == "aborted":
        case.result, case.kind = "failure", "aborted"
        case.message = f"aborted: {w.abort_reason or 'an abort rule tripped'}"
    elif w.outcome != "pass":
        case.result, case.message = "skipped", f"void: {w.void_reason or 'no reason'}"
    return case


def _figure_case(
    m: JudgedFigure, prefix: str, classname: str, describe: Describe, against: str
) -> Case:
    line = _line(describe, m)
    case = Case(f"{prefix}: {m.metric}", classname, out=f"{m.status}: {line}")
    if m.status == "regressed":
        case.result, case.kind = "failure", "regressed"
        case.message = f"regressed against {against}: {line}"
    elif m.status not in PASSED_COMPARISON:
        # inconclusive (or a figure without a status): the gate decides nothing.
        case.result = "skipped"
        case.message = f"{m.status}: {m.why or 'no decision'}"
    return case


def _line(describe: Describe, m: JudgedFigure) -> str:
    try:
        return describe(m)
    except (TypeError, ValueError):  # a figure the line cannot be said of (no change)
        return m.metric


def _comparison_cases(section: Baseline | None, classname: str) -> list[Case]:
    if section is None:
        return []
    if section.status != "compared" or not section.metrics:
        why = section.why or ", ".join(section.differences or []) or "nothing"
        skipped = Case("baseline comparison", classname, result="skipped")
        skipped.message = f"{section.status}: {why}"
        return [skipped]
    return [
        _figure_case(m, "baseline", classname, describe_metric, "the baseline")
        for m in section.metrics
    ]


def _paired_cases(section: Paired | None, classname: str) -> list[Case]:
    if section is None:
        return []
    if section.status != "compared" or not section.metrics:
        skipped = Case("paired comparison", classname, result="skipped")
        skipped.message = f"{section.status}: {section.why or 'nothing compared'}"
        return [skipped]
    return [
        _figure_case(m, "paired", classname, describe_paired, "the reference arm")
        for m in section.metrics
    ]


def _capacity_case(capacity: Capacity | None, classname: str) -> list[Case]:
    if capacity is None:
        return []
    status, reason = capacity.status, capacity.reason or ""
    case = Case("capacity search", classname, out=f"{status}: {reason}")
    if status not in CAPACITY_PASSED:
        case.result, case.message = "skipped", f"{status}: {reason}"
    return [case]


def suite_of(doc: GateDocument) -> Suite:
    """The campaign's suite from a gate document (gate.json, or `gate`'s comparison)."""
    run = doc.run or RunInfo()
    name = run.name or "agentsession"
    suite_name = f"{name}/{run.tag}" if run.tag else name
    classname = f"agentsession.{name}"
    cases = [_gate_case(doc, classname)]
    cases += [_window_case(w, f"{classname}.windows") for w in doc.windows]
    cases += _paired_cases(doc.paired, f"{classname}.paired")
    cases += _comparison_cases(doc.baseline, f"{classname}.baseline")
    cases += _capacity_case(doc.capacity, f"{classname}.capacity")
    starts = [w.start_unix for w in doc.windows if w.start_unix is not None]
    ends = [w.end_unix for w in doc.windows if w.end_unix is not None]
    properties = {
        "verdict": doc.verdict,
        "reason": doc.reason or "",
        "run_status": str(doc.run_status),
    }
    for key, value in (("location", run.location), ("tag", run.tag)):
        if value is not None:
            properties[f"run.{key}"] = value
    return Suite(
        suite_name,
        cases,
        properties,
        started_unix=min(starts) if starts else None,
        seconds=max(ends) - min(starts) if starts and ends else 0.0,
    )


def unreadable_suite(where: str, why: str) -> Suite:
    """The suite of a run the gate could not judge (exit 2: unreadable, unsealed, a baseline
    that cannot be one): its `gate` case is an `<error>` with the gate's own line, so a CI
    that reads only this file does not take a missing verdict for a pass."""
    case = Case("gate", "agentsession", result="error", kind="unusable", message=why)
    return Suite(where, [case], {"verdict": "void", "reason": why})


# --------------------------------------------------------------------------- document
def _timestamp(unix: float | None) -> str:
    when = datetime.fromtimestamp(unix if unix is not None else 0.0, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S")  # Ant's pattern: no zone; this is UTC


def junit_xml(suites: Iterable[Suite]) -> bytes:
    """The JUnit document (UTF-8, with its declaration)."""
    suites = list(suites)
    root = ET.Element("testsuites", {"name": "agentsession"})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    host = xml_text(socket.gethostname() or "localhost")
    for i, suite in enumerate(suites):
        counts = {
            "tests": len(suite.cases),
            "failures": suite.count("failure"),
            "errors": suite.count("error"),
            "skipped": suite.count("skipped"),
        }
        for key, n in counts.items():
            totals[key] += n
        seconds += suite.seconds
        element = ET.SubElement(
            root,
            "testsuite",
            {
                "name": xml_text(suite.name),
                "id": str(i),
                **{k: str(v) for k, v in counts.items()},
                "time": _seconds(suite.seconds),
                "timestamp": _timestamp(suite.started_unix),
                "hostname": host,
            },
        )
        if suite.properties:
            props = ET.SubElement(element, "properties")
            for key, value in suite.properties.items():
                ET.SubElement(props, "property", {"name": xml_text(key), "value": xml_text(value)})
        element.extend(case.element() for case in suite.cases)
    root.attrib.update({k: str(v) for k, v in totals.items()})
    root.set("time", _seconds(seconds))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(path: str | Path, doc: dict[str, Any]) -> Path:
    """The gate document as JUnit XML at `path`, written atomically (a temp file and a
    rename: a CI reading it meanwhile sees the old file or the new one), and only as a
    regular file (output/output_file.py). `doc` is read as its model first (a document
    that is not a gate document: GateInputError)."""
    suite = suite_of(GateDocument.read(doc, "the gate document"))
    return write_output("--junit", Path(path), junit_xml([suite]))


def write_unreadable(path: str | Path, where: str, why: str) -> Path:
    return write_output("--junit", Path(path), junit_xml([unreadable_suite(where, why)]))


__all__ = [
    "Case",
    "Suite",
    "junit_xml",
    "suite_of",
    "unreadable_suite",
    "write_junit",
    "write_unreadable",
    "xml_text",
]
