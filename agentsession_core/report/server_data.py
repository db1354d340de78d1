"""server_summary.json read for the report (docs/SPEC.md §5.9, §7): its spans (the judged
windows and the steady window), one figure of one span, which figures are worth a row, and
how a figure is written for a person (bytes in binary units, rates per second).

Every lookup tolerates a torn or older document: a missing key is a missing figure ("–"),
never an error, as everywhere else in the report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentsession_core.measure.server_metrics import series_name, split_figure
from agentsession_core.report.context import ThresholdRule
from agentsession_core.report.data import RunData, number
from agentsession_core.substrate.protocol import ACTOR_STATUSES

Span = dict[str, Any]  # one window of server_summary.json, or its steady window
# The local substrate's actors by state (docs/SPEC.md §5.9), in the order of §2.1.
ACTOR_SERIES = tuple(series_name("actors", {"state": s}) for s in ACTOR_STATUSES)
BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
# A rule's text names its figure; the report reads campaign.json's texts without the judge's
# parser (output sits below judge), so only the name is taken, the judge says the rest.
_SERVER_RULE = re.compile(r"^\s*server\.([A-Za-z0-9_]+)")


@dataclass(frozen=True)
class KeyFigure:
    series: str
    figure: str
    label: str

    @property
    def name(self) -> str:
        """As a `server.` rule names it (docs/SPEC.md §6)."""
        return f"{self.series}_{self.figure}"


# After the actors by state: what says whether the substrate kept up (memory, snapshot
# traffic, waiting) and how much it did (wakes).
DEFAULT_FIGURES = (
    KeyFigure("workers_rss_bytes", "max", "worker RSS, all workers (max)"),
    KeyFigure("snapshot_bytes_written", "rate", "snapshot bytes written (rate)"),
    KeyFigure("snapshot_bytes_read", "rate", "snapshot bytes read (rate)"),
    KeyFigure("wake_queue", "max", "resumes waiting for a worker (max)"),
    KeyFigure("parked_requests", "max", "router requests parked (max)"),
    KeyFigure("wakes", "rate", "wakes (rate)"),
)


# --------------------------------------------------------------------------- reading
def windows_of(doc: dict[str, Any] | None) -> list[Span]:
    found = (doc or {}).get("windows")
    return [w for w in found if isinstance(w, dict)] if isinstance(found, list) else []


def steady_of(doc: dict[str, Any] | None) -> Span | None:
    found = (doc or {}).get("steady")
    return found if isinstance(found, dict) else None


def spans_of(doc: dict[str, Any] | None) -> list[Span]:
    """The judged windows, then the steady window (when there is one)."""
    steady = steady_of(doc)
    return windows_of(doc) + ([steady] if steady is not None else [])


def value(span: Span | None, series: str, figure: str) -> float | None:
    figures = (span or {}).get("figures")
    found = figures.get(series) if isinstance(figures, dict) else None
    return number(found.get(figure)) if isinstance(found, dict) else None


def section_of(doc: dict[str, Any] | None, key: str) -> dict[str, Any]:
    found = (doc or {}).get(key)
    return found if isinstance(found, dict) else {}


# --------------------------------------------------------------------------- rules
def rule_figures(data: RunData, rules: Sequence[ThresholdRule] = ()) -> dict[str, list[str]]:
    """{figure name (`parked_requests_max`): the texts of the `server.` rules on it}, from the
    rules handed in and campaign.json's thresholds (a rebuilt report may have either)."""
    out: dict[str, list[str]] = {}
    named = [(r.server, r.text) for r in rules if r.server]
    for text in data.params.get("thresholds") or []:
        m = _SERVER_RULE.match(str(text))
        if m:
            named.append((m.group(1), str(text).strip()))
    for name, text in named:
        if name and split_figure(name) is not None and text not in out.setdefault(name, []):
            out[name].append(text)
    return out


# --------------------------------------------------------------------------- rows
def key_figures(
    spans: Sequence[Span], judged: Sequence[str] = (), queries: Sequence[str] = ()
) -> list[KeyFigure]:
    """The rows worth showing: actors by state (a state never seen is left out), the default
    set where the summary has it, each of a Prometheus source's `queries` (gauges, by their
    mean), and each figure a rule judges (shown even when missing: that a rule had nothing
    to judge is worth seeing)."""
    out = [
        KeyFigure(name, "mean", f"actors {name.removeprefix('actors_').upper()} (mean)")
        for name in ACTOR_SERIES
        if any(value(s, name, "mean") for s in spans)
    ]
    out += [
        f for f in DEFAULT_FIGURES if any(value(s, f.series, f.figure) is not None for s in spans)
    ]
    for q in queries:  # a $window query has one answer a window, as its `end`
        for figure, said in (("mean", "mean"), ("end", "the window's answer")):
            if any(value(s, q, figure) is not None for s in spans):
                out.append(KeyFigure(q, figure, f"query {q} ({said})"))
                break
    shown = {f.name for f in out}
    for name in judged:
        parts = split_figure(name)
        if parts is not None and name not in shown:
            out.append(KeyFigure(parts[0], parts[1], f"{parts[0]} ({parts[1]})"))
            shown.add(name)
    return out


def query_names(doc: dict[str, Any] | None) -> list[str]:
    """The names of a Prometheus source's `server.queries` (source.queries), without a
    preset's (the wake split shows those)."""
    source = section_of(doc, "source")
    preset = section_of(source, "preset").get("queries")
    own = {str(q) for q in preset} if isinstance(preset, list) else set()
    return [str(name) for name in section_of(source, "queries") if str(name) not in own]


# --------------------------------------------------------------------------- formatting
def fmt_number(v: float) -> str:
    if v == 0:
        return "0"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def byte_unit(v: float) -> tuple[float, str]:
    """(divisor, unit) that writes `v` bytes with 1 to 1023 of the unit."""
    k = 0
    while k < len(BYTE_UNITS) - 1 and abs(v) >= 1024.0 ** (k + 1):
        k += 1
    return 1024.0**k, BYTE_UNITS[k]


def fmt_bytes(v: float) -> str:
    divisor, unit = byte_unit(v)
    return f"{fmt_number(v / divisor)} {unit}"


def is_bytes(series: str) -> bool:
    return "bytes" in series  # the local substrate's byte families all say so


def fmt_figure(series: str, figure: str, v: float | None) -> str:
    if v is None:
        return "–"
    if figure == "samples":
        return f"{v:.0f}"
    text = fmt_bytes(v) if is_bytes(series) else fmt_number(v)
    return f"{text}/s" if figure == "rate" else text


def fmt_delta(series: str, figure: str, base: float | None, this: float | None) -> str:
    """The change from the baseline: relative, or in the figure's unit from a zero."""
    if base is None or this is None:
        return "–"
    if base == 0:
        change = this - base
        return ("+" if change > 0 else "") + fmt_figure(series, figure, change)
    return f"{(this - base) / base:+.0%}"


__all__ = [
    "ACTOR_SERIES",
    "DEFAULT_FIGURES",
    "KeyFigure",
    "Span",
    "byte_unit",
    "fmt_bytes",
    "fmt_delta",
    "fmt_figure",
    "fmt_number",
    "is_bytes",
    "key_figures",
    "query_names",
    "rule_figures",
    "section_of",
    "spans_of",
    "steady_of",
    "value",
    "windows_of",
]
