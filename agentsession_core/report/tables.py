"""The table sections of report.html: the verdict banner and headline figures, the judged
windows with the rule that decided each, the thresholds against every window, drift and
ramp, and the whole-run rows."""

from __future__ import annotations

import time
from typing import Any

from agentsession_core.judge.gate_document import Ramp
from agentsession_core.report.chart_scale import fmt_offset
from agentsession_core.report.context import (
    LATENCY_STATS,
    OUTCOME_COLOURS,
    ReportContext,
    section,
)
from agentsession_core.report.data import RunData, number
from agentsession_core.report.svg_chart import esc

BANNER_COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "void": "#616161"}
NOT_JUDGED_COLOUR = "#37474f"


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return esc(value)


def ms(value: Any) -> str:
    v = number(value)
    if v is None:
        return "–"
    return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.1f} ms"


def outcome_cell(outcome: str) -> str:
    colour = OUTCOME_COLOURS.get(outcome, "#ffffff")
    return f'<td class="oc" style="background:{colour}">{esc(outcome)}</td>'


def table(head: list[str], rows: list[str], cls: str = "") -> str:
    cells = "".join(f"<th>{h}</th>" for h in head)
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}><thead><tr>{cells}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


# --------------------------------------------------------------------------- top
def banner(data: RunData) -> str:
    gate, status = data.gate, data.status or {}
    verdict: str
    if gate is not None:
        verdict, colour, reason = gate.verdict, None, gate.reason or ""
    else:
        verdict, colour = "not judged", NOT_JUDGED_COLOUR
        reason = f"no gate.json: a run without judged windows (run {status.get('status', '?')})"
    colour = colour or BANNER_COLOURS.get(verdict, BANNER_COLOURS["void"])
    abort = (gate.abort_reason if gate else None) or status.get("abort_reason")
    extra = f'<div class="sub">stopped: {esc(abort)}</div>' if abort else ""
    return (
        f'<div class="banner" style="background:{colour}"><span class="verdict">'
        f"{esc(verdict.upper())}</span> {esc(reason)}{extra}</div>"
    )


def meta_line(data: RunData) -> str:
    params, status = data.params, data.status or {}
    started = number(data.campaign.get("started_unix")) or number(status.get("started_unix"))
    parts = [
        f"script <b>{esc(data.campaign.get('script', params.get('script', '?')))}</b>",
        f"population <b>{esc(data.population_kind)}</b>",
        f"tag <b>{esc(params.get('tag', '?'))}</b>",
    ]
    if started:
        parts.append(time.strftime("started %Y-%m-%d %H:%M:%S UTC", time.gmtime(started)))
    t0, t1 = data.span()
    parts.append(f"{fmt_offset(t1 - t0)} recorded")
    if status:
        parts.append(f"run {esc(status.get('status'))}, phase {esc(status.get('phase'))}")
    return " · ".join(parts)


def _gate_headline(data: RunData) -> dict[str, dict[str, float | None]]:
    return (data.gate.headline if data.gate else None) or {}


def _headline(data: RunData) -> dict[str, dict[str, Any]]:
    """The gate's whole-hold headline; for an unjudged run, the whole run's rows."""
    headline = _gate_headline(data)
    if headline:
        return dict(headline)
    out: dict[str, dict[str, Any]] = {}
    for section_name, metric in (
        ("TimeToWake", "rps_TimeToWake"),
        ("WakeFirstTouch", "http_WakeFirstTouch"),
    ):
        m = data.stats_row(metric)
        if m.get("request_count"):
            out[section_name] = m
    turnover = data.stats_row("turnover_window")
    if turnover:
        out["requests"] = {
            "failure_ratio": turnover.get("failure_ratio"),
            "achieved_rps": turnover.get("achieved_rps"),
        }
    return out


def _step_card(data: RunData, step: dict[str, Any]) -> tuple[str, str]:
    if step:
        return "Step_* p50 / p99", f"{ms(step.get('p50'))} / {ms(step.get('p99'))}"
    # Unjudged: the step rows cannot be merged back from their percentiles; the slowest one.
    worst = max(
        (
            (number(r["measurements"].get("p99")) or 0.0, str(r.get("metric")))
            for r in data.stats_rows
            if str(r.get("metric", "")).startswith("http_Step_")
            and isinstance(r.get("measurements"), dict)
        ),
        default=None,
    )
    if worst is None:
        return "Step_* p99", "–"
    return f"slowest step p99 ({esc(worst[1].removeprefix('http_'))})", ms(worst[0])


