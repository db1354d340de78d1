"""The capacity section of report.html: the knee curve of a capacity search (gate.json's
`capacity`, docs/SPEC.md §6.7) — the SLO's figure at each probe's level, each probe marked
held or broke, the SLO as a rule, the capacity and the level that broke it as marks — and
the probes as a table, then the density frontier (report/density.py). Nothing when the
campaign ran no search."""

from __future__ import annotations

from typing import Any

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
CAPACITY_COLOUR = "#1565c0"


def _num(value: Any) -> str:
    known = number(value)
    return "–" if known is None else f"{known:.4g}"


def capacity_of(data: RunData) -> dict[str, Any] | None:
    capacity = (data.gate or {}).get("capacity")
    return capacity if isinstance(capacity, dict) else None


def capacity_line(capacity: dict[str, Any] | None) -> str:
    """`0.9 swaps/s (3x)`, or the reason there is none: for the report's tables."""
    if not capacity:
        return "–"
    rate, level = number(capacity.get("rate")), number(capacity.get("level"))
    if rate is None or level is None:
        return f"none ({capacity.get('status')}: {capacity.get('reason')})"
    resolution = number(capacity.get("resolution")) or 0.0
    return f"{rate:g} {capacity.get('unit') or ''} ({level:g}x, ±{resolution:.0%})"


def _points(probes: list[dict[str, Any]], outcome: str | None = None) -> list[tuple[float, float]]:
    out = []
    for p in probes:
        level, figure = number(p.get("level")), number(p.get("figure"))
        if level is None or figure is None or (outcome and p.get("outcome") != outcome):
            continue
        out.append((level, figure))
    return sorted(out)


def knee_chart(capacity: dict[str, Any]) -> str:
    probes = [p for p in capacity.get("probes") or [] if isinstance(p, dict)]
    anchor = number(capacity.get("anchor_level"))
    levels = [lv for lv in (number(p.get("level")) for p in probes) if lv is not None]
    top = nice_ticks(max([*levels, anchor or 0.0, 1.0]) * 1.05)[0]
    unit = str(capacity.get("figure_unit") or "")
    chart = Chart(
        title=f"knee: {capacity.get('threshold')}",
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
    slo = number(capacity.get("slo_value"))
    if slo is not None:
        chart.rules.append(Rule(slo, "SLO", value=f"SLO {slo:g}{unit}"))
    level, broke = number(capacity.get("level")), number(capacity.get("broke_at_level"))
    if level is not None:
        chart.marks.append(Mark(level, f"capacity {level:g}x", CAPACITY_COLOUR))
    if broke is not None:
        chart.marks.append(Mark(broke, f"broke {broke:g}x", OUTCOME_COLOURS["broke"]))
    caption = (
        f"level = × the population's load at 1x ({_num(capacity.get('base_rate'))} "
        f"{esc(capacity.get('unit') or '')}); the first level held before the search"
    )
    return render_chart(chart, caption)


def _probe_rows(capacity: dict[str, Any]) -> list[str]:
    rows = []
    for i, p in enumerate(capacity.get("probes") or []):
        if not isinstance(p, dict):
            continue
        outcome = str(p.get("outcome"))
        colour = OUTCOME_COLOURS.get(outcome, "#9e9e9e")
        missed = "; ".join(str(m) for m in p.get("missed") or []) or p.get("why") or ""
        rows.append(
            f"<tr><td>{i}</td><td>{_num(p.get('level'))}x</td>"
            f"<td>{_num(p.get('rate'))}</td>"
            f'<td class="oc" style="color:{colour}">{esc(outcome)}</td>'
            f'<td>{_num(p.get("figure"))}</td><td class="why">{esc(missed)}</td></tr>'
        )
    return rows


def capacity_section(data: RunData) -> str:
    capacity = capacity_of(data)
    if capacity is None:
        return ""
    unit = esc(capacity.get("unit") or "")
    figure_unit = esc(capacity.get("figure_unit") or "")
    body = (
        f"<p><b>{esc(capacity_line(capacity))}</b> — {esc(capacity.get('reason') or '')}</p>"
        + knee_chart(capacity)
        + table(
            ["probe", "level", f"rate ({unit})", "outcome", f"figure ({figure_unit})", "missed"],
            _probe_rows(capacity),
            "wide",
        )
        + density_block(capacity)
    )
    intro = (
        f"capacity search on {esc(capacity.get('dimension'))}: {esc(capacity.get('threshold'))}"
        f", resolution {_num(capacity.get('resolution'))}"
    )
    return section("capacity", "Capacity", body, intro)


__all__ = ["capacity_line", "capacity_of", "capacity_section", "knee_chart"]
