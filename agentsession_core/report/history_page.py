"""history.html: a campaign's nights on one self-contained page (inline SVG and CSS, no
script, no request to anywhere), rendered from history.json's document alone (docs/SPEC.md
§6.4). The report never judges: the change points arrive as data.

Per campaign name, per headline metric: the value per night with its interval as whiskers
(where the run's gate.json carries one), each night's dot in its verdict's colour, the
judged nights joined by a line, each night whose own gate judged the figure regressed
ringed (and each run of such nights labelled "regressed"), and each change point as a
vertical line labelled with its step; "no data" where no night has the metric. Then the
change points and the nights as tables (with the figures each night's gate judged
regressed), each night linking to its report.html (a relative link for a local run; an s3 run
is named as text, since the page must not point outside itself). An accepted night
(docs/SPEC.md §6.3) is a dotted green line on each chart labelled "accepted", its reason in
the nights table, and the steps it accepted in a table of their own; a page without an
acceptance is drawn exactly as before.

A chart draws at most MAX_DRAWN marks: a campaign of more nights is drawn in bins of
consecutive nights (a dot at the median of the bin's values, its whisker their range, in
the colour of its worst verdict, ringed when a night in it was judged regressed), so a
history of 10,000 nights is 14 charts of 300 dots, not of 10,000; every night stays in the
nights table and in history.json.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import Any

from agentsession_core.output.upload import is_s3
from agentsession_core.report.chart_scale import fmt_value, nice_ticks, text_width
from agentsession_core.report.svg_chart import esc
from agentsession_core.report.tables import BANNER_COLOURS

HISTORY_HTML = "history.html"
HISTORY_JSON = "history.json"
VERDICT_COLOURS = {**BANNER_COLOURS, "unreadable": "#6a1b9a"}
CHANGE_COLOUR = "#e65100"
ACCEPTED_COLOUR = "#2e7d32"
REGRESSED_COLOUR = "#ad1457"
_W, _H = 680, 250
_LEFT, _RIGHT, _TOP, _BOTTOM = 58, 14, 40, 34
# The most nights a chart draws one by one (about 2 px each); more are drawn in bins.
MAX_DRAWN = 300

_CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;padding:16px 28px 40px;
color:#1f2328;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:30px 0 8px;padding-top:10px;
border-top:2px solid #e3e6ea}h3{font-size:15px;margin:16px 0 6px}
.meta{color:#57606a;font-size:13px;margin:4px 0}
table{border-collapse:collapse;margin:6px 0 10px}td,th{border:1px solid #d0d7de;padding:4px 9px;
text-align:left;font-size:13px;vertical-align:top}th{background:#f3f5f7}
td.v{font-weight:600;color:#fff;text-align:center}td.mono{font-family:ui-monospace,monospace;
font-size:12px;word-break:break-all}
.grid2{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:8px 18px}
@media (max-width:1100px){.grid2{grid-template-columns:minmax(0,1fr)}}
figure.chart{margin:4px 0 10px}figure.chart svg{width:100%;height:auto;display:block}
.nodata{color:#6e7781;font-style:italic;border:1px dashed #c4cad0;border-radius:6px;
display:flex;align-items:center;justify-content:center;margin:4px 0;height:180px}
.ct{font-size:14px;font-weight:600}svg .ct{fill:#1f2328}svg .ax{font-size:11px;fill:#57606a}
svg .grid{stroke:#e6e8eb}svg .cp{font-size:11.5px;font-weight:600;fill:#e65100}
svg .lg{font-size:12px;fill:#1f2328}svg .rg{font-size:11px;font-weight:600;fill:#ad1457}
td.rg{color:#ad1457;font-weight:600}
.key span{display:inline-block;margin-right:14px;font-size:13px}
.key i{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:5px}
.key i.ring{background:none;border:2px solid #ad1457;width:12px;height:12px;border-radius:6px}
"""


