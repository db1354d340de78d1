"""The baseline section of report.html: this run beside a baseline run.

Shows the two runs' headline rows side by side, each window's figures side by side, the
substrate's key figures over each steady window (server_summary.json) with their change, the
deltas the gate judged (handed in as data: judge.gate compares, output only renders) and the
per-second TimeToWake p99 and throughput of both runs overlaid, each counted from the start
of its own hold.

Without a baseline run given, a gate.json that was judged against one still shows the
deltas it stored. A comparison with no baseline run (`--baseline auto` before any good run)
shows only why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentsession_core.judge.gate_document import Baseline
from agentsession_core.measure.stats import TIME_TO_WAKE_ROW
from agentsession_core.report.charts import achieved_points
from agentsession_core.report.context import (
    CHART_SIZES,
    ReportContext,
    section,
)
from agentsession_core.report.data import SERVER_SUMMARY, Points, RunData, number
from agentsession_core.report.judged import Sides, judged_table
from agentsession_core.report.knee import capacity_line, capacity_of
from agentsession_core.report.server_data import (
    fmt_delta,
    fmt_figure,
    key_figures,
    query_names,
    rule_figures,
    steady_of,
    value,
)
from agentsession_core.report.svg_chart import Chart, Line, esc, render_chart
from agentsession_core.report.tables import fmt, meta_line, ms, outcome_cell, table

BASELINE_COLOUR = "#757575"
THIS_COLOUR = "#c62828"


@dataclass
class Comparison:
    """A baseline run and what the gate judged against it (judge.gate.with_baseline's
    "baseline" section: location, max_regression, metrics; None: not judged). No baseline
    run: none was found (`--baseline auto` with no earlier good run), and `reason` says so."""

    baseline: RunData | None
    judged: Baseline | None = None
    verdict: str | None = None  # this run's gate verdict with the baseline applied
    reason: str | None = None
    # The line `agentsession gate --baseline` refuses this baseline with: the page then
    # shows the runs side by side but no verdict the gate would never give.
    refused: str | None = None
    # How the baseline was chosen, the section's first line (default `baseline: LOCATION`).
    source: str | None = None


def _hold_start(data: RunData) -> float:
    starts = [number(w.get("start_unix")) for w in data.windows]
    found = [s for s in starts if s is not None]
    return min(found) if found else data.span()[0]


def _shifted(points: Points, by: float) -> Points:
    return [(t - by, v) for t, v in points]


def _side_by_side(this: RunData, base: RunData) -> str:
    rows = []
    for label, pick in (
        ("location", lambda d: esc(d.location)),
        ("run", lambda d: meta_line(d)),
        ("verdict", lambda d: esc((d.gate.verdict if d.gate else "not judged").upper())),
        ("windows", lambda d: esc(", ".join(str(w.get("outcome")) for w in d.windows) or "–")),
        ("capacity", lambda d: esc(capacity_line(capacity_of(d)))),
    ):
        rows.append(f"<tr><th>{label}</th><td>{pick(base)}</td><td>{pick(this)}</td></tr>")
    bh, th = _headline(base), _headline(this)
    for key, digits in (("count", 0), ("failures", 0), ("rps", 2)):
        b, t = (bh.get("requests") or {}).get(key), (th.get("requests") or {}).get(key)
        if b is not None or t is not None:
            rows.append(
                f"<tr><th>requests {key}</th><td>{fmt(number(b), digits)}</td>"
                f"<td>{fmt(number(t), digits)}</td></tr>"
            )
    return "<h3>The two runs</h3>" + table(["", "baseline", "this run"], rows, "cmp")


def _headline(data: RunData) -> dict[str, dict[str, float | None]]:
    return (data.gate.headline if data.gate else None) or {}


def _delta(b: Any, t: Any) -> str:
    bv, tv = number(b), number(t)
    if bv is None or tv is None:
        return "–"
    if bv == 0:
        return f"{tv - bv:+.1f}"
    return f"{(tv - bv) / bv:+.0%}"


def _windows(this: RunData, base: RunData) -> str:
    count = max(len(this.windows), len(base.windows))
    if not count:
        return ""
    rows = []
    for i in range(count):
        b = base.windows[i] if i < len(base.windows) else {}
        t = this.windows[i] if i < len(this.windows) else {}
        bh, th = b.get("headline") or {}, t.get("headline") or {}
        levels = f"{fmt(number(b.get('level')), 2)} / {fmt(number(t.get('level')), 2)}"
        cells = [f"<td>{i}</td><td>{levels}</td>"]
        cells.append(
            outcome_cell(str(b.get("outcome", "–"))) + outcome_cell(str(t.get("outcome", "–")))
        )
        for name, key in (
            ("TimeToWake", "p99"),
            ("Step_*", "p99"),
            ("requests", "achieved_rps"),
            ("requests", "failure_ratio"),
        ):
            bv, tv = (bh.get(name) or {}).get(key), (th.get(name) or {}).get(key)
            shown = (
                (ms(bv), ms(tv))
                if key.startswith("p")
                else (fmt(number(bv), 3), fmt(number(tv), 3))
            )
            cells.append(f"<td>{shown[0]}</td><td>{shown[1]}</td><td>{_delta(bv, tv)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    head = [
        "#",
        "level b / t",
        "baseline",
        "this run",
        "TimeToWake p99 b",
        "t",
        "Δ",
        "Step_* p99 b",
        "t",
        "Δ",
        "achieved rps b",
        "t",
        "Δ",
        "failure ratio b",
        "t",
        "Δ",
    ]
    return "<h3>Per window, side by side (b = baseline, t = this run)</h3>" + table(
        head, rows, "cmp"
    )


def _server(this: RunData, base: RunData) -> str:
    """The steady window's key server figures of both runs, and the change (docs/SPEC.md
    §5.9): what the substrate paid for the same load, beside what the client felt."""
    if this.server is None and base.server is None:
        return ""
    head = "<h3>Server-side figures over the steady window (the hold)</h3>"
    if this.server is None or base.server is None:
        which = "this run" if base.server is None else "the baseline"
        return f'{head}<p class="nodata">no comparison: only {which} has {SERVER_SUMMARY}</p>'
    spans = [s for s in (steady_of(base.server), steady_of(this.server)) if s is not None]
    names = query_names(this.server) + query_names(base.server)
    figures = key_figures(spans, list(rule_figures(this)), list(dict.fromkeys(names)))
    if not figures:
        return f'{head}<p class="nodata">no comparison: neither run has a steady window</p>'
    rows = []
    for f in figures:
        b, t = (value(steady_of(d.server), f.series, f.figure) for d in (base, this))
        rows.append(
            f"<tr><td>{esc(f.label)}<br><code class=dim>server.{esc(f.name)}</code></td>"
            f"<td>{fmt_figure(f.series, f.figure, b)}</td>"
            f"<td>{fmt_figure(f.series, f.figure, t)}</td>"
            f"<td>{fmt_delta(f.series, f.figure, b, t)}</td></tr>"
        )
    return head + table(["figure", "baseline", "this run", "Δ"], rows, "cmp")


BASELINE_SIDES = Sides("baseline", "this run", "baseline", "current")


def judged_deltas(judged: Baseline | None) -> str:
    """The gate's baseline comparison: each headline figure's change, its interval, the
    samples on both sides and what the gate made of it (docs/SPEC.md §6.3)."""
    if judged is not None and judged.status == "not comparable":
        fields = "".join(f"<li><code>{esc(d)}</code></li>" for d in judged.differences or [])
        return (
            "<h3>What the gate judged: not comparable, the runs differ in what changes the "
            f"numbers (baseline → this run)</h3><ul>{fields}</ul>"
        )
    if judged is None or not judged.metrics:
        return '<p class="nodata">no comparable headline metric</p>'
    limit, confidence = judged.max_regression, judged.confidence
    spread = esc(judged.spread_from or "assumed")
    title = (
        f"<h3>What the gate judged: change against the baseline (a regression is worse by "
        f"more than {limit or 0:.0%}, with the whole {confidence or 0.99:.0%} interval "
        f"beyond it; run-to-run spread {spread})</h3>"
    )
    return title + judged_table(judged.metrics, BASELINE_SIDES)


def _overlay(ctx: ReportContext, base: RunData) -> str:
    this = ctx.data
    t_this, t_base = _hold_start(this), _hold_start(base)
    span = max(this.span()[1] - t_this, base.span()[1] - t_base, 1.0)
    charts = []
    wake_this = this.row(*TIME_TO_WAKE_ROW).view("latency").get("p99", [])
    wake_base = base.row(*TIME_TO_WAKE_ROW).view("latency").get("p99", [])
    base_ctx = ReportContext.of(base)
    for title, unit, pair in (
        ("TimeToWake p99 per second", "ms", (wake_base, wake_this)),
        ("achieved throughput", "per s", (achieved_points(base_ctx)[0], achieved_points(ctx)[0])),
    ):
        chart = Chart(
            title + ", from each hold's start", unit, 0.0, span, width=CHART_SIZES["half"]
        )
        chart.lines = [
            Line("baseline", _shifted(pair[0], t_base), BASELINE_COLOUR, "6 3", 2.2),
            Line("this run", _shifted(pair[1], t_this), THIS_COLOUR, "", 2.0),
        ]
        charts.append(render_chart(chart))
    return f'<div class="grid2">{"".join(charts)}</div>'


def baseline_section(ctx: ReportContext, comparison: Comparison | None) -> str:
    stored = ctx.data.gate.baseline if ctx.data.gate else None
    if comparison is None:
        if stored is None:
            return ""
        intro = f"gate.json was judged against {esc(stored.location or 'a baseline')}"
        return section("baseline", "Against the baseline", judged_deltas(stored), intro)
    base = comparison.baseline
    if base is None:
        body = f'<p class="nodata">{esc(comparison.reason or "no baseline run")}</p>'
        intro = esc(comparison.source or "baseline: none")
        return section("baseline", "Against the baseline", body, intro)
    verdict = ""
    if comparison.refused:
        verdict = (
            '<p class="refused"><b>The gate refuses this baseline</b> (<code>agentsession '
            f"gate --baseline</code> exits 2): {esc(comparison.refused)}. The runs are shown "
            "side by side for reading only.</p>"
        )
        if comparison.reason:
            verdict += f'<p class="nodata">{esc(comparison.reason)}</p>'
    elif comparison.verdict:
        verdict = (
            f"<p>With this baseline the gate says <b>{esc(comparison.verdict.upper())}</b>: "
            f"{esc(comparison.reason or '')}</p>"
        )
    elif comparison.reason:
        verdict = f'<p class="nodata">{esc(comparison.reason)}</p>'
    body = (
        verdict
        + judged_deltas(comparison.judged)
        + _side_by_side(ctx.data, base)
        + _windows(ctx.data, base)
        + _server(ctx.data, base)
        + "<h3>Over time</h3>"
        + _overlay(ctx, base)
    )
    intro = esc(comparison.source or f"baseline: {base.location}")
    return section("baseline", "Against the baseline", body, intro)


__all__ = ["Comparison", "baseline_section", "judged_deltas"]
