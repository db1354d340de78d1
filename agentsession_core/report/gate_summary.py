"""gate.json as the Markdown a CI system shows (docs/SPEC.md §6.1): `agentsession gate
--summary FILE`, the job summary GitHub Actions reads from `GITHUB_STEP_SUMMARY`, and the
campaign flow's verdict artifact in Prefect all draw this one view of the typed gate
document (judge/gate_document.py).

What it shows, in order: the verdict line (verdict, campaign/tag, reason); the judged
figures, one table per comparison — a paired campaign's candidate against its reference arm
(`paired.metrics`), the run against its baseline (`baseline.metrics`) — each figure with both
sides' values, the change, its interval and its status; when nothing was compared, a line
saying so (never taken for "no regression") and the run's own figures with their intervals;
the capacity search's line; the windows; where the report is.

Safe to paste anywhere Markdown is rendered: every piece of text from the document (a
reason, a missed threshold, a location) is one line with its Markdown and HTML characters
escaped, `|` included (a cell holds it as `\\|`), each line break a `<br>`, a control
character a visible `\\xNN`, and clipped; every table is bounded (the rows past its limit are
counted: "and N more"), regressed figures listed first so none is ever cut. Numbers carry
their units as report.html shows them (a latency in ms or s, a failure ratio to 4 places, a
rate per second).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from agentsession_core.judge.figures import unit_of
from agentsession_core.judge.gate_document import (
    Baseline,
    Capacity,
    Figure,
    GateDocument,
    JudgedFigure,
    Paired,
    Window,
)
from agentsession_core.report.judged import Sides
from agentsession_core.report.tables import ms

MAX_FIGURES = 30  # rows of a figures table
MAX_WINDOWS = 24  # rows of the windows table
MAX_CELL = 300  # characters of one cell's text
MAX_LINE = 2_000  # characters of the reason line
VERDICT_MARKS = {"pass": "✅", "fail": "❌", "void": "⚪"}
# The order the rows of a comparison are listed in: what decides the verdict first.
STATUS_ORDER = ("regressed", "improved", "inconclusive", "unchanged")
BASELINE_SIDES = Sides("baseline", "this run", "baseline", "current")
PAIRED_SIDES = Sides("reference", "candidate", "reference", "candidate")

# Characters that mean something to Markdown (GFM, GitHub's math) or HTML inside a line.
_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~&$])")
# Control characters other than the line breaks, which become <br>.
_CONTROL = re.compile("[\x00-\x09\x0b\x0c\x0e-\x1f\x7f\u2028\u2029]")
_BREAK = re.compile("\r\n|\r|\n")


# --------------------------------------------------------------------------- text
def md_text(value: object, limit: int = MAX_CELL) -> str:
    """`value` as one line of Markdown that renders as the text itself: clipped to `limit`
    characters, each special character backslash-escaped, each line break a `<br>`."""
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return "<br>".join(_SPECIAL.sub(r"\\\1", line) for line in _BREAK.split(text))


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(head: Sequence[str], rows: list[list[str]], limit: int, what: str) -> list[str]:
    lines = [_row(head), _row("---" for _ in head)]
    lines += [_row(cells) for cells in rows[:limit]]
    if len(rows) > limit:
        lines += ["", f"… and {len(rows) - limit} more {what} (gate.json has them all)"]
    return lines


# --------------------------------------------------------------------------- numbers
def value_text(value: float | None, unit: str | None) -> str:
    """A figure with its unit, as report.html shows it."""
    if value is None or not math.isfinite(value):
        return "–"
    if unit == "ms":
        return ms(value)
    if unit == "ratio":
        return f"{value:.4f}"
    if unit == "1/s":
        return f"{value:.2f}/s"
    return f"{value:.4g} {md_text(unit, 40)}" if unit else f"{value:.4g}"


def _percent(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    shown = f"{value:+.1%}"
    return "+0.0%" if shown == "-0.0%" else shown


def _span(interval: Sequence[float] | None) -> str:
    if not interval:
        return "–"
    return f"[{_percent(interval[0])}, {_percent(interval[1])}]"


def _samples(value: float | None) -> str:
    if value is None:
        return "–"
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


# --------------------------------------------------------------------------- sections
def verdict_line(doc: GateDocument) -> list[str]:
    run = doc.run
    name = "/".join(str(part) for part in (run.name, run.tag) if part) if run else ""
    mark = VERDICT_MARKS.get(doc.verdict, "")
    title = f"### {mark} gate: {doc.verdict.upper()}"
    if name:
        title += f" — {md_text(name, 200)}"
    # The reason after a word of ours: a line that began with it could start a list.
    return [title, "", f"Reason: {md_text(doc.reason or 'none given', MAX_LINE)}"]


def _status(m: JudgedFigure) -> str:
    return m.status or ("regressed" if m.regression else "unchanged")


def _status_cell(m: JudgedFigure) -> str:
    status = _status(m)
    if status == "regressed":
        return "**regressed**"
    if m.why:
        return f"{md_text(status, 40)}: {md_text(m.why)}"
    return md_text(status, 40)


def _ranked(metrics: list[JudgedFigure]) -> list[JudgedFigure]:
    rank = {status: i for i, status in enumerate(STATUS_ORDER)}
    return sorted(metrics, key=lambda m: rank.get(_status(m), len(rank)))


def figure_rows(
    metrics: list[JudgedFigure], sides: Sides, units: dict[str, str | None]
) -> list[list[str]]:
    """Each judged figure as its row: figure, the other side, this side, change, interval,
    status (regressed first)."""
    rows = []
    for m in _ranked(metrics):
        unit = m.unit or units.get(m.metric) or unit_of(m.metric)
        rows.append(
            [
                md_text(m.metric, 120),
                value_text(getattr(m, sides.other_field), unit),
                value_text(getattr(m, sides.this_field), unit),
                _percent(m.change),
                _span(m.interval),
                _status_cell(m),
            ]
        )
    return rows


def _figures_head(sides: Sides) -> list[str]:
    return ["figure", sides.other, sides.this, "change (+ worse)", "interval", "status"]


def _units(doc: GateDocument) -> dict[str, str | None]:
    return {metric: f.unit for metric, f in (doc.figures or {}).items()}


def _rule(section: Baseline | Paired) -> str:
    parts = []
    if section.rule:
        parts.append(f"rule {section.rule}")
    if section.max_regression is not None:
        parts.append(f"margin {section.max_regression:.0%}")
    if section.confidence is not None:
        parts.append(f"at {section.confidence:.0%}")
    return ", ".join(parts)


def paired_section(paired: Paired, units: dict[str, str | None], limit: int) -> list[str]:
    head = "**Candidate against the reference arm**"
    if paired.blocks is not None:
        head += f": {paired.blocks} paired blocks"
        if paired.block_seconds is not None:
            head += f" of {paired.block_seconds} s"
        if paired.blocks_dropped:
            head += f" ({paired.blocks_dropped} dropped)"
    if rule := _rule(paired):
        head += f"; {rule}"
    if paired.status != "compared" or not paired.metrics:
        why = paired.why or "nothing compared"
        return ["", f"{head} — {md_text(paired.status, 40)}: {md_text(why)}"]
    rows = figure_rows(paired.metrics, PAIRED_SIDES, units)
    return ["", head, "", *_table(_figures_head(PAIRED_SIDES), rows, limit, "figures")]


def baseline_section(baseline: Baseline, units: dict[str, str | None], limit: int) -> list[str]:
    if baseline.status == "none":
        return ["", f"**No baseline compared**: {md_text(baseline.why or 'none found')}"]
    if baseline.status == "not comparable":
        differ = "; ".join(baseline.differences or []) or baseline.why or "its conditions differ"
        return ["", f"**Baseline not comparable** (nothing compared): {md_text(differ)}"]
    runs = baseline.runs if baseline.runs is not None else len(baseline.locations or [])
    head = f"**Against the baseline**: {runs} run(s)"
    if baseline.spread_from:
        head += f", run-to-run spread {md_text(baseline.spread_from, 80)}"
    if rule := _rule(baseline):
        head += f"; {rule}"
    lines = ["", head]
    if baseline.location:
        lines += ["", f"Baseline: {md_code(baseline.location)}"]
    if not baseline.metrics:
        return [*lines, "", "No figure both runs have was compared."]
    rows = figure_rows(baseline.metrics, BASELINE_SIDES, units)
    return [*lines, "", *_table(_figures_head(BASELINE_SIDES), rows, limit, "figures")]


def own_figures_section(figures: dict[str, Figure], limit: int) -> list[str]:
    """Nothing was compared: the run's own figures with their intervals."""
    line = (
        "**Nothing was compared** (no baseline, not a paired campaign): the verdict is the "
        "run's own windows."
    )
    if not figures:
        return ["", line]
    rows = []
    for metric, f in figures.items():
        unit = f.unit or unit_of(metric)
        interval = (
            f"[{value_text(f.low, unit)}, {value_text(f.high, unit)}]"
            if f.low is not None and f.high is not None
            else "–"
        )
        shown = "" if f.estimable is not False else " (not estimable)"
        rows.append(
            [md_text(metric, 120), value_text(f.value, unit), interval + shown, _samples(f.n)]
        )
    head = ["figure", "value", "interval", "samples"]
    return ["", line + " Its figures:", "", *_table(head, rows, limit, "figures")]