def _colour(verdict: str) -> str:
    return VERDICT_COLOURS.get(verdict, VERDICT_COLOURS["void"])


def _night_label(run: dict[str, Any]) -> str:
    return str(run.get("tag") or run.get("run_date") or "?")


def _step_label(cp: dict[str, Any]) -> str:
    relative = cp.get("relative")
    return f"{relative:+.0%}" if isinstance(relative, int | float) else f"{cp['absolute']:+g}"


def bin_size(nights: int) -> int:
    """How many consecutive nights a chart draws as one mark (1: each night its own)."""
    return max(1, math.ceil(nights / MAX_DRAWN))


def _worst(verdicts: set[str]) -> str:
    return next((v for v in ("fail", "pass") if v in verdicts), "void")


def _binned(
    runs: list[dict[str, Any]], series: dict[str, Any], size: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The nights and the series drawn in bins of `size` consecutive nights: one pseudo night
    per bin, one point per bin holding the metric (the median of its values, whiskers their
    range, the worst verdict, regressed when any night was), each change point at its bin."""
    night_of = {run["location"]: i for i, run in enumerate(runs)}
    bins = [
        {
            "location": f"#bin-{b}",
            "tag": _night_label(runs[b * size]),
            "last": _night_label(runs[min(len(runs), (b + 1) * size) - 1]),
        }
        for b in range(math.ceil(len(runs) / size))
    ]
    grouped: dict[int, list[dict[str, Any]]] = {}
    for p in series.get("points") or []:
        grouped.setdefault(night_of[p["location"]] // size, []).append(p)
    points = []
    for b, members in grouped.items():
        values = [p["value"] for p in members]
        points.append(
            {
                "location": bins[b]["location"],
                "tag": f"{bins[b]['tag']}–{bins[b]['last']} ({len(members)} nights)",
                "verdict": _worst({p["verdict"] for p in members}),
                "regressed": any(p.get("regressed") for p in members),
                "value": median(values),
                "low": min(values),
                "high": max(values),
            }
        )
    points.sort(key=lambda p: int(p["location"].rsplit("-", 1)[1]))
    cps = [
        dict(cp, location=bins[night_of[cp["location"]] // size]["location"])
        for cp in series.get("change_points") or []
        if cp.get("location") in night_of
    ]
    return bins, dict(series, points=points, change_points=cps)


def _chart(title: str, unit: str, runs: list[dict[str, Any]], series: dict[str, Any]) -> str:
    size = bin_size(len(runs))
    accepted = [(i // size, run) for i, run in enumerate(runs) if run.get("accepted")]
    if size > 1:
        runs, series = _binned(runs, series, size)
    points = series.get("points") or []
    if not points:
        return (
            f'<figure class="chart"><div class="ct">{esc(title)}</div>'
            f'<div class="nodata">no data: no night has {esc(title)}</div></figure>'
        )
    night_of = {run["location"]: i for i, run in enumerate(runs)}
    tops = [p["high"] if p.get("high") is not None else p["value"] for p in points]
    y_hi, y_step = nice_ticks(max(tops) * 1.06)
    nights = max(len(runs), 2)
    pw, ph = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(night: float) -> float:
        return _LEFT + (night + 0.5) / nights * pw

    def y(value: float) -> float:
        return _TOP + ph - min(max(value / y_hi, 0.0), 1.02) * ph

    svg = [
        f'<svg viewBox="0 0 {_W} {_H}" role="img" aria-label="{esc(title)}">',
        f'<text x="{_LEFT}" y="16" class="ct">{esc(title)}'
        f'<tspan class="ax" dx="8">{esc(unit)}</tspan></text>',
    ]
    for i in range(round(y_hi / y_step) + 1):
        v = y_step * i
        svg.append(
            f'<line x1="{_LEFT}" x2="{_LEFT + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
            f'<text x="{_LEFT - 5}" y="{y(v) + 4:.1f}" class="ax" text-anchor="end">'
            f"{fmt_value(v)}</text>"
        )
    every = max(1, round(nights / max(1, pw // 56)))
    for i, run in enumerate(runs):
        if i % every == 0:
            svg.append(
                f'<text x="{x(i):.1f}" y="{_H - 12}" class="ax" text-anchor="middle">'
                f"{esc(_night_label(run))}</text>"
            )
    judged = [p for p in points if p["verdict"] in ("pass", "fail")]
    if len(judged) > 1:
        path = " L".join(f"{x(night_of[p['location']]):.1f},{y(p['value']):.1f}" for p in judged)
        svg.append(f'<path d="M{path}" fill="none" stroke="#546e7a" stroke-width="1.4"/>')
    previous = None
    for p in points:
        night = night_of[p["location"]]
        if p.get("regressed"):
            rx, ry = x(night), y(p["value"])
            svg.append(
                f'<circle cx="{rx:.1f}" cy="{ry:.1f}" r="8" fill="none" '
                f'stroke="{REGRESSED_COLOUR}" stroke-width="2" class="regressed">'
                f"<title>{esc(_night_label(p))}: its gate judged {esc(title)} regressed"
                "</title></circle>"
            )
            if previous is None or not previous.get("regressed"):  # one label per run
                # Away from the top edge, where the change points are labelled.
                ly = ry + 21 if ry < _TOP + ph / 2 else ry - 12
                half = text_width("regressed", 11) / 2
                lx = min(max(rx, _LEFT + half), _W - _RIGHT - half)
                svg.append(
                    f'<text x="{lx:.1f}" y="{ly:.1f}" class="rg" '
                    f'text-anchor="middle">regressed</text>'
                )
        previous = p
    for p in points:
        cx = x(night_of[p["location"]])
        if p.get("low") is not None and p.get("high") is not None:
            svg.append(
                f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(p["low"]):.1f}" '
                f'y2="{y(p["high"]):.1f}" stroke="{_colour(p["verdict"])}" stroke-width="2" '
                f'opacity="0.6" class="interval"/>'
            )
        svg.append(
            f'<circle cx="{cx:.1f}" cy="{y(p["value"]):.1f}" r="4" '
            f'fill="{_colour(p["verdict"])}" class="night-{esc(p["verdict"])}">'
            f"<title>{esc(_night_label(p))}: {fmt_value(p['value'])} {esc(unit)} "
            f"({esc(p['verdict'])})</title></circle>"
        )
    for cp in series.get("change_points") or []:
        # Between the last night before the change and the first after it.
        cx = x(night_of.get(cp["location"], 0) - 0.5)
        label = f"change {_step_label(cp)}"
        anchor = "end" if cx + text_width(label, 11.5) > _W - _RIGHT else "start"
        dx = -4 if anchor == "end" else 4
        svg.append(
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{_TOP - 6}" y2="{_TOP + ph}" '
            f'stroke="{CHANGE_COLOUR}" stroke-width="2" stroke-dasharray="6 3" '
            f'class="change-point"/><text x="{cx + dx:.1f}" y="{_TOP - 8}" class="cp" '
            f'text-anchor="{anchor}">{esc(label)}</text>'
        )
    for night, run in accepted:
        ax = x(night)
        why = f"{_night_label(run)} accepted by {run['accepted'].get('by', '')}: "
        svg.append(
            f'<line x1="{ax:.1f}" x2="{ax:.1f}" y1="{_TOP}" y2="{_TOP + ph}" '
            f'stroke="{ACCEPTED_COLOUR}" stroke-width="2" stroke-dasharray="2 3" '
            f'class="accepted"><title>{esc(why + str(run["accepted"].get("reason", "")))}'
            f'</title></line><text x="{ax:.1f}" y="{_TOP + ph + 12}" '
            f'style="font-size:11px;font-weight:600;fill:{ACCEPTED_COLOUR}" '
            f'text-anchor="middle">accepted</text>'
        )
    svg.append("</svg>")
    return f'<figure class="chart">{"".join(svg)}</figure>'


def _link(location: str, out_dir: Path | None) -> str:
    if is_s3(location):
        return f"{esc(location)}/report.html"
    target = Path(location) / "report.html"
    href = os.path.relpath(target, out_dir) if out_dir is not None else target.as_posix()
    return f'<a href="{esc(Path(href).as_posix())}">report.html</a>'


def _when(run_ts: Any) -> str:
    if not isinstance(run_ts, int | float) or run_ts != run_ts or abs(run_ts) > 1e11:
        return "?"
    return dt.datetime.fromtimestamp(run_ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _nights_table(runs: list[dict[str, Any]], out_dir: Path | None) -> str:
    rows = []
    for i, run in enumerate(runs):
        verdict = "unreadable" if run.get("error") and not run.get("figures") else run["verdict"]
        rows.append(
            f"<tr><td>{i}</td><td>{esc(_when(run.get('run_ts')))}</td>"
            f"<td>{esc(run.get('tag', ''))}</td>"
            f'<td class="v" style="background:{_colour(verdict)}">{esc(verdict.upper())}</td>'
            f"<td>{_accepted_note(run)}{esc(run.get('reason') or '')}</td>"
            f'<td class="rg">{esc(", ".join(run.get("regressions") or []))}</td>'
            f"<td>{_link(run['location'], out_dir)}</td>"
            f'<td class="mono">{esc(run["location"])}</td></tr>'
        )
    return (
        '<table class="nights"><tr><th>#</th><th>run_ts</th><th>tag</th><th>verdict</th>'
        "<th>reason</th><th>regressed (its gate)</th><th>report</th><th>location</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _accepted_note(run: dict[str, Any]) -> str:
    """What the nights table says of a night's acceptance, before its reason (nothing for a
    night without one): the reason is a user's text, escaped like every other."""
    accepted = run.get("accepted")
    if accepted:
        return (
            f'<b style="color:{ACCEPTED_COLOUR}">accepted</b> '
            f"{esc(_when(accepted.get('accepted_unix')))} by {esc(accepted.get('by', ''))}: "
            f"{esc(accepted.get('reason', ''))}<br>"
        )
    if run.get("acceptance_error"):
        return f"<b>acceptance not believed</b>: {esc(run['acceptance_error'])}<br>"
    return ""


