"""Server-side figures (docs/SPEC.md §5.9): a substrate's own metrics, sampled by time, and the
windows cut from them for judging and for server_summary.json (docs/SPEC.md §7).

The store holds one time series per **series name**: a Prometheus family (or a PromQL query)
and one of its label sets. Names are short and threshold-friendly (docs/SPEC.md §6):

- the family name without the local substrate's `agentsession_substrate_` prefix and, for
  counters, without `_total` (as prometheus_client's parser gives it): `snapshot_bytes_written`;
- a labelled family has one series per label set, its label values appended in label-name
  order and made snake_case (`actors_suspended`, `wakes_router`, `worker_rss_bytes_w0`,
  `requests_control_ok_json`), plus the sum over its label sets under the bare name
  (`actors`, `wakes`, `requests`), so a rule can judge the whole family or one member.

A window's figures per series: a counter has `start`, `end`, `increase` and `rate` (per
second), taken at the window's edges by linear interpolation between the samples around
them, resets counted as in PromQL's increase(), so windows that tile the hold add up to the
hold; a gauge has `start`, `end`, `min`, `max` and `mean` over the samples inside the window.
Each also carries `samples` (inside the window). The store lives on the event loop thread;
writing the summary afterwards reads it from another thread once sampling has stopped.
"""

from __future__ import annotations

import math
import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from prometheus_client.metrics_core import Metric

from local_substrate.metric_names import PREFIX as LOCAL_PREFIX

COUNTER, GAUGE = "counter", "gauge"
# A query that names $window is asked once per window, at its end, over the whole window
# (measure/server_sources.py): its series hold one answer per window, kind "answer".
WINDOW = "$window"
ANSWER = "answer"
# Its time goes out in milliseconds, so an answer may be stamped that much past the end: of
# its own window, and so also past the start of the window that follows it.
_SENT_ROUNDING = 0.0015
COUNTER_FIGURES = ("start", "end", "increase", "rate", "samples")
GAUGE_FIGURES = ("start", "end", "min", "max", "mean", "samples")
# A wake phase of the agent-substrate preset (measure/wake_split.py) has these besides mean.
PHASE_FIGURES = ("count", "mean", "p50", "p90", "p99", "samples")
FIGURES = tuple(dict.fromkeys(COUNTER_FIGURES + GAUGE_FIGURES + PHASE_FIGURES))
SCHEMA = "agentsession.server_summary/1"
# Families kept from a scrape unless `server.series` says otherwise: the local substrate's.
DEFAULT_SERIES = (f"{LOCAL_PREFIX}*",)
_UNSAFE = re.compile(r"[^a-z0-9]+")


def short_name(family: str) -> str:
    return family.removeprefix(LOCAL_PREFIX)


def series_name(base: str, labels: Mapping[str, str]) -> str:
    """`base` plus the label values in label-name order, snake_case (docs/SPEC.md §5.9)."""
    parts = [_UNSAFE.sub("_", labels[k].lower()).strip("_") for k in sorted(labels)]
    return "_".join([base, *(p for p in parts if p)])


def split_figure(name: str) -> tuple[str, str] | None:
    """`snapshot_bytes_written_rate` -> (`snapshot_bytes_written`, `rate`); None when the
    name does not end in a figure."""
    series, _, figure = name.rpartition("_")
    return (series, figure) if series and figure in FIGURES else None


@dataclass
class Series:
    metric: str  # the Prometheus family, or the query name
    labels: dict[str, str]
    kind: str  # counter / gauge
    help: str = ""
    aggregate: bool = False  # the sum over the family's label sets
    t: array = field(default_factory=lambda: array("d"))
    v: array = field(default_factory=lambda: array("d"))

    def add(self, t: float, value: float) -> None:
        # Time order is the store's invariant (bisect); a late or repeated point is dropped.
        if math.isfinite(value) and (not self.t or t > self.t[-1]):
            self.t.append(t)
            self.v.append(value)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metric": self.metric, "labels": self.labels, "kind": self.kind}
        if self.help:
            out["help"] = self.help
        if self.aggregate:
            out["aggregate"] = "sum"
        return out

    def figures(self, start: float, end: float, gauge_end: float) -> dict[str, float] | None:
        if self.kind == COUNTER:
            return _counter_figures(self.t, self.v, start, end)
        if self.kind == ANSWER:
            return _answer_figures(self.t, self.v, start, end)
        return _gauge_figures(self.t, self.v, start, gauge_end)

    def answer(self, start: float, end: float) -> float | None:
        """The window's answer of a $window query: its one point in (start, end]."""
        found = _answer_figures(self.t, self.v, start, end)
        return found["end"] if found is not None else None


