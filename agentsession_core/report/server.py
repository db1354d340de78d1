"""The server-side figures section of report.html (docs/SPEC.md §5.9, §7): what the substrate
itself said while it was measured, from server_summary.json.

Three parts: where the figures came from and how the sampling went; a table of the key
figures per judged window and over the steady window (the hold); and charts of a few
counters' rates and gauges' means, one step per window on the report's shared time axis,
with each `server.` rule drawn at the bound the judge held each window to.

The summary holds figures per window, not samples: a chart shows what was judged, so a
step at each window boundary is the honest picture.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentsession_core.measure.server_metrics import split_figure
from agentsession_core.report.chart_scale import bucket_seconds
from agentsession_core.report.context import (
    OUTCOME_COLOURS,
    ReportContext,
    ThresholdRule,
    grid,
    section,
)
from agentsession_core.report.data import SERVER_SUMMARY, Points, number
from agentsession_core.report.server_data import (
    ACTOR_SERIES,
    KeyFigure,
    Span,
    byte_unit,
    fmt_figure,
    is_bytes,
    key_figures,
    query_names,
    rule_figures,
    section_of,
    spans_of,
    steady_of,
    value,
    windows_of,
)
from agentsession_core.report.svg_chart import Chart, Line, Rule, esc, render_charts
from agentsession_core.report.tables import fmt, table
from agentsession_core.report.wake_split import wake_split

COLOURS = ("#1565c0", "#2e7d32", "#ef6c00", "#8e24aa", "#c62828", "#00838f", "#6d4c41")
RULE_COLOUR = "#b71c1c"


@dataclass
class ChartSpec:
    """One chart: its lines as (series, figure), the lines only a rule asked for (`added`,
    dashed), and its rules; `unit` follows the byte unit (chosen from the data) when the
    series count bytes."""

    title: str
    unit: str
    lines: list[tuple[str, str]] = field(default_factory=list)
    added: list[tuple[str, str]] = field(default_factory=list)
    rules: list[ThresholdRule] = field(default_factory=list)
    dashes: dict[str, str] = field(default_factory=dict)  # series that run alongside another


def default_charts() -> list[ChartSpec]:
    return [
        ChartSpec("actors by state", "actors, window mean", [(s, "mean") for s in ACTOR_SERIES]),
        ChartSpec(
            "wakes, suspends and pauses",
            "per s, window rate",
            [
                ("wakes_router", "rate"),
                ("wakes_control", "rate"),
                ("suspends", "rate"),
                ("pauses", "rate"),
                ("wake_failures", "rate"),
            ],
            # A swap parks one actor and wakes another: suspends run at the wakes' rate.
            dashes={"suspends": "7 4", "pauses": "2 4"},
        ),
        ChartSpec("waiting", "window mean", [("parked_requests", "mean"), ("wake_queue", "mean")]),
        ChartSpec(
            "snapshot traffic",
            "/s, window rate",
            [("snapshot_bytes_written", "rate"), ("snapshot_bytes_read", "rate")],
        ),
        ChartSpec(
            "memory",
            ", window mean",
            [("workers_rss_bytes", "mean"), ("server_rss_bytes", "mean"), ("paused_bytes", "mean")],
        ),
        ChartSpec("requests served", "per s, window rate", [("requests", "rate")]),
    ]


# --------------------------------------------------------------------------- head
def source_line(doc: dict[str, Any]) -> str:
    source, sampling = section_of(doc, "source"), section_of(doc, "sampling")
    parts = [f"source <b>{esc(source.get('kind', '?'))}</b>"]
    if source.get("url"):
        parts.append(f"scraped from <code>{esc(source['url'])}</code>")
    interval = number(source.get("interval_seconds"))
    if interval is not None:
        parts.append(f"every {interval:g} s")
    series = source.get("series")
    if isinstance(series, list) and series:
        parts.append("families " + ", ".join(f"<code>{esc(s)}</code>" for s in series))
    if source.get("prometheus_url"):
        parts.append(f"Prometheus <code>{esc(source['prometheus_url'])}</code>")
    queries = section_of(source, "queries")
    preset = section_of(source, "preset")
    if preset:
        overridden = preset.get("overridden") or []
        said = f" (yours in place of: {', '.join(map(str, overridden))})" if overridden else ""
        parts.append(f"preset <b>{esc(preset.get('name', '?'))}</b>{esc(said)}")
    own = set(query_names(doc))
    if own:
        parts.append(
            "queries "
            + ", ".join(f"<code>{esc(k)} = {esc(v)}</code>" for k, v in queries.items() if k in own)
        )
    ok, failed = number(sampling.get("ok")) or 0, number(sampling.get("failed")) or 0
    said = f"sampling: <b>{ok:.0f}</b> ok, <b>{failed:.0f}</b> failed"
    if sampling.get("last_error") and ok:  # when every sample failed, "no data" says it
        said += f" (last error: {esc(sampling['last_error'])})"
    return f'<p class="meta">{" · ".join(parts)}</p><p class="meta">{said}</p>'


def no_data(doc: dict[str, Any] | None, in_files: bool) -> str | None:
    """Why there is nothing to show, or None when there is."""
    if doc is None:
        if in_files:
            return f"no data: {SERVER_SUMMARY} could not be read (not a JSON object)"
        return (
            f"no data: this run wrote no {SERVER_SUMMARY}: it had no server-side source "
            "(the embedded local substrate, target.metrics_url or target.prometheus_url) "
            "or server sampling was off"
        )
    sampling = section_of(doc, "sampling")
    if not number(sampling.get("ok")) and number(sampling.get("failed")):
        error = sampling.get("last_error") or "no error recorded"
        return f"no data: every sample failed; the last error: {error}"
    spans = spans_of(doc)
    if not windows_of(doc):
        return "no data: no window was cut (the run ended before its hold)"
    if not any(section_of(s, "figures") for s in spans):
        return "no data: no sample fell inside any window"
    return None


# --------------------------------------------------------------------------- table
def _judged_windows(ctx: ReportContext, windows: Sequence[Span]) -> list[dict[str, Any]]:
    """windows.jsonl's record of each summary window (the two files number windows alike);
    {} for a window windows.jsonl does not have."""
    by_index = {number(w.get("index")): w for w in ctx.data.windows}
    return [by_index.get(number(w.get("index"))) or {} for w in windows]


def _judged_cell(texts: Sequence[str], judged: dict[str, Any]) -> tuple[str, str]:
    """(colour, mark) of the rules on a figure in one window, as the thresholds matrix
    shows them: missed when any missed, held when all held."""
    results = judged.get("thresholds")
    passed = [
        r.get("passed")
        for r in (results if isinstance(results, list) else [])
        if isinstance(r, dict) and r.get("threshold") in texts
    ]
    if not passed:
        return "", ""
    if False in passed:
        colour, mark = OUTCOME_COLOURS["break"], " ✗"
    elif all(p is True for p in passed):
        colour, mark = OUTCOME_COLOURS["pass"], " ✓"
    else:
        colour, mark = "", " not judged"
    if judged.get("outcome") in ("void", "aborted"):
        colour = "#eeeeee"  # the window decided nothing
    return colour, mark


def figures_table(
    ctx: ReportContext, rows: Sequence[KeyFigure], rules: dict[str, list[str]]
) -> str:
    """Figures (rows) against the windows and the steady window (columns); a figure a rule
    judges is coloured by the rule's result in each window."""
    doc = ctx.data.server
    windows, steady = windows_of(doc), steady_of(doc)
    judged = _judged_windows(ctx, windows)
    head = ["figure"]
    for w, j in zip(windows, judged, strict=True):
        outcome = f" {esc(j['outcome'])}" if j.get("outcome") else ""
        head.append(f"w{fmt(w.get('index'))} @{fmt(number(w.get('level')), 2)}×{outcome}")
    if steady is not None:
        head.append("steady (the hold)")
    body = []
    for row in rows:
        texts = rules.get(row.name, [])
        said = "".join(f"<br>judged: <code>{esc(t)}</code>" for t in texts)
        cells = [
            f"<td>{esc(row.label)}<br><code class=dim>server.{esc(row.name)}</code>{said}</td>"
        ]
        for w, j in zip(windows, judged, strict=True):
            colour, mark = _judged_cell(texts, j)
            style = f' style="background:{colour}"' if colour else ""
            cells.append(f"<td{style}>{_shown(row, w)}{mark}</td>")
        if steady is not None:
            cells.append(f"<td>{_shown(row, steady)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    samples = "".join(f"<td>{fmt(number(s.get('samples')), 0)}</td>" for s in spans_of(doc))
    body.append(f"<tr><td>samples in the span</td>{samples}</tr>")
    return table(head, body)


def _shown(row: KeyFigure, span: Span) -> str:
    return fmt_figure(row.series, row.figure, value(span, row.series, row.figure))


# --------------------------------------------------------------------------- charts
def step_points(ctx: ReportContext, spans: Sequence[Span], series: str, figure: str) -> Points:
    """A window's figure held across the window: one point per chart bucket, aligned to the
    buckets so a long run's reduction keeps every step and draws no gap between windows."""
    bucket = bucket_seconds(ctx.t0, ctx.t1)
    out: Points = []
    end: float | None = None
    for span in spans:
        start, end = number(span.get("start_unix")), number(span.get("end_unix"))
        v = value(span, series, figure)
        if start is None or end is None or v is None:
            end = None
            continue
        first = math.ceil(start / bucket)
        out += [(k * bucket, v) for k in range(first, max(math.ceil(end / bucket), first + 1))]
    if out and end is not None and end > out[-1][0]:
        out.append((end, out[-1][1]))  # the last step reaches the hold's end
    return out


# A gauge's figures share its unit: a rule on its max fits the chart of its mean. A counter's
# rate does not share one with its increase or its start and end.
_GAUGE_LEVELS = ("mean", "min", "max", "start", "end")


def _fits(spec: ChartSpec, parts: tuple[str, str], families: dict[str, str]) -> bool:
    """Whether a rule's figure shares a chart's unit: another level of a gauge it shows, or
    the same figure of another series of its family (`wakes` beside `wakes_router`; the
    family is each series' `metric` in the summary, as a name's prefix can mislead:
    `workers` is no part of `workers_rss_bytes`)."""
    series, figure = parts
    family = families.get(series)
    return any(
        (name == series and shown in _GAUGE_LEVELS and figure in _GAUGE_LEVELS)
        or (family is not None and families.get(name) == family and shown == figure)
        for name, shown in spec.lines
    )


def _place_rules(
    specs: list[ChartSpec], rules: Sequence[ThresholdRule], families: dict[str, str]
) -> None:
    """Each `server.` rule onto the chart that shows its figure; onto the chart of its series
    with its figure added as a line when the units agree; or onto a chart of its own."""
    for rule in rules:
        parts = split_figure(rule.server or "")
        if parts is None:
            continue
        home = next((s for s in specs if parts in s.lines + s.added), None)
        if home is None:
            home = next((s for s in specs if _fits(s, parts, families)), None)
            if home is not None:
                home.added.append(parts)
        if home is None:
            rate = parts[1] == "rate"
            if is_bytes(parts[0]):
                unit = "/s, per window" if rate else ", per window"
            else:
                unit = "per s, per window" if rate else "per window"
            home = ChartSpec(f"server.{rule.server}", unit, [parts])
            specs.append(home)
        home.rules.append(rule)


def _rules_of(ctx: ReportContext, spec: ChartSpec, divisor: float) -> list[Rule]:
    """Each rule at the bound each window was judged by (windows.jsonl), in the chart's unit."""
    out = []
    for rule in spec.rules:
        series, figure = split_figure(rule.server or "") or ("", "")
        below = ">" in rule.op
        bounds = ctx.window_bounds(rule.text)
        if not bounds and rule.target_factor is None:  # judged nowhere: its number throughout
            bounds = [(ctx.t0, ctx.t1, rule.value)]
        for x0, x1, bound in bounds:
            shown = f"{rule.op} {fmt_figure(series, figure, bound)}"
            out.append(
                Rule(bound / divisor, rule.text, RULE_COLOUR, x0, x1, value=shown, below=below)
            )
    return out


def chart_of(ctx: ReportContext, spec: ChartSpec, spans: Sequence[Span]) -> Chart | None:
    """The chart, or None when the summary has none of its series (and no rule needs it)."""
    lines = []
    for series, figure in spec.lines + spec.added:
        points = step_points(ctx, spans, series, figure)
        if series in ACTOR_SERIES and not any(v for _, v in points):
            continue  # a state no actor was in: seven lines would bury the two that move
        if points:
            lines.append((series, figure, points))
    if not lines and not spec.rules:
        return None
    # A chart only a rule filled still gets a readable unit: from the rule's own number.
    plain = [r.value for r in spec.rules if r.target_factor is None]
    top = max([abs(v) for *_, points in lines for _, v in points] or plain or [0.0])
    bytes_chart = any(is_bytes(s) for s, _ in spec.lines)
    divisor, unit = byte_unit(top) if bytes_chart else (1.0, "")
    chart = ctx.chart(spec.title, f"{unit}{spec.unit}", size="small")
    for i, (series, figure, points) in enumerate(lines):
        dash = "6 3" if (series, figure) in spec.added else spec.dashes.get(series, "")
        label = series if figure in ("mean", "rate") else f"{series} {figure}"
        scaled = [(t, v / divisor) for t, v in points]
        chart.lines.append(Line(label, scaled, COLOURS[i % len(COLOURS)], dash, 2.0))
    chart.rules = _rules_of(ctx, spec, divisor)
    chart.empty = f"no data: no such figure in {SERVER_SUMMARY}"
    return chart


def charts(ctx: ReportContext) -> str:
    spans = windows_of(ctx.data.server)
    specs = default_charts()
    # A Prometheus source's queries: one chart each, as their units are the query's own.
    described = section_of(ctx.data.server, "series")
    for q in query_names(ctx.data.server):  # a $window query answers once a window: its end
        kind = section_of(described, q).get("kind")
        figure, unit = (
            ("end", "the window's answer") if kind == "answer" else ("mean", "window mean")
        )
        specs.append(ChartSpec(f"query {q}", unit, [(q, figure)]))
    families = {name: str(d.get("metric")) for name, d in described.items() if isinstance(d, dict)}
    _place_rules(specs, [r for r in ctx.rules if r.server], families)
    found = [c for c in (chart_of(ctx, s, spans) for s in specs) if c is not None]
    return grid(render_charts(found)) if found else ""


# --------------------------------------------------------------------------- section
def server(ctx: ReportContext) -> str:
    doc = ctx.data.server
    intro = (
        "what the substrate itself reported (docs/SPEC.md §5.9), cut per judged window: "
        "counters as their rate over the window, gauges as their mean or max; the steady "
        "window is the whole hold"
    )
    reason = no_data(doc, SERVER_SUMMARY in ctx.data.files)
    head = source_line(doc) if doc is not None else ""
    if reason is not None:
        return section(
            "server", "Server-side figures", f'{head}<p class="nodata">{esc(reason)}</p>', intro
        )
    assert doc is not None
    rules = rule_figures(ctx.data, ctx.rules)
    rows = key_figures(spans_of(doc), list(rules), query_names(doc))
    body = head + "<h3>Key figures per window</h3>" + figures_table(ctx, rows, rules)
    body += wake_split(doc)
    body += "<h3>Per window, over time</h3>" + charts(ctx)
    return section("server", "Server-side figures", body, intro)


__all__ = ["default_charts", "server", "step_points"]
