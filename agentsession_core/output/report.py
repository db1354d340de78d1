"""report.html: one self-contained page (inline SVG and CSS, no scripts, no external assets)
rendered from a run directory's files, so it can be rebuilt from an uploaded run.

Sections: the verdict banner (gate.json, else status.json), latency over time per headline row
(stats_history.csv: rps_TimeToWake, http_WakeFirstTouch and the Aggregated row, p50/p90/p99 per
second, with the judged windows shaded by outcome), the turnover gauge (gauges.jsonl, series
``turnover_sessions`` by state), the per-window table (windows.jsonl), drift, ramp and baseline
(gate.json) and the per-row totals (stats.jsonl). Every input is optional: a missing file
leaves its section saying so rather than failing the report.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from pathlib import Path
from typing import Any

from agentsession_core.measure.stats import ROUTER_KIND, TIME_TO_WAKE_ROW
from agentsession_core.output.chart import esc, line_chart
from agentsession_core.output.run_dir import atomic_write
from agentsession_core.output.stats_files import locust_column

TITLE_ROWS = (TIME_TO_WAKE_ROW, (ROUTER_KIND, "WakeFirstTouch"), ("", "Aggregated"))
# (stats_history.csv column, percentile key, colour) of each latency line.
LATENCY_COLUMNS = tuple(
    (locust_column(key), key, colour)
    for key, colour in (("p50", "#4c78a8"), ("p90", "#f58518"), ("p99", "#e45756"))
)
GAUGE = "turnover_sessions"
GAUGE_COLOURS = {"awake": "#54a24b", "parked": "#4c78a8", "waking": "#f58518", "parking": "#b279a2"}
OUTCOME_COLOURS = {
    "pass": "#d8f0d2",
    "break": "#f8d0cc",
    "void": "#e4e4e4",
    "aborted": "#f3b0a8",
    "fail": "#f8d0cc",
}
BANNER_COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "void": "#616161"}


def _population_kind(params: dict[str, Any]) -> str:
    """RunParams.population is a section ({"kind": ...}); older runs stored the kind."""
    population = params.get("population", "?")
    return population.get("kind", "?") if isinstance(population, dict) else str(population)


# --------------------------------------------------------------------------- reading
def _text(run_dir: Path, name: str) -> str | None:
    try:
        return (run_dir / name).read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def _json(run_dir: Path, name: str) -> dict | None:
    text = _text(run_dir, name)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _jsonl(run_dir: Path, name: str) -> list[dict]:
    out = []
    for line in (_text(run_dir, name) or "").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue  # a torn last line from a killed run must not sink the report
        if isinstance(value, dict):
            out.append(value)
    return out


def _number(cell: str | None) -> float | None:
    try:
        value = float(cell) if cell not in (None, "", "N/A") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def latency_series(history_csv: str) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """{row name: {"p50"|"p90"|"p99": [(unix second, ms)]}} for the headline rows."""
    wanted = {name for _, name in TITLE_ROWS}
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for line in csv.DictReader(io.StringIO(history_csv)):
        name = line.get("Name")
        if name not in wanted:
            continue
        t = _number(line.get("Timestamp"))
        if t is None:
            continue
        for column, key, _ in LATENCY_COLUMNS:
            value = _number(line.get(column))
            if value is not None:
                out.setdefault(name, {}).setdefault(key, []).append((t, value))
    return out


def gauge_series(gauges: list[dict]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for g in gauges:
        if g.get("name") != GAUGE:
            continue
        state = str((g.get("labels") or {}).get("state", "?"))
        t, v = _number(str(g.get("t"))), _number(str(g.get("value")))
        if t is not None and v is not None:
            out.setdefault(state, []).append((t, v))
    return out


# --------------------------------------------------------------------------- sections
def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return esc(value)


def _banner(gate: dict | None, status: dict | None) -> str:
    if gate is not None:
        verdict = str(gate.get("verdict", "void"))
        reason = gate.get("reason", "")
    else:
        verdict = "void"
        reason = "no gate.json: this run was not judged"
        if status:
            reason += f" (run {status.get('status')})"
    colour = BANNER_COLOURS.get(verdict, BANNER_COLOURS["void"])
    extra = ""
    abort = (gate or {}).get("abort_reason") or (status or {}).get("abort_reason")
    if abort:
        extra = f'<div class="sub">abort: {esc(abort)}</div>'
    return (
        f'<div class="banner" style="background:{colour}"><span class="verdict">'
        f"{esc(verdict.upper())}</span> {esc(reason)}{extra}</div>"
    )


def _bands(windows: list[dict]) -> list[tuple[float, float, str]]:
    out = []
    for w in windows:
        start, end = _number(str(w.get("start_unix"))), _number(str(w.get("end_unix")))
        if start is not None and end is not None:
            out.append((start, end, OUTCOME_COLOURS.get(str(w.get("outcome")), "#eeeeee")))
    return out


def _window_table(windows: list[dict]) -> str:
    if not windows:
        return '<p class="empty">no windows.jsonl: no judged windows</p>'
    head = (
        "<tr><th>#</th><th>level</th><th>outcome</th><th>seconds</th>"
        "<th>TimeToWake p50 / p99 ms</th><th>WakeFirstTouch p99 ms</th>"
        "<th>Step_* p99 ms</th><th>failure ratio</th><th>achieved rps</th>"
        "<th>thresholds missed / not judged</th></tr>"
    )
    rows = []
    for w in windows:
        h = w.get("headline") or {}
        wake, touch = h.get("TimeToWake", {}), h.get("WakeFirstTouch", {})
        steps, req = h.get("Step_*", {}), h.get("requests", {})
        results = w.get("thresholds") or []
        missed = [r["threshold"] for r in results if r.get("passed") is False]
        unjudged = [r["threshold"] for r in results if r.get("passed") is None]
        notes = "; ".join(esc(t) for t in missed) or "none"
        if unjudged:
            notes += f' <span class="dim">/ {"; ".join(esc(t) for t in unjudged)}</span>'
        reason = w.get("abort_reason") or w.get("void_reason")
        if reason:
            notes += f'<br><span class="dim">{esc(reason)}</span>'
        outcome = str(w.get("outcome"))
        dur = (_number(str(w.get("end_unix"))) or 0) - (_number(str(w.get("start_unix"))) or 0)
        rows.append(
            f"<tr><td>{_fmt(w.get('index'))}</td><td>{_fmt(w.get('level'), 2)}</td>"
            f'<td style="background:{OUTCOME_COLOURS.get(outcome, "#fff")}">{esc(outcome)}</td>'
            f"<td>{dur:.0f}</td><td>{_fmt(wake.get('p50'))} / {_fmt(wake.get('p99'))}</td>"
            f"<td>{_fmt(touch.get('p99'))}</td><td>{_fmt(steps.get('p99'))}</td>"
            f"<td>{_fmt(req.get('failure_ratio'), 4)}</td>"
            f"<td>{_fmt(req.get('achieved_rps'), 2)}</td>"
            f"<td>{notes}</td></tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _gate_details(gate: dict | None) -> str:
    if gate is None:
        return ""
    parts = []
    ramp = gate.get("ramp") or {}
    parts.append(
        f"<p>Ramp: last level that held <b>{_fmt(ramp.get('last_held_level'), 2)}</b>, "
        f"first that broke <b>{_fmt(ramp.get('first_broken_level'), 2)}</b>.</p>"
    )
    drift = gate.get("drift") or {}
    if drift:
        cells = "".join(f"<tr><td>{esc(k)}</td><td>{v:+.2f}</td></tr>" for k, v in drift.items())
        parts.append(
            "<h3>Drift (ms per window, first level)</h3>"
            f"<table><tr><th>metric</th><th>slope</th></tr>{cells}</table>"
        )
    baseline = gate.get("baseline")
    if baseline:
        cells = "".join(
            f'<tr class="{"bad" if m["regression"] else ""}"><td>{esc(m["metric"])}</td>'
            f"<td>{_fmt(m['baseline'], 3)}</td><td>{_fmt(m['current'], 3)}</td>"
            f"<td>{m['change']:+.1%}</td><td>{'regression' if m['regression'] else 'ok'}</td></tr>"
            for m in baseline.get("metrics", [])
        )
        parts.append(
            f"<h3>Against the baseline {esc(baseline.get('location') or '')} "
            f"(max regression {baseline.get('max_regression', 0):.0%})</h3>"
            "<table><tr><th>metric</th><th>baseline</th><th>this run</th>"
            f"<th>change</th><th></th></tr>{cells}</table>"
        )
    return "".join(parts)


def _rows_table(stats_rows: list[dict]) -> str:
    rows = []
    for r in stats_rows:
        metric = str(r.get("metric", ""))
        m = r.get("measurements") or {}
        if "request_count" not in m or metric.startswith("generator_"):
            continue
        rows.append(
            f"<tr><td>{esc(metric)}</td><td>{_fmt(m.get('request_count'))}</td>"
            f"<td>{_fmt(m.get('failure_count'))}</td><td>{_fmt(m.get('p50'))}</td>"
            f"<td>{_fmt(m.get('p99'))}</td><td>{_fmt(m.get('max_response_time'))}</td>"
            f"<td>{_fmt(m.get('requests_per_s'), 2)}</td></tr>"
        )
    if not rows:
        return '<p class="empty">no stats.jsonl rows</p>'
    return (
        "<table><tr><th>row</th><th>requests</th><th>failures</th><th>p50 ms</th>"
        f"<th>p99 ms</th><th>max ms</th><th>req/s</th></tr>{''.join(rows)}</table>"
    )


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1000px}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:24px 0 8px}h3{font-size:14px}
.banner{color:#fff;padding:12px 16px;border-radius:6px;font-size:15px}
.verdict{font-weight:700;font-size:20px;margin-right:8px}.sub{font-size:13px;margin-top:4px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:left;font-size:13px}th{background:#f4f4f4}tr.bad td{background:#f8d0cc}
.dim{color:#777}.empty{color:#777;font-style:italic}.meta{color:#555;font-size:13px}
svg{display:block;margin:8px 0}.ct{font-size:13px;font-weight:600}.ax{font-size:11px;fill:#555}
.grid{stroke:#e6e6e6}
"""