def _counter_figures(t: array, v: array, start: float, end: float) -> dict[str, float] | None:
    n = len(t)
    if n == 0:
        return None
    lo = max(bisect_right(t, start) - 1, 0)  # the last sample at or before the start
    hi = min(bisect_left(t, end), n - 1)  # the first sample at or after the end
    first, last = max(start, t[lo]), min(end, t[hi])
    if hi <= lo or last <= first:
        return None
    adjusted = [v[lo]]  # resets: a drop means the counter restarted from zero
    for i in range(lo + 1, hi + 1):
        step = v[i] - v[i - 1]
        adjusted.append(adjusted[-1] + (step if step >= 0 else v[i]))
    times = t[lo : hi + 1]

    def at(x: float) -> float:
        i = min(max(bisect_left(times, x), 1), len(times) - 1)
        t0, t1 = times[i - 1], times[i]
        share = (x - t0) / (t1 - t0) if t1 > t0 else 1.0
        return adjusted[i - 1] + share * (adjusted[i] - adjusted[i - 1])

    at_start, at_end = at(first), at(last)
    increase = at_end - at_start
    return {
        "start": at_start,
        "end": at_end,
        "increase": increase,
        "rate": increase / (last - first),
        "samples": bisect_right(t, end) - bisect_left(t, start),
    }


def _answer_figures(t: array, v: array, start: float, end: float) -> dict[str, float] | None:
    """A $window query's answer for [start, end], as `end`; none for a span holding several
    windows' answers (the steady window: each answer covers its own window only). The last
    window's answer, stamped up to a rounding past this window's start, is not this one's:
    windows start on whole seconds and end a few ms past, so it rounded up there every time."""
    lo, hi = bisect_right(t, start + _SENT_ROUNDING), bisect_right(t, end + _SENT_ROUNDING)
    if hi - lo != 1:
        return None
    return {"end": v[lo], "samples": 1}


def _gauge_figures(t: array, v: array, start: float, end: float) -> dict[str, float] | None:
    lo, hi = bisect_left(t, start), bisect_right(t, end)
    if hi <= lo:
        return None
    values = v[lo:hi]
    return {
        "start": values[0],
        "end": values[-1],
        "min": min(values),
        "max": max(values),
        "mean": sum(values) / len(values),
        "samples": len(values),
    }


@dataclass
class ServerWindow:
    """The figures of one span: `figures[series][figure]` (docs/SPEC.md §7)."""

    start_unix: float
    end_unix: float
    samples: int
    figures: dict[str, dict[str, float]]
    index: int | None = None
    level: float | None = None
    split: dict[str, Any] | None = None  # where the wakes' time went (measure/wake_split.py)

    def figure(self, name: str) -> tuple[float, int] | None:
        """A threshold's figure (`parked_requests_max`) and the samples behind it."""
        parts = split_figure(name)
        if parts is None or parts[0] not in self.figures:
            return None
        series = self.figures[parts[0]]
        if parts[1] not in series:
            return None
        return series[parts[1]], int(series.get("samples", 0))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.index is None else {"index": self.index}
        if self.level is not None:
            out["level"] = self.level
        out.update(
            start_unix=self.start_unix,
            end_unix=self.end_unix,
            duration_s=max(0.0, self.end_unix - self.start_unix),
            samples=self.samples,
            figures=self.figures,
        )
        if self.split is not None:
            out["wake_split"] = self.split
        return out


