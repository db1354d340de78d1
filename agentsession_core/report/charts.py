"""The chart sections of report.html: throughput, failures, latency (from the intended time,
service time, start lag), per-step latency, generator health and the session gauges.

Each function takes the report's shared context and returns the section's HTML (its <h2>
carries an id, so the page's index and the tests find it).
"""

from __future__ import annotations

from agentsession_core.measure.health import (
    CPU_GAUGE,
    CPU_PERCENT_MAX,
    DISPATCH_LAG_P99_MS,
    DISPATCH_LAG_ROW,
    HEALTH_KIND,
    LOOP_LAG_P99_MS,
    LOOP_LAG_ROW,
    VOID_FRACTION,
)
from agentsession_core.measure.stats import ROUTER_KIND, TIME_TO_WAKE_ROW
from agentsession_core.report.context import (
    ReportContext,
    grid,
    minus,
    percentile_lines,
    section,
    sum_points,
)
from agentsession_core.report.data import AGGREGATED_ROW, Points, RowKey, number
from agentsession_core.report.failure_table import failure_table
from agentsession_core.report.svg_chart import Chart, Line, Rule, esc, render_charts

# Row kinds often run at the same rate (a swap is a park and a wake): one solid, two dashed.
KIND_STYLE = {
    "rps": ("#2e7d32", "", 3.0),
    "http": ("#1565c0", "9 5", 2.0),
    "grpc": ("#8e24aa", "2 4", 2.2),
}
CODE_COLOURS = ("#c62828", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#4e342e", "#558b2f")
STATE_COLOURS = {
    "awake": "#2e7d32",
    "parked": "#1565c0",
    "waking": "#ef6c00",
    "parking": "#8e24aa",
    "running": "#2e7d32",
    "thinking": "#1565c0",
}
LATENCY_ROWS: tuple[tuple[RowKey, str], ...] = (
    (TIME_TO_WAKE_ROW, "rps_TimeToWake: a parked agent's wake, from the tick's intended time"),
    ((ROUTER_KIND, "WakeFirstTouch"), "http_WakeFirstTouch: the first request after a think"),
    (AGGREGATED_ROW, "all requests (Aggregated)"),
)
COUNT_ROWS = (("turnover", "Backlog"), ("turnover", "ResidentShortfall"), ("actor", "CrashCount"))


# --------------------------------------------------------------------------- throughput
def achieved_points(ctx: ReportContext) -> tuple[Points, str]:
    """Successful wakes (turnover) or successful steps per second, and what they are."""
    data = ctx.data
    wakes = data.row(*TIME_TO_WAKE_ROW)
    if wakes.rps or data.population_kind == "turnover":
        return minus(wakes.rps, wakes.failures), "achieved: successful wakes/s"
    steps = [s for (k, n), s in data.rows.items() if k == ROUTER_KIND and n.startswith("Step_")]
    done = sum_points([s.rps for s in steps])
    return minus(done, sum_points([s.failures for s in steps])), "achieved: successful steps/s"


def target_rules(ctx: ReportContext) -> list[Rule]:
    """The turnover's target (target_rps x level), per window or for the whole run."""
    base = ctx.data.base_level()
    if ctx.data.population_kind != "turnover" or base is None:
        return []
    spans = ctx.window_levels() or [(None, None, 1.0)]
    label = "target: target_rps × level"
    return [
        Rule(base * level, label, "#212121", x0, x1, "2 3", f"target {base * level:g}/s")
        for x0, x1, level in spans
    ]


def throughput(ctx: ReportContext) -> str:
    achieved, label = achieved_points(ctx)
    main = ctx.chart("achieved against target", "per s", size="half")
    main.lines = [Line(label, achieved, "#1b5e20", width=2.4, reduce="mean")]
    main.rules = target_rules(ctx) + ctx.achieved_rules()
    kinds = ctx.chart("requests by row kind", "requests/s", size="half")
    for kind, (colour, dash, width) in KIND_STYLE.items():
        rates = sum_points([s.rps for (k, _), s in ctx.data.rows.items() if k == kind])
        if rates:
            kinds.lines.append(Line(f"{kind} rows", rates, colour, dash, width, "mean"))
    return section(
        "throughput",
        "Throughput over time",
        grid(render_charts([main, kinds]), 2),
        "achieved is what the judge calls achieved_rps (successful wakes per second for a "
        "turnover, successful steps otherwise); the target is target_rps × the window's level",
    )


# --------------------------------------------------------------------------- failures
def failures(ctx: ReportContext) -> str:
    data = ctx.data
    by_code: dict[str, list[Points]] = {}
    for key, series in sorted(data.rows.items()):
        if key == AGGREGATED_ROW or key[0] == HEALTH_KIND:
            continue
        for code, points in series.errors.items():
            by_code.setdefault(code, []).append(points)
    chart = ctx.chart("failures per second, by code", "failures/s", size="half")
    if by_code:
        chart.bars = [
            Line(code, sum_points(parts), CODE_COLOURS[i % len(CODE_COLOURS)], reduce="mean")
            for i, (code, parts) in enumerate(sorted(by_code.items()))
        ]
    elif not data.has_seconds_file:  # an older run: failures per row from the CSV
        chart.bars = [
            Line(f"{k}_{n}", s.failures, CODE_COLOURS[i % len(CODE_COLOURS)], reduce="mean")
            for i, ((k, n), s) in enumerate(sorted(data.rows.items()))
            if (k, n) != AGGREGATED_ROW and any(v for _, v in s.failures)
        ]
    chart.empty = "no failures recorded" if data.rows else "no data"
    counts = ctx.chart("backlog, resident shortfall and crashes", "per s", size="half")
    counts.lines = [
        Line(f"{k}/{n}", data.row(k, n).rps, CODE_COLOURS[i], "", 1.8, "mean")
        for i, (k, n) in enumerate(COUNT_ROWS)
        if any(v for _, v in data.row(k, n).rps)
    ]
    counts.empty = "none recorded: no backlog, no shortfall, no crash" if data.rows else "no data"
    judged = [r.text for r in ctx.untracked_rules()]
    note = "judged per window (see Windows): " + "; ".join(esc(t) for t in judged) if judged else ""
    body = grid(render_charts([chart, counts], [note]), 2) + failure_table(data)
    return section("failures", "Failures over time", body)


# --------------------------------------------------------------------------- latency
def latency(ctx: ReportContext) -> str:
    parts = []
    for key, title in LATENCY_ROWS:
        series = ctx.data.row(*key)
        views: tuple[tuple[str, str, list[Rule]], ...] = (
            (
                "latency",
                "from the intended time (headline)",
                ctx.latency_rules(None if key == AGGREGATED_ROW else key),
            ),
            ("service", "service time (from send)", []),
            ("start_lag", "start lag (intended → send)", []),
        )
        charts: list[Chart] = []
        for view, label, rules in views:
            chart = ctx.chart(label, "ms", size="small")
            chart.lines, chart.rules = percentile_lines(series.view(view)), rules
            if view != "latency" and not ctx.data.has_seconds_file:
                chart.empty = "no data: this run has no stats_history.jsonl"
            charts.append(chart)
        parts.append(f"<h3>{esc(title)}</h3>{grid(render_charts(charts))}")
    return section(
        "latency",
        "Latency over time",
        "".join(parts),
        "per second: p99 solid red, p90 dashed orange, p50 solid blue; windows shaded by "
        "outcome; dashed rules are thresholds in the run's parameters",
    )


def steps(ctx: ReportContext) -> str:
    keys = sorted(k for k in ctx.data.rows if k[0] == ROUTER_KIND and k[1].startswith("Step_"))
    charts: list[Chart] = []
    for key in keys:
        chart = ctx.chart(f"{key[0]}_{key[1]}", "ms", size="small")
        chart.lines = percentile_lines(ctx.data.row(*key).view("latency"))
        chart.rules = ctx.latency_rules(key)
        charts.append(chart)
    body = (
        grid(render_charts(charts))
        if charts
        else '<p class="nodata">no data: no Step_ row recorded</p>'
    )
    return section(
        "steps",
        "Per-step latency",
        body,
        "one chart per scripted step (http/Step_* rows), from the intended time, per second",
    )


# --------------------------------------------------------------------------- health
def saturated_seconds(ctx: ReportContext) -> dict[float, str]:
    """Seconds past a health limit (docs/SPEC.md §5.6), as measure/health.py judges them."""
    out: dict[float, str] = {}
    loop = ctx.data.row(*LOOP_LAG_ROW).view("response").get("p99", [])
    dispatch = ctx.data.row(*DISPATCH_LAG_ROW).view("response").get("p99", [])
    cpu = ctx.data.gauges.get(CPU_GAUGE, {}).get("", [])
    for points, limit, what in (
        (loop, LOOP_LAG_P99_MS, "loop lag"),
        (dispatch, DISPATCH_LAG_P99_MS, "dispatch lateness"),
        (cpu, CPU_PERCENT_MAX, "cpu"),
    ):
        for t, v in points:
            if v > limit:
                out.setdefault(t, what)
    return out


def _limit(value: float, what: str, unit: str) -> Rule:
    return Rule(value, f"void limit: {what} > {value:g} {unit}", value=f"{value:g} {unit}")


def health(ctx: ReportContext) -> str:
    loop = ctx.chart("event-loop lag", "ms (10 ms heartbeat overshoot)", size="small")
    loop.lines = percentile_lines(ctx.data.row(*LOOP_LAG_ROW).view("response"))
    loop.rules = [_limit(LOOP_LAG_P99_MS, "p99", "ms")]
    dispatch = ctx.chart("dispatch lateness", "ms (sleepers woken late)", size="small")
    dispatch.lines = percentile_lines(ctx.data.row(*DISPATCH_LAG_ROW).view("response"))
    dispatch.rules = [_limit(DISPATCH_LAG_P99_MS, "p99", "ms")]
    cpu = ctx.chart("generator CPU", "% of one core", size="small")
    cpu.lines = [Line("cpu", ctx.data.gauges.get(CPU_GAUGE, {}).get("", []), "#37474f", width=1.8)]
    cpu.rules = [_limit(CPU_PERCENT_MAX, "cpu", "%")]
    for chart in (loop, dispatch, cpu):
        chart.rules_in_scale = True
    if not ctx.data.has_seconds_file:
        for chart in (loop, dispatch):
            chart.empty = "no data: this run has no stats_history.jsonl"
    saturated = saturated_seconds(ctx)
    per_window = []
    for w in ctx.data.windows:
        start, end = number(w.get("start_unix")), number(w.get("end_unix"))
        if start is None or end is None:
            continue
        n = sum(1 for t in saturated if start <= t < end)
        allowed = int(VOID_FRACTION * (end - start))
        if n:
            per_window.append(
                f"window {w.get('index')}: {n} of {end - start:.0f} s (allowed {allowed})"
            )
    summary = (
        f"<b>{len(saturated)}</b> saturated second(s) in the whole run"
        + (f" — {'; '.join(per_window)}" if per_window else "")
        + f". A window is <b>void</b> when more than {VOID_FRACTION:.0%} of its seconds are "
        "saturated (any one in a window shorter than 100 s): loop-lag p99 above "
        f"{LOOP_LAG_P99_MS:g} ms, dispatch-lateness p99 above {DISPATCH_LAG_P99_MS:g} ms, CPU "
        f"above {CPU_PERCENT_MAX:g}%, or a second without a heartbeat."
    )
    body = grid(render_charts([loop, dispatch, cpu]))
    return section("health", "Generator health", f'<p class="meta">{summary}</p>{body}')


# --------------------------------------------------------------------------- gauges
def gauges(ctx: ReportContext) -> str:
    data = ctx.data
    turnover = ctx.chart("turnover gauge: sessions by state", "sessions", size="half")
    states = data.gauges.get("turnover_sessions", {})
    turnover.lines = [
        Line(state, pts, STATE_COLOURS.get(state, "#757575"), "", 2.0)
        for state, pts in sorted(states.items())
    ]
    awake = number(data.population.get("awake"))
    if awake is not None and data.population_kind == "turnover":
        turnover.rules = [
            Rule(awake, "awake asked for", "#000000", dash="2 4", value=f"awake = {awake:g}")
        ]
    if data.population_kind != "turnover":
        turnover.empty = f"no data: the population is {data.population_kind}, not turnover"
    sessions = ctx.chart("sessions by state (every population)", "sessions", size="half")
    sessions.lines = [
        Line(state or "sessions", pts, STATE_COLOURS.get(state, "#757575"), "", 1.8)
        for state, pts in sorted(data.gauges.get("sessions", {}).items())
    ]
    body = grid(render_charts([turnover, sessions]), 2)
    return section("gauge", "Turnover gauge", body)


__all__ = [
    "achieved_points",
    "failures",
    "gauges",
    "health",
    "latency",
    "saturated_seconds",
    "steps",
    "throughput",
]