def capacity_section(capacity: Capacity) -> list[str]:
    line = f"**Capacity search**: {md_text(capacity.status or 'unknown', 40)}"
    if capacity.rate is not None:
        line += f", {value_text(capacity.rate, capacity.unit)}"
    if capacity.reason:
        line += f" — {md_text(capacity.reason)}"
    return ["", line]


def _window_why(w: Window) -> str:
    if w.missed:
        return "missed " + "; ".join(md_text(m, 200) for m in w.missed)
    return md_text(w.abort_reason or w.void_reason or "")


def windows_section(windows: list[Window], limit: int) -> list[str]:
    if not windows:
        return ["", "**Windows**: none judged"]
    counts: dict[str, int] = {}
    for w in windows:
        counts[w.outcome] = counts.get(w.outcome, 0) + 1
    tally = ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
    rows = [
        [
            str(w.index),
            "–" if w.level is None else f"{w.level:g}x",
            f"**{w.outcome}**" if w.outcome != "pass" else w.outcome,
            _window_why(w),
        ]
        for w in windows
    ]
    head = ["window", "level", "outcome", "missed / why"]
    return ["", f"**Windows**: {tally}", "", *_table(head, rows, limit, "windows")]


def md_code(text: str) -> str:
    """A location as inline code when it can be one (no backtick, one line), else text."""
    if "`" in text or _BREAK.search(text) or _CONTROL.search(text) or len(text) > MAX_CELL:
        return md_text(text)
    return f"`{text}`"


