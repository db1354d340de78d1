"""report.html: one self-contained page (inline SVG and CSS, no scripts, no external assets)
rendered from a run directory's files, so it can be rebuilt from an uploaded run.

Sections: the verdict banner (gate.json, else status.json), latency over time per headline row
(stats_history.csv: TimeToWake, WakeFirstTouch and the Aggregated row, p50/p90/p99 per second,
with the judged windows shaded by outcome), the turnover gauge (gauges.jsonl, series
``turnover_sessions`` by state), the per-window table (windows.jsonl), drift, ramp and baseline
(gate.json) and the per-row totals (stats.jsonl). Every input is optional: a missing file
leaves its section saying so rather than failing the report.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import time
from pathlib import Path
from typing import Any

TITLE_ROWS = (("turnover", "TimeToWake"), ("http", "WakeFirstTouch"), ("", "Aggregated"))
LATENCY_COLUMNS = (("50%", "p50", "#4c78a8"), ("90%", "p90", "#f58518"), ("99%", "p99", "#e45756"))
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
_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 760, 220, 60, 110, 24, 30


def _population_kind(params: dict[str, Any]) -> str:
    """RunParams.population is a section ({"kind": ...}); older runs stored the kind."""
    population = params.get("population", "?")
    return population.get("kind", "?") if isinstance(population, dict) else str(population)


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


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


# --------------------------------------------------------------------------- drawing
def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def line_chart(
    title: str,
    series: dict[str, tuple[str, list[tuple[float, float]]]],
    *,
    unit: str,
    t0: float,
    bands: list[tuple[float, float, str]] = (),
) -> str:
    """An inline SVG: series = {label: (colour, [(unix s, y)])}; bands shade x ranges."""
    points = [p for _, pts in series.values() for p in pts]
    if not points:
        return f'<p class="empty">{_esc(title)}: no data</p>'
    xs = [x - t0 for x, _ in points] + [b[1] - t0 for b in bands] + [b[0] - t0 for b in bands]
    x_lo, x_hi = min(0.0, *xs), max(1.0, *xs)
    y_hi = _nice_max(max(y for _, y in points))
    plot_w, plot_h = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B

    def sx(x: float) -> float:
        return _PAD_L + (x - t0 - x_lo) / (x_hi - x_lo) * plot_w

    def sy(y: float) -> float:
        return _PAD_T + plot_h - (y / y_hi) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'role="img" aria-label="{_esc(title)}">',
        f'<text x="{_PAD_L}" y="15" class="ct">{_esc(title)}</text>',
    ]
    for x0, x1, colour in bands:
        parts.append(
            f'<rect x="{sx(x0):.1f}" y="{_PAD_T}" width="{max(0.5, sx(x1) - sx(x0)):.1f}"'
            f' height="{plot_h}" fill="{colour}" opacity="0.6"/>'
        )
    for i in range(5):
        y = y_hi * i / 4
        parts.append(
            f'<line x1="{_PAD_L}" x2="{_PAD_L + plot_w}" y1="{sy(y):.1f}" '
            f'y2="{sy(y):.1f}" class="grid"/>'
        )
        parts.append(
            f'<text x="{_PAD_L - 4}" y="{sy(y) + 4:.1f}" class="ax" text-anchor="end">{y:g}</text>'
        )
    for i in range(6):
        x = x_lo + (x_hi - x_lo) * i / 5
        parts.append(
            f'<text x="{sx(x + t0):.1f}" y="{_H - 10}" class="ax" '
            f'text-anchor="middle">{x:.0f}s</text>'
        )
    parts.append(
        f'<text x="8" y="{_PAD_T + plot_h / 2:.0f}" class="ax" '
        f'transform="rotate(-90 8 {_PAD_T + plot_h / 2:.0f})">{_esc(unit)}</text>'
    )
    for n, (label, (colour, pts)) in enumerate(series.items()):
        if not pts:
            continue
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(pts))
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
        )
        ly = _PAD_T + 14 + n * 16
        parts.append(
            f'<rect x="{_W - _PAD_R + 10}" y="{ly - 9}" width="10" height="10" '
            f'fill="{colour}"/><text x="{_W - _PAD_R + 24}" y="{ly}" '
            f'class="ax">{_esc(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


# --------------------------------------------------------------------------- sections
def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _esc(value)


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
        extra = f'<div class="sub">abort: {_esc(abort)}</div>'
    return (
        f'<div class="banner" style="background:{colour}"><span class="verdict">'
        f"{_esc(verdict.upper())}</span> {_esc(reason)}{extra}</div>"
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
        notes = "; ".join(_esc(t) for t in missed) or "none"
        if unjudged:
            notes += f' <span class="dim">/ {"; ".join(_esc(t) for t in unjudged)}</span>'
        reason = w.get("abort_reason") or w.get("void_reason")
        if reason:
            notes += f'<br><span class="dim">{_esc(reason)}</span>'
        outcome = str(w.get("outcome"))
        dur = (_number(str(w.get("end_unix"))) or 0) - (_number(str(w.get("start_unix"))) or 0)
        rows.append(
            f"<tr><td>{_fmt(w.get('index'))}</td><td>{_fmt(w.get('level'), 2)}</td>"
            f'<td style="background:{OUTCOME_COLOURS.get(outcome, "#fff")}">{_esc(outcome)}</td>'
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
        cells = "".join(f"<tr><td>{_esc(k)}</td><td>{v:+.2f}</td></tr>" for k, v in drift.items())
        parts.append(
            "<h3>Drift (ms per window, first level)</h3>"
            f"<table><tr><th>metric</th><th>slope</th></tr>{cells}</table>"
        )
    baseline = gate.get("baseline")
    if baseline:
        cells = "".join(
            f'<tr class="{"bad" if m["regression"] else ""}"><td>{_esc(m["metric"])}</td>'
            f"<td>{_fmt(m['baseline'], 3)}</td><td>{_fmt(m['current'], 3)}</td>"
            f"<td>{m['change']:+.1%}</td><td>{'regression' if m['regression'] else 'ok'}</td></tr>"
            for m in baseline.get("metrics", [])
        )
        parts.append(
            f"<h3>Against the baseline {_esc(baseline.get('location') or '')} "
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
            f"<tr><td>{_esc(metric)}</td><td>{_fmt(m.get('request_count'))}</td>"
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
        f"script {_esc(campaign.get('script', '?'))}",
        f"population {_esc(_population_kind(params))}",
        f"tag {_esc(params.get('tag', '?'))}",
    ]
    if started:
        meta.append(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(started))))
    if status:
        meta.append(f"run {_esc(status.get('status'))}, phase {_esc(status.get('phase'))}")

    charts = []
    for kind, row in TITLE_ROWS:
        series = {
            key: (colour, latency.get(row, {}).get(key, [])) for _, key, colour in LATENCY_COLUMNS
        }
        label = f"{kind}/{row}" if kind else "all requests (Aggregated)"
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
        f"<title>agentsession report: {_esc(name)}</title><style>{_CSS}</style></head><body>"
        f'<h1>agentsession report: {_esc(name)}</h1><p class="meta">{" · ".join(meta)}</p>'
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
    target = run_dir / "report.html"
    tmp = run_dir / ".report.html.tmp"
    tmp.write_text(render_report(run_dir), encoding="utf-8")
    tmp.replace(target)
    return target


__all__ = ["gauge_series", "latency_series", "line_chart", "render_report", "write_report"]