def render_report(run_dir: Path) -> str:
    run_dir = Path(run_dir)
    gate = _json(run_dir, "gate.json")
    status = _json(run_dir, "status.json")
    campaign = _json(run_dir, "campaign.json") or {}
    windows = _jsonl(run_dir, "windows.jsonl")
    stats_rows = _jsonl(run_dir, "stats.jsonl")
    latency = latency_series(_text(run_dir, "stats_history.csv") or "")
    gauges = gauge_series(_jsonl(run_dir, "gauges.jsonl"))
    bands = _bands(windows)

    starts = [p[0] for rows in latency.values() for pts in rows.values() for p in pts]
    starts += [p[0] for pts in gauges.values() for p in pts] + [b[0] for b in bands]
    t0 = min(starts) if starts else 0.0

    params = campaign.get("params") or {}
    name = params.get("name") or run_dir.name
    started = campaign.get("started_unix") or (status or {}).get("started_unix")
    meta = [
        f"script {esc(campaign.get('script', '?'))}",
        f"population {esc(_population_kind(params))}",
        f"tag {esc(params.get('tag', '?'))}",
    ]
    if started:
        meta.append(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(started))))
    if status:
        meta.append(f"run {esc(status.get('status'))}, phase {esc(status.get('phase'))}")

    charts = []
    for kind, row in TITLE_ROWS:
        series = {
            key: (colour, latency.get(row, {}).get(key, [])) for _, key, colour in LATENCY_COLUMNS
        }
        label = f"{kind}_{row}" if kind else "all requests (Aggregated)"  # the stats.jsonl metric
        charts.append(
            line_chart(
                f"{label}: latency from the intended time, per second",
                series,
                unit="ms",
                t0=t0,
                bands=bands,
            )
        )
    gauge_chart = line_chart(
        "turnover gauge: sessions by state",
        {state: (GAUGE_COLOURS.get(state, "#888"), pts) for state, pts in sorted(gauges.items())},
        unit="sessions",
        t0=t0,
        bands=bands,
    )
    legend = " ".join(
        f'<span style="background:{c};padding:0 6px">{o}</span>'
        for o, c in OUTCOME_COLOURS.items()
        if o != "fail"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>agentsession report: {esc(name)}</title><style>{_CSS}</style></head><body>"
        f'<h1>agentsession report: {esc(name)}</h1><p class="meta">{" · ".join(meta)}</p>'
        f"{_banner(gate, status)}"
        f'<h2>Latency over time</h2><p class="meta">windows shaded by outcome: {legend}</p>'
        f"{''.join(charts)}<h2>Turnover gauge</h2>{gauge_chart}"
        f"<h2>Windows</h2>{_window_table(windows)}{_gate_details(gate)}"
        f"<h2>Rows (whole run)</h2>{_rows_table(stats_rows)}"
        "</body></html>\n"
    )


def write_report(run_dir: Path) -> Path:
    """Render and write report.html atomically (file work: call it from a thread)."""
    run_dir = Path(run_dir)
    return atomic_write(run_dir / "report.html", render_report(run_dir))


__all__ = ["gauge_series", "latency_series", "render_report", "write_report"]
