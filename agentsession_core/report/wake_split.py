"""Where the wakes' time went (docs/SPEC.md §5.9, server.preset: agent-substrate): one table
per judged window and the steady window, from server_summary.json's `wake_split`, with the
client's TimeToWake on top and each platform phase below it, indented inside the phase that
holds it. Each bar is drawn on its own from zero: the phases overlap, so no bar continues
another and nothing is added up — except in the `unattributed` rows at the foot
(measure/wake_unattributed.py), the client's wake less its innermost phases, which are
disjoint. A percentile the platform's buckets could not resolve
(saturated) shows the mean, marked. Then the reconciliation of the server's resume records
with the client's successful wakes, per window, marking lost telemetry.
"""

from __future__ import annotations

from typing import Any

from agentsession_core.measure.agent_substrate import PHASES
from agentsession_core.report.data import number
from agentsession_core.report.server_data import Span, spans_of, steady_of
from agentsession_core.report.svg_chart import esc
from agentsession_core.report.tables import fmt, table

CLIENT_COLOUR, PHASE_COLOUR, P99_COLOUR, LOST_COLOUR = "#1565c0", "#2e7d32", "#ef6c00", "#c62828"
UNATTRIBUTED_COLOUR = "#9e9e9e"


def _split(span: Span) -> dict[str, Any] | None:
    found = span.get("wake_split")
    return found if isinstance(found, dict) else None


def _ms(seconds: Any) -> str:
    v = number(seconds)
    if v is None:
        return "–"
    return f"{v * 1000:,.0f} ms" if v >= 1 else f"{v * 1000:.3g} ms"


_WITHIN = {p.name: p.within for p in PHASES}


def _depth(row: dict[str, Any]) -> int:
    """How many phases hold this one (the preset's nesting, whichever phases answered)."""
    depth, within = 0, row.get("within")
    while isinstance(within, str) and depth < len(_WITHIN):
        depth, within = depth + 1, _WITHIN.get(within)
    return depth


def _bar(mean: float | None, p99: float | None, top: float, colour: str) -> str:
    """The mean as a bar from zero and the p99 as a tick, on the table's common scale."""
    if not top or mean is None:
        return ""
    width = max(0.5, min(100.0, 100 * mean / top))
    out = (
        f'<div style="position:relative;height:12px;width:240px;background:#f3f4f6">'
        f'<div style="height:12px;width:{width:.1f}%;background:{colour}"></div>'
    )
    if p99 is not None:
        left = min(100.0, 100 * p99 / top)
        out += (
            f'<div title="p99" style="position:absolute;top:0;left:{left:.1f}%;width:2px;'
            f'height:12px;background:{P99_COLOUR}"></div>'
        )
    return out + "</div>"


def _percentile(row: dict[str, Any], name: str) -> str:
    saturated = row.get("saturated")
    if isinstance(saturated, list) and name in saturated:
        bound = number(row.get("last_bound"))
        above = f" past {_ms(bound)}" if bound is not None else ""
        note = f"(mean; saturated{above})"
        return f'{_ms(row.get("mean"))} <span class="dim">{note}</span>'
    return _ms(row.get(name))


def split_table(split: dict[str, Any]) -> str:
    phases = [p for p in split.get("phases") or [] if isinstance(p, dict)]
    client = split.get("client") if isinstance(split.get("client"), dict) else None
    tops = [number(r.get("p99")) for r in [*phases, client or {}]]
    top = max([t for t in tops if t is not None] or [0.0])
    body = []
    if client is not None:
        body.append(
            f"<tr><td><b>client TimeToWake</b> <span class=dim>(from the intended time)</span>"
            f"</td><td>{fmt(number(client.get('wakes')), 0)}</td><td>{_ms(client.get('p50'))}"
            f"</td><td>{_ms(client.get('p99'))}</td><td>{_ms(client.get('mean'))}</td><td>"
            f"{_bar(number(client.get('mean')), number(client.get('p99')), top, CLIENT_COLOUR)}"
            "</td></tr>"
        )
    for row in phases:
        indent = "&nbsp;" * 4 * _depth(row)
        within = (
            f' <span class="dim">within {esc(row["within"])}</span>' if row.get("within") else ""
        )
        mean, p99 = number(row.get("mean")), number(row.get("p99"))
        body.append(
            f"<tr><td>{indent}<code>{esc(row.get('row'))}</code>{within}</td>"
            f"<td>{fmt(number(row.get('count')), 0)}</td><td>{_percentile(row, 'p50')}</td>"
            f"<td>{_percentile(row, 'p99')}</td><td>{_ms(mean)}</td>"
            f"<td>{_bar(mean, p99, top, PHASE_COLOUR)}</td></tr>"
        )
    body += _unattributed_rows(split, top)
    head = ["phase", "count", "p50", "p99", "mean", "mean (bar) and p99 (tick), each from 0"]
    return table(head, body) + _counts_line(split)