def report_location(doc: GateDocument) -> str | None:
    """Where the run's files are: where it was read from, else where the run put them."""
    run = doc.run
    return doc.location or (run.location if run else None) or (run.local_dir if run else None)


def files_line(location: str | None, upload_error: str | None = None) -> list[str]:
    if not location:
        return ["", "Report: the run's location is not known"]
    report = f"{location.rstrip('/')}/report.html"
    if upload_error:
        return [
            "",
            f"Upload failed ({md_text(upload_error)}); report at {md_code(report)} "
            "(the local copy)",
        ]
    return ["", f"Report: {md_code(report)} (gate.json beside it)"]


# --------------------------------------------------------------------------- the summary
def gate_summary(
    doc: GateDocument,
    *,
    location: str | None = None,
    upload_error: str | None = None,
    max_figures: int = MAX_FIGURES,
    max_windows: int = MAX_WINDOWS,
) -> str:
    """The gate document as Markdown. `location`: where the run's files are (default: the
    document's own, `report_location`); `upload_error`: the files are a local copy because
    the upload failed."""
    units = _units(doc)
    lines = verdict_line(doc)
    if doc.paired is not None:
        lines += paired_section(doc.paired, units, max_figures)
    if doc.baseline is not None:
        lines += baseline_section(doc.baseline, units, max_figures)
    if doc.paired is None and doc.baseline is None:
        lines += own_figures_section(dict(doc.figures or {}), max_figures)
    if doc.capacity is not None:
        lines += capacity_section(doc.capacity)
    if doc.abort_reason:
        lines += ["", f"**Aborted**: {md_text(doc.abort_reason)}"]
    lines += windows_section(doc.windows, max_windows)
    lines += files_line(location or report_location(doc), upload_error)
    return "\n".join(lines) + "\n"


def unusable_summary(where: str, why: str) -> str:
    """The summary of a run the gate could not judge (exit 2): the gate's own line, so a CI
    showing only the summary does not take a missing verdict for a pass."""
    return (
        "\n".join(
            [
                f"### {VERDICT_MARKS['void']} gate: NOT JUDGED — {md_text(where, 200)}",
                "",
                f"Reason: {md_text(why, MAX_LINE)}",
            ]
        )
        + "\n"
    )


__all__ = [
    "MAX_FIGURES",
    "MAX_WINDOWS",
    "figure_rows",
    "gate_summary",
    "md_text",
    "unusable_summary",
    "value_text",
]