def cards(data: RunData) -> str:
    h = _headline(data)
    wake, step, req = h.get("TimeToWake", {}), h.get("Step_*", {}), h.get("requests", {})
    outcomes = [str(w.get("outcome")) for w in data.windows]
    counts = (
        ", ".join(
            f"{outcomes.count(o)} {o}"
            for o in ("pass", "break", "void", "aborted")
            if o in outcomes
        )
        or "none judged"
    )
    base = data.base_level()
    target = f" of {base:g}" if base is not None and data.population_kind == "turnover" else ""
    items = [
        ("windows", counts),
        ("TimeToWake p50 / p99", f"{ms(wake.get('p50'))} / {ms(wake.get('p99'))}"),
        _step_card(data, step),
        ("failure ratio", fmt(number(req.get("failure_ratio")), 4)),
        ("achieved rps", f"{fmt(number(req.get('achieved_rps')), 2)}{target}"),
    ]
    body = "".join(
        f'<div class="card"><div class="k">{k}</div><div class="v">{v}</div></div>'
        for k, v in items
    )
    source = (
        "the first level's hold (gate.json)"
        if _gate_headline(data)
        else ("the whole run (stats.jsonl)")
    )
    return f'<div class="cards">{body}</div><p class="meta dim">headline figures over {source}</p>'


# --------------------------------------------------------------------------- windows
def decided_by(w: dict[str, Any]) -> str:
    """The rule (or reason) that decided a window's outcome."""
    outcome = str(w.get("outcome"))
    results = [r for r in w.get("thresholds") or [] if isinstance(r, dict)]
    if outcome == "aborted":
        return f"abort: {esc(w.get('abort_reason') or 'an abort rule tripped')}"
    if outcome == "void":
        return f"void: {esc(w.get('void_reason') or 'the generator was saturated')}"
    missed = [r for r in results if r.get("passed") is False]
    if missed:
        return "<br>".join(
            f"<b>{esc(r.get('threshold'))}</b> <span class=dim>{esc(r.get('detail', ''))}</span>"
            for r in missed
        )
    judged = sum(1 for r in results if r.get("passed") is not None)
    unjudged = len(results) - judged
    text = f"all {judged} judged rule(s) held"
    return text + (f' <span class="dim">({unjudged} not judged)</span>' if unjudged else "")


def _saturated(window: dict) -> str:
    """How many of the window's seconds the generator saturated in (how close an unpaired
    window came to void), and how many a paired one left out."""
    saturated = number(window.get("saturated_seconds"))
    if saturated is None:
        return "–"
    left_out = number(window.get("left_out_seconds")) or 0
    shown = f"{saturated:.0f} s"
    return shown + (" (left out of both arms)" if left_out else "")


def windows(ctx: ReportContext) -> str:
    data = ctx.data
    if not data.windows:
        return section(
            "windows",
            "Windows",
            '<p class="nodata">no data: no judged windows '
            "(windows.jsonl is written by campaigns)</p>",
        )
    base = data.base_level() if data.population_kind == "turnover" else None
    rows = []
    for w in data.windows:
        h = w.get("headline") or {}
        wake, touch, step = (
            h.get("TimeToWake", {}),
            h.get("WakeFirstTouch", {}),
            h.get("Step_*", {}),
        )
        req = h.get("requests", {})
        start, end = number(w.get("start_unix")) or ctx.t0, number(w.get("end_unix")) or ctx.t0
        level = number(w.get("level"))
        target = f" / {base * level:g}" if base is not None and level is not None else ""
        rows.append(
            f"<tr><td>{fmt(w.get('index'))}</td><td>{fmt(level, 2)}×</td>"
            f"<td class=nw>{fmt_offset(start - ctx.t0)}–{fmt_offset(end - ctx.t0)}</td>"
            f"{outcome_cell(str(w.get('outcome')))}<td class=why>{decided_by(w)}</td>"
            f"<td>{ms(wake.get('p50'))} / {ms(wake.get('p99'))}</td><td>{ms(touch.get('p99'))}</td>"
            f"<td>{ms(step.get('p99'))}</td><td>{fmt(number(req.get('failure_ratio')), 4)}</td>"
            f"<td>{fmt(number(req.get('achieved_rps')), 2)}{target}</td>"
            f"<td>{_saturated(w)}</td></tr>"
        )
    head = [
        "#",
        "level",
        "time",
        "outcome",
        "decided by",
        "TimeToWake p50 / p99",
        "WakeFirstTouch p99",
        "Step_* p99",
        "failure ratio",
        "achieved / target rps",
        "generator saturated",
    ]
    return section(
        "windows",
        "Windows: verdicts and the rule that decided each",
        table(head, rows, "wide") + threshold_matrix(ctx),
    )


