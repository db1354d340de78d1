"""The report's failure table: every code the run's rows booked a failure under, with its class
(substrate/errors.py FAILURE_CODES: capacity, throttled, not_suspended, ...), what a session
does on it (docs/SPEC.md §3.4) and how many there were over the run. Beside the chart of
failures per second, so a platform whose suspends did not happen (NOT_SUSPENDED) or whose
snapshot store throttled (STORE_THROTTLED) is named, not hidden among generic failures."""

from __future__ import annotations

from agentsession_core.measure.health import HEALTH_KIND
from agentsession_core.report.data import AGGREGATED_ROW, RunData
from agentsession_core.report.svg_chart import esc
from agentsession_core.substrate.errors import FAILURE_CODES, failure_kind

_ACTION_OF = {entry.code: entry.action.value.replace("_", " ") for entry in FAILURE_CODES}


def failure_counts(data: RunData) -> dict[str, tuple[float, list[str]]]:
    """Booked code -> (failures over the run, the rows that booked it)."""
    out: dict[str, tuple[float, list[str]]] = {}
    for key, series in sorted(data.rows.items()):
        if key == AGGREGATED_ROW or key[0] == HEALTH_KIND:
            continue
        for code, points in series.errors.items():
            total, rows = out.get(code, (0.0, []))
            out[code] = (total + sum(v for _, v in points), [*rows, f"{key[0]}/{key[1]}"])
    return out


def failure_table(data: RunData) -> str:
    counts = failure_counts(data)
    if not counts:
        return ""
    body = []
    for code, (total, rows) in sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0])):
        last = code.rsplit(": ", 1)[-1]
        kind = failure_kind(code)
        shown = f"<b>{esc(kind)}</b>" if kind in ("throttled", "not_suspended") else esc(kind)
        body.append(
            f"<tr><td><code>{esc(code)}</code></td><td>{shown}</td>"
            f"<td>{esc(_ACTION_OF.get(last, 'count'))}</td><td>{total:.0f}</td>"
            f"<td class=dim>{esc(', '.join(rows))}</td></tr>"
        )
    return (
        "<h3>Failures by code</h3><table><tr><th>code</th><th>class</th><th>action</th>"
        f"<th>failures</th><th>rows</th></tr>{''.join(body)}</table>"
    )