def _accepted_table(steps: Sequence[dict[str, Any]]) -> str:
    """The change points an acceptance accepted: no longer reported as change points."""
    rows = "".join(
        f"<tr><td>{esc(cp['metric'])}</td><td>{esc(cp.get('tag', ''))}</td>"
        f"<td>{fmt_value(cp['before'])} → {fmt_value(cp['after'])}</td>"
        f"<td>{esc(_step_label(cp))}</td><td>{esc(cp.get('reason', ''))}</td>"
        f'<td class="mono">{esc(cp.get("accepted_by", ""))}</td></tr>'
        for cp in steps
    )
    return (
        '<h2>Accepted steps</h2><p class="meta">Steps into the level of an accepted night '
        "(docs/SPEC.md §6.3): not change points any more.</p>"
        '<table class="accepted-steps"><tr><th>metric</th><th>first run after</th>'
        "<th>median before → after</th><th>step</th><th>reason</th><th>accepted run</th></tr>"
        + rows
        + "</table>"
    )


def _change_table(cps: Sequence[dict[str, Any]]) -> str:
    if not cps:
        return '<p class="meta">No change point in any judged series.</p>'
    rows = []
    for cp in cps:
        probability = cp.get("probability")
        statistic = cp.get("statistic")
        rows.append(
            f"<tr><td>{esc(cp['metric'])}</td><td>{esc(cp.get('tag', ''))}</td>"
            f"<td>{fmt_value(cp['before'])} → {fmt_value(cp['after'])}</td>"
            f"<td>{esc(_step_label(cp))}</td><td>{cp['absolute']:+.4g}</td>"
            f"<td>{'' if probability is None else f'{probability:.3g}'}</td>"
            f"<td>{esc(cp.get('test') or '')}</td>"
            f"<td>{'' if statistic is None else f'{statistic:.3g}'}</td>"
            f'<td class="mono">{esc(cp["location"])}</td></tr>'
        )
    return (
        '<table class="changes"><tr><th>metric</th><th>first run after</th>'
        "<th>median before → after</th><th>step</th><th>absolute</th><th>p</th><th>test</th>"
        "<th>q̂</th>"
        "<th>location</th></tr>" + "".join(rows) + "</table>"
    )