def threshold_matrix(ctx: ReportContext) -> str:
    """Every rule (rows) against every window (columns): observed value, held or missed. In
    a void or aborted window the rules decided nothing: their cells are greyed."""
    data = ctx.data
    latency = {r.text for r in ctx.rules if r.stat in LATENCY_STATS}
    texts: list[str] = []
    for w in data.windows:
        for r in w.get("thresholds") or []:
            if isinstance(r, dict) and r.get("threshold") not in texts:
                texts.append(str(r.get("threshold")))
    if not texts:
        return ""
    rows = []
    for text in texts:
        cells = []
        for w in data.windows:
            found = next((r for r in w.get("thresholds") or [] if r.get("threshold") == text), None)
            if found is None:
                cells.append("<td>–</td>")
                continue
            passed = found.get("passed")
            colour = {True: OUTCOME_COLOURS["pass"], False: OUTCOME_COLOURS["break"]}.get(
                passed, "#f5f5f5"
            )
            if w.get("outcome") in ("void", "aborted"):
                colour = "#eeeeee"
            mark = {True: "✓", False: "✗"}.get(passed, "not judged")
            value = number(found.get("observed"))
            shown = "" if value is None else (ms(value) if text in latency else f"{value:.4g}")
            cells.append(
                f'<td style="background:{colour}" title="{esc(found.get("detail", ""))}">'
                f"{shown} {mark}</td>"
            )
        rows.append(f"<tr><td><code>{esc(text)}</code></td>{''.join(cells)}</tr>")
    head = ["threshold"] + [
        f"w{fmt(w.get('index'))} @{fmt(number(w.get('level')), 2)}× {esc(w.get('outcome'))}"
        for w in data.windows
    ]
    return "<h3>Thresholds per window (observed value)</h3>" + table(head, rows)


def figures(data: RunData) -> str:
    """gate.json's headline figures with their samples and intervals (docs/SPEC.md §6.2): what
    a comparison with a baseline sets side by side, and which percentiles it cannot judge."""
    gate = data.gate
    found = (gate.figures if gate else None) or {}
    title = "Headline figures and their uncertainty"
    if gate is None or not found:
        why = "no judged window at the first level" if gate else "no gate.json"
        if gate and (gate.schema_version or 1) < 2:
            why = "gate.json schema 1 has no intervals"
        return section("figures", title, f'<p class="nodata">no data: {why}</p>')
    rows = []
    for metric, f in found.items():
        show = ms if f.unit == "ms" else (lambda v: fmt(number(v), 4))
        low, high = f.low, f.high
        interval = "–" if low is None or high is None else f"{show(low)} … {show(high)}"
        estimable = f.estimable is not False
        judged = "yes" if estimable else "inconclusive: < 10 samples beyond it"
        rows.append(
            f"<tr><td>{esc(metric)}</td><td>{show(f.value)}</td><td>{interval}</td>"
            f"<td>{fmt(f.n)}</td><td>{'–' if f.beyond is None else fmt(f.beyond)}</td>"
            f"<td>{esc(judged)}</td></tr>"
        )
    confidence = gate.confidence or 0.99
    intro = (
        f"Over the first level's judged windows; intervals at {confidence:.0%}, a block "
        "bootstrap over the hold's seconds (hold_seconds.jsonl)."
    )
    head = ["figure", "value", "interval", "samples", "beyond the percentile", "comparable"]
    return section("figures", title, table(head, rows), intro)


def drift_and_ramp(data: RunData) -> str:
    gate = data.gate
    if gate is None:
        return ""
    ramp = gate.ramp or Ramp()
    parts = [
        f"<p>Ramp: last level that held <b>{fmt(ramp.last_held_level, 2)}</b>, "
        f"first that broke <b>{fmt(ramp.first_broken_level, 2)}</b>.</p>"
    ]
    if gate.drift:
        rows = [f"<tr><td>{esc(k)}</td><td>{v:+.2f}</td></tr>" for k, v in gate.drift.items()]
        parts.append(
            "<h3>Drift across the first level's windows (ms per window)</h3>"
            + table(["metric", "slope"], rows)
        )
    return section("drift", "Ramp and drift", "".join(parts))


def rows_table(data: RunData) -> str:
    rows = []
    for r in data.stats_rows:
        m = r.get("measurements") or {}
        metric = str(r.get("metric", ""))
        if "request_count" not in m:
            continue
        rows.append(
            f"<tr><td>{esc(metric)}</td><td>{fmt(m.get('request_count'))}</td>"
            f"<td>{fmt(m.get('failure_count'))}</td><td>{fmt(m.get('event_count'))}</td>"
            f"<td>{ms(m.get('p50'))}</td>"
            f"<td>{ms(m.get('p99'))}</td><td>{ms(m.get('max_response_time'))}</td>"
            f"<td>{ms(m.get('service_p99'))}</td><td>{ms(m.get('start_lag_p99'))}</td>"
            f"<td>{fmt(number(m.get('requests_per_s')), 2)}</td></tr>"
        )
    body = (
        table(
            [
                "row",
                "requests",
                "failures",
                "events",
                "p50",
                "p99",
                "max",
                "service p99",
                "start lag p99",
                "req/s",
            ],
            rows,
        )
        if rows
        else '<p class="nodata">no data</p>'
    )
    return section("rows", "Rows over the whole run (stats.jsonl)", body)


__all__ = [
    "banner",
    "cards",
    "decided_by",
    "drift_and_ramp",
    "meta_line",
    "rows_table",
    "windows",
]
