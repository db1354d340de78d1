"""The capacity section of report.html: the knee curve of a capacity search (gate.json's
`capacity`, docs/SPEC.md §6.7) — the SLO's figure at each probe's level, each probe marked
held or broke, the SLO as a rule, the capacity and the level that broke it as marks — and
the probes as a table, then the density frontier (report/density.py). The found level's
confirmation and its step down are drawn apart, as dots of their own off the curve (the
curve is the search's). Nothing when the campaign ran no search."""

from __future__ import annotations

from typing import Any

from agentsession_core.judge.gate_document import Capacity, Probe
from agentsession_core.report.chart_scale import nice_ticks
from agentsession_core.report.context import section
from agentsession_core.report.data import RunData, number
from agentsession_core.report.density import density_block
from agentsession_core.report.svg_chart import Chart, Line, Mark, Rule, esc, render_chart
from agentsession_core.report.tables import table

OUTCOME_COLOURS = {
    "held": "#2e7d32",
    "broke": "#c62828",
    "void": "#9e9e9e",
    "aborted": "#ef6c00",
}
CURVE_COLOUR = "#546e7a"
CONFIRM_COLOUR = "#6a1b9a"
STAGE_NAMES = {"confirm": "confirmation", "step-down": "step down"}
CAPACITY_COLOUR = "#1565c0"


def _num(value: Any) -> str:
    known = number(value)
    return "–" if known is None else f"{known:.4g}"


def capacity_of(data: RunData) -> Capacity | None:
    return data.gate.capacity if data.gate else None


def capacity_line(capacity: Capacity | None) -> str:
    """`0.9 swaps/s (3x)`, or the reason there is none: for the report's tables."""
    if capacity is None:
        return "–"
    rate, level = capacity.rate, capacity.level
    if rate is None or level is None:
        return f"none ({capacity.status}: {capacity.reason})"
    resolution = capacity.resolution or 0.0
    return f"{rate:g} {capacity.unit or ''} ({level:g}x, ±{resolution:.0%})"


def _points(probes: list[Probe], outcome: str | None = None) -> list[tuple[float, float]]:
    out = []
    for p in probes:
        if p.figure is None or (outcome and p.outcome != outcome):
            continue
        out.append((p.level, p.figure))
    return sorted(out)


def _after_search(probe: Probe) -> bool:
    """The confirmation or its step down (older documents have no stage: the search's)."""
    return probe.stage in STAGE_NAMES


def knee_chart(capacity: Capacity) -> str:
    probes = [p for p in capacity.probes if not _after_search(p)]
    after = [p for p in capacity.probes if _after_search(p)]
    levels = [p.level for p in probes]
    top = nice_ticks(max([*levels, capacity.anchor_level or 0.0, 1.0]) * 1.05)[0]
    unit = capacity.figure_unit or ""
    chart = Chart(
        title=f"knee: {capacity.threshold}",
        unit=unit,
        t0=0.0,
        t1=top,
        x_unit="x",
        height=300,
        rules_in_scale=True,  # the SLO is the point of the chart, however far above
        empty="no probe measured the SLO's figure",
    )
    chart.lines.append(Line("the SLO's figure at each probe", _points(probes), CURVE_COLOUR))
    for outcome, colour in OUTCOME_COLOURS.items():
        points = _points(probes, outcome)
        if points:
            chart.lines.append(Line(outcome, points, colour, dots=True))
    for p in after:
        points = _points([p])
        if points:
            label = f"{STAGE_NAMES[str(p.stage)]}: {p.outcome}"
            chart.lines.append(Line(label, points, CONFIRM_COLOUR, dots=True))
    slo = capacity.slo_value
    if slo is not None:
        chart.rules.append(Rule(slo, "SLO", value=f"SLO {slo:g}{unit}"))
    level, broke = capacity.level, capacity.broke_at_level
    if level is not None:
        chart.marks.append(Mark(level, f"capacity {level:g}x", CAPACITY_COLOUR))
    if broke is not None:
        chart.marks.append(Mark(broke, f"broke {broke:g}x", OUTCOME_COLOURS["broke"]))
    caption = (
        f"level = × the population's load at 1x ({_num(capacity.base_rate)} "
        f"{esc(capacity.unit or '')}); the first level held before the search"
    )
    return render_chart(chart, caption)


def _probe_rows(capacity: Capacity) -> list[str]:
    rows = []
    for i, p in enumerate(capacity.probes):
        outcome = str(p.outcome)
        colour = OUTCOME_COLOURS.get(outcome, "#9e9e9e")
        missed = "; ".join(p.missed or []) or p.why or ""
        stage = STAGE_NAMES.get(str(p.stage))
        name = f"{i} ({stage})" if stage else str(i)
        rows.append(
            f"<tr><td>{esc(name)}</td><td>{_num(p.level)}x</td>"
            f"<td>{_num(p.rate)}</td>"
            f'<td class="oc" style="color:{colour}">{esc(outcome)}</td>'
            f'<td>{_num(p.figure)}</td><td class="why">{esc(missed)}</td></tr>'
        )
    return rows


def capacity_section(data: RunData) -> str:
    capacity = capacity_of(data)
    if capacity is None:
        return ""
    unit = esc(capacity.unit or "")
    figure_unit = esc(capacity.figure_unit or "")
    bound = f"<p>bound by: {esc(capacity.bound_by)}</p>" if capacity.bound_by else ""
    body = (
        f"<p><b>{esc(capacity_line(capacity))}</b> — {esc(capacity.reason or '')}</p>"
        + bound
        + knee_chart(capacity)
        + table(
            ["probe", "level", f"rate ({unit})", "outcome", f"figure ({figure_unit})", "missed"],
            _probe_rows(capacity),
            "wide",
        )
        + density_block(capacity)
    )
    intro = (
        f"capacity search on {esc(capacity.dimension)}: {esc(capacity.threshold)}"
        f", resolution {_num(capacity.resolution)}"
    )
    return section("capacity", "Capacity", body, intro)


__all__ = ["capacity_line", "capacity_of", "capacity_section", "knee_chart"]