class ServerMetricsStore:
    """Every series sampled so far, and how the sampling went."""

    def __init__(self, patterns: Iterable[str] = DEFAULT_SERIES) -> None:
        self.patterns = tuple(patterns)
        self.series: dict[str, Series] = {}
        self.times = array("d")  # when each successful sample was taken
        self.ok = 0
        self.failed = 0
        self.last_error: str | None = None

    def wanted(self, family: str) -> bool:
        return any(fnmatchcase(family, p) for p in self.patterns)

    def _series(self, name: str, template: Series) -> Series:
        found = self.series.get(name)
        if found is None:
            found = self.series[name] = template
        return found

    def _mark(self, t: float) -> None:
        self.ok += 1
        if not self.times or t > self.times[-1]:
            self.times.append(t)

    def book_scrape(self, t: float, families: Iterable[Metric]) -> None:
        """One scrape, parsed (prometheus_client.parser): counters, gauges and untyped
        families that `patterns` selects; histograms and summaries are left out."""
        self._mark(t)
        for family in families:
            kind = {"counter": COUNTER, "gauge": GAUGE, "unknown": GAUGE}.get(family.type)
            if kind is None or not self.wanted(family.name):
                continue
            own = f"{family.name}_total" if kind == COUNTER else family.name
            samples = [s for s in family.samples if s.name == own]
            self._book_family(
                t, short_name(family.name), family.name, kind, family.documentation, samples
            )

    def _book_family(
        self, t: float, base: str, metric: str, kind: str, text: str, samples: list[Any]
    ) -> None:
        if len(samples) == 1 and not samples[0].labels:
            self._series(base, Series(metric, {}, kind, text)).add(t, samples[0].value)
            return
        total = 0.0
        for sample in samples:
            labels = dict(sample.labels)
            name = series_name(base, labels)
            self._series(name, Series(metric, labels, kind, text)).add(t, sample.value)
            total += sample.value
        if samples:
            self._series(base, Series(metric, {}, kind, text, aggregate=True)).add(t, total)

    def book_query(
        self, name: str, query: str, results: list[tuple[dict[str, str], list[tuple[float, float]]]]
    ) -> None:
        """A PromQL range result (docs/SPEC.md §5.9): every series is a gauge named after the
        query (and its labels when the result has several series, plus their sum); a $window
        query's are answers, one a window."""
        kind = ANSWER if WINDOW in query else GAUGE
        if len(results) == 1:
            labels, points = results[0]
            series = self._series(name, Series(query, labels, kind, "PromQL"))
            for t, value in points:
                series.add(t, value)
        else:
            totals: dict[float, float] = {}
            for labels, points in results:
                series = self._series(
                    series_name(name, labels), Series(query, labels, kind, "PromQL")
                )
                for t, value in points:
                    series.add(t, value)
                    totals[t] = totals.get(t, 0.0) + value
            total = self._series(name, Series(query, {}, kind, "PromQL", aggregate=True))
            for t in sorted(totals):
                total.add(t, totals[t])
        for t in sorted({t for _, points in results for t, _ in points}):
            self._mark(t)

    def failure(self, error: str) -> None:
        self.failed += 1
        self.last_error = error

    def cut(
        self,
        start: float,
        end: float,
        *,
        gauge_end: float | None = None,
        index: int | None = None,
        level: float | None = None,
    ) -> ServerWindow:
        """The figures of [start, end] (unix seconds); gauges may look up to `gauge_end`, the
        sample taken just after the end to close the window."""
        figures: dict[str, dict[str, float]] = {}
        reach = max(end, gauge_end or end)
        for name in sorted(self.series):
            found = self.series[name].figures(start, end, reach)
            if found is not None:
                figures[name] = found
        samples = bisect_right(self.times, reach) - bisect_left(self.times, start)
        return ServerWindow(start, end, samples, figures, index=index, level=level)


def summary_document(
    store: ServerMetricsStore,
    source: dict[str, Any],
    windows: list[ServerWindow],
    steady: ServerWindow | None,
) -> dict[str, Any]:
    """server_summary.json (docs/SPEC.md §7)."""
    return {
        "schema": SCHEMA,
        "source": source,
        "sampling": {"ok": store.ok, "failed": store.failed, "last_error": store.last_error},
        "series": {name: s.describe() for name, s in sorted(store.series.items())},
        "windows": [w.to_dict() for w in windows],
        "steady": steady.to_dict() if steady is not None else None,
    }


__all__ = [
    "ANSWER",
    "COUNTER",
    "DEFAULT_SERIES",
    "FIGURES",
    "GAUGE",
    "SCHEMA",
    "WINDOW",
    "Series",
    "ServerMetricsStore",
    "ServerWindow",
    "series_name",
    "short_name",
    "split_figure",
    "summary_document",
]