def _unattributed_rows(split: dict[str, Any], top: float) -> list[str]:
    """The part of the client's wake the innermost phases leave unexplained: the means'
    difference (means add) and the p50s' (upstream's reading; no percentile of anything)."""
    found = split.get("unattributed")
    if not isinstance(found, dict):
        return []
    named = " + ".join(str(n) for n in found.get("named_phases") or [])
    out = []
    for row in found.get("rows") or []:
        if not isinstance(row, dict):
            continue
        value = number(row.get("value"))
        shown = _ms(value)
        if row.get("negative"):
            over = _ms(-(number(row.get("raw")) or 0.0))
            shown += f' <span class="dim">(floored: the phases exceed the wake by {over})</span>'
        if row.get("saturated"):
            shown += ' <span class="dim">(a phase saturated)</span>'
        statistic = row.get("statistic")
        what = (
            "the client's mean wake less the means of"
            if statistic == "mean"
            else "a difference of p50s, not a percentile: the client's p50 less the p50s of"
        )
        cells = ["–", shown, "–", "–"] if statistic == "p50" else ["–", "–", "–", shown]
        bar = _bar(value, None, top, UNATTRIBUTED_COLOUR) if statistic == "mean" else ""
        out.append(
            f"<tr><td><code>{esc(row.get('row'))}</code> <span class=dim>{what} "
            f"{esc(named)}</span></td>{''.join(f'<td>{c}</td>' for c in cells)}<td>{bar}</td></tr>"
        )
    if said := found.get("said"):
        out.append(f'<tr><td colspan="6" class="dim">{esc(said)}</td></tr>')
    return out


def _counts_line(split: dict[str, Any]) -> str:
    found = split.get("counts")
    counts: dict[str, Any] = found if isinstance(found, dict) else {}
    parts = []
    for name, label in (
        ("no_free_worker", "scheduling found no room (no_capacity / no_free_worker)"),
        ("resume_failures", "failed resumes (left out above)"),
        ("crashes", "actor crashes"),
    ):
        entry = counts.get(name)
        total = number(entry.get("total")) if isinstance(entry, dict) else None
        if total is not None:
            parts.append(f"{label}: <b>{total:.0f}</b>")
    rate = number(split.get("checkpoint_bytes_per_second"))
    if rate is not None:
        parts.append(f"checkpoint throughput: <b>{rate / 1e6:.3g} MB/s</b>")
    return f'<p class="meta">{" · ".join(parts)}</p>' if parts else ""


def reconciliation_table(spans: list[Span]) -> str:
    body = []
    for span in spans:
        said = (_split(span) or {}).get("reconciliation")
        if not isinstance(said, dict):
            continue
        name = "steady (the hold)" if span.get("index") is None else f"w{fmt(span.get('index'))}"
        records, wakes = number(said.get("server_resumes")), number(said.get("client_wakes"))
        missing = number(said.get("missing")) or 0
        top = max(records or 0, wakes or 0) or 1
        bars = "".join(
            f'<div style="height:8px;margin:2px 0;width:{200 * (v or 0) / top:.0f}px;'
            f'background:{c}" title="{t}"></div>'
            for v, c, t in (
                (wakes, CLIENT_COLOUR, "client wakes"),
                (records, PHASE_COLOUR, "server resumes"),
            )
        )
        style = f' style="background:{LOST_COLOUR}22"' if missing > 0 else ""
        body.append(
            f"<tr{style}><td>{name}</td><td>{fmt(records, 0)}</td><td>{fmt(wakes, 0)}</td>"
            f"<td>{bars}</td><td>{esc(said.get('said', ''))}</td></tr>"
        )
    if not body:
        return ""
    head = ["span", "server resume records", "client successful wakes", "", "reading"]
    return "<h4>Server records against the client's wakes</h4>" + table(head, body)


def wake_split(doc: dict[str, Any] | None) -> str:
    """The section's part, or "" when the run had no wake split."""
    spans = [s for s in spans_of(doc) if _split(s) is not None]
    if not spans:
        return ""
    steady = steady_of(doc)
    out = [
        "<h3>Where the wakes' time went</h3>",
        '<p class="meta">the platform\'s own wake phases (server.preset agent-substrate), '
        "successful observations only; phases overlap (each is inside the one it names), so "
        "they are never added, but for the unattributed rows: the client's wake less the "
        "innermost phases, which are disjoint; a percentile past the last bucket shows the "
        "mean</p>",
    ]
    for span in spans:
        split = _split(span)
        assert split is not None
        title = (
            "steady window (the hold)"
            if span is steady
            else f"window w{fmt(span.get('index'))} @{fmt(number(span.get('level')), 2)}×"
        )
        out.append(f"<h4>{title}</h4>{split_table(split)}")
    out.append(reconciliation_table(spans))
    return "".join(out)


__all__ = ["reconciliation_table", "split_table", "wake_split"]