def _key() -> str:
    items = "".join(
        f'<span><i style="background:{c}"></i>{esc(v)}</span>'
        for v, c in VERDICT_COLOURS.items()
        if v != "unreadable"
    )
    return (
        f'<p class="key">{items}<span><i style="background:{CHANGE_COLOUR};border-radius:0;'
        'width:3px"></i>change point</span><span><i class="ring"></i>regressed: that night\'s '
        "gate judged the figure regressed</span><span>whiskers: the figure's interval, where the "
        "run has one</span></p>"
    )


def _thresholds(rule: dict[str, Any]) -> str:
    text = f"p ≤ {esc(rule.get('max_pvalue', ''))}"
    ttest = rule.get("ttest_max_pvalue")
    if ttest is not None:  # a document written before the t-test joined has none
        text = f"permutation test {text}, t-test p ≤ {esc(ttest)}"
    if rule.get("min_side"):
        text += f", at least {esc(rule['min_side'])} nights either side"
    return text


def render_history(doc: dict[str, Any], *, out_dir: Path | None = None) -> str:
    """The page for a history.json document; links are made relative to `out_dir`."""
    runs = doc.get("runs") or []
    rule = doc.get("rule") or {}
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>history: {esc(doc.get('name') or doc.get('prefix', ''))}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>History of {esc(doc.get('name') or 'every campaign')}</h1>",
        f'<p class="meta">{len(runs)} run(s) under {esc(doc.get("prefix", ""))}; change points: '
        f"{esc(rule.get('library', ''))} {esc(rule.get('version') or '')}, "
        f"{esc(rule.get('method', ''))}, {_thresholds(rule)}, on "
        f"{esc(rule.get('scale', ''))}; void and unreadable nights are drawn but not judged.</p>",
        _key(),
        "<h2>Change points</h2>",
        _change_table(doc.get("change_points") or []),
    ]
    if doc.get("accepted_steps"):
        parts.append(_accepted_table(doc["accepted_steps"]))
    for campaign in doc.get("campaigns") or []:
        mine = [r for r in runs if r.get("name") == campaign["name"]]
        parts.append(f"<h2>{esc(campaign['name'])}: per night</h2>")
        size = bin_size(len(mine))
        if size > 1:
            parts.append(
                f'<p class="meta">{len(mine)} nights, drawn in bins of {size} consecutive '
                "nights: a dot is the median of a bin's values and its whisker their range "
                "(not an interval), in the colour of the bin's worst verdict (fail, then "
                "pass, then void), ringed when a night in it was judged regressed; a change "
                "point is drawn at its bin. Every night is in the table below and in "
                "history.json.</p>"
            )
        parts.append('<div class="grid2">')
        parts += [
            _chart(s["metric"], s.get("unit") or "", mine, s) for s in campaign.get("series", [])
        ]
        parts.append("</div>")
    if not runs:
        parts.append('<p class="nodata">no data: no run under this prefix</p>')
    parts += ["<h2>Nights</h2>", _nights_table(runs, out_dir), "</body></html>"]
    return "".join(parts)


__all__ = ["HISTORY_HTML", "HISTORY_JSON", "render_history"]
