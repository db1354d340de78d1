"""The recorder: cheap hot-path booking, per-second intervals, exact windows, shard merge.

Hot path: a Row appends raw monotonic timestamps to an ``array('q')`` (no allocation per
request beyond the array's amortised growth, no logging). Once a second ``flush`` buckets every
sample of the seconds that have ended into one ``Interval`` per (second, row) with numpy.
Every window (a step window, the steady window, the turnover window) is then the exact sum of
the intervals of its whole seconds, so percentiles are never averaged.

Seconds are unix seconds, found from one (monotonic, wall) anchor taken at construction, so
recorders of different shards/processes line up second by second and merge by plain sums.
A sample belongs to the second of its done time (cancellations: the cancel time; events: their
own time).

The recorder is single-threaded: use it from the event loop thread only. What it hands out
(Interval, RowStats, Window) is in ``agentsession_core.measure.stats``.
"""

from __future__ import annotations

import time
from array import array
from collections import Counter
from collections.abc import Callable

import numpy as np

from agentsession_core.measure.histogram import EMPTY_SPARSE, SparseHistogram
from agentsession_core.measure.stats import Interval, RowKey, RowStats, Window

NS_PER_S = 1_000_000_000
_NS_PER_MS = 1e6
GaugeKey = tuple[str, tuple[tuple[str, str], ...]]

# Fields of one request sample in Row._samples. _SERVER is the substrate's own handling time
# in µs (docs/SPEC.md §2: x-server-elapsed-us), -1 when the answer did not say.
_INTENDED, _SENT, _DONE, _NBYTES, _FAILED, _SERVER = range(6)
_FIELDS = 6
_NS_PER_US = 1_000


def _labels_key(labels: dict[str, str] | tuple) -> tuple[tuple[str, str], ...]:
    if isinstance(labels, dict):
        return tuple(sorted((str(k), str(v)) for k, v in labels.items()))
    return tuple(sorted((str(k), str(v)) for k, v in labels))


class Row:
    """One (kind, name) stats row; the engine keeps it and books into it on the hot path."""

    __slots__ = ("_cancels", "_errors", "_events", "_samples", "kind", "name")

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        self._samples = array("q")
        self._errors: list[tuple[int, str]] = []
        self._events = array("q")
        self._cancels = array("q")

    def ok(
        self, intended_ns: int, sent_ns: int, done_ns: int, nbytes: int = 0, server_us: int = -1
    ) -> None:
        """One answered request; `server_us` is the server's handling time when it said."""
        self._samples.extend((intended_ns, sent_ns, done_ns, nbytes, 0, server_us))

    def fail(self, intended_ns: int, sent_ns: int, done_ns: int, error: str) -> None:
        self._samples.extend((intended_ns, sent_ns, done_ns, 0, 1, -1))
        self._errors.append((done_ns, error))

    def event(self, at_ns: int, n: int = 1) -> None:
        self._events.extend((at_ns, n))

    def cancelled(self, intended_ns: int, at_ns: int) -> None:
        self._cancels.extend((intended_ns, at_ns))

    def __repr__(self) -> str:
        return f"Row({self.kind!r}, {self.name!r})"


class Recorder:
    """Per-second, per-row interval store fed by Rows; see the module docstring."""

    def __init__(
        self,
        *,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._clock_ns = clock_ns
        mono = clock_ns()
        self._offset_ns = round(wall_clock() * NS_PER_S) - mono
        self._rows: dict[RowKey, Row] = {}
        self.intervals: dict[int, dict[RowKey, Interval]] = {}
        self.gauges: dict[int, dict[GaugeKey, float]] = {}
        self._gauge_now: dict[GaugeKey, float] = {}
        self._cumulative: dict[RowKey, RowStats] = {}
        self.first_second = self.second_of(mono)
        # Every second before closed_until has been flushed into intervals.
        self.closed_until = self.first_second

    # -- clocks ---------------------------------------------------------------------------
    def unix_s(self, mono_ns: int) -> float:
        return (mono_ns + self._offset_ns) / NS_PER_S

    def second_of(self, mono_ns: int) -> int:
        return (mono_ns + self._offset_ns) // NS_PER_S

    def mono_ns_of_second(self, unix_second: int) -> int:
        return unix_second * NS_PER_S - self._offset_ns

    def now_ns(self) -> int:
        return self._clock_ns()

    # -- hot path handles -------------------------------------------------------------------
    def row(self, kind: str, name: str) -> Row:
        key = (kind, name)
        found = self._rows.get(key)
        if found is None:
            found = self._rows[key] = Row(kind, name)
        return found

    def gauge(self, name: str, labels: dict[str, str] | tuple, value: float) -> None:
        self._gauge_now[(name, _labels_key(labels))] = float(value)

    def current_gauges(self) -> dict[GaugeKey, float]:
        return dict(self._gauge_now)

    # -- per-second close -------------------------------------------------------------------
    def flush(self, now_ns: int | None = None) -> None:
        now_sec = self.second_of(self._clock_ns() if now_ns is None else now_ns)
        for row in self._rows.values():
            for second, interval in self._drain(row, now_sec).items():
                self._store((row.kind, row.name), second, interval)
        if now_sec > self.closed_until:
            snapshot = dict(self._gauge_now)
            for second in range(self.closed_until, now_sec):
                self.gauges[second] = snapshot
            self.closed_until = now_sec

    def _store(self, key: RowKey, second: int, interval: Interval) -> None:
        per_second = self.intervals.setdefault(second, {})
        existing = per_second.get(key)
        if existing is None:
            per_second[key] = interval
        else:  # a late sample for a second already closed
            existing.add(interval)
        cumulative = self._cumulative.get(key)
        if cumulative is None:
            cumulative = self._cumulative[key] = RowStats()
        cumulative.add_interval(interval)

    def _drain(self, row: Row, now_sec: int, *, consume: bool = True) -> dict[int, Interval]:
        """Bucket the row's buffered samples of seconds < now_sec; keep the rest buffered."""
        out: dict[int, Interval] = {}
        off = self._offset_ns

        if row._samples:
            raw = np.frombuffer(row._samples, dtype=np.int64).reshape(-1, _FIELDS)
            seconds = (raw[:, _DONE] + off) // NS_PER_S
            closed = seconds < now_sec
            if closed.any():
                error_seconds = [(done + off) // NS_PER_S for done, _ in row._errors]
                for second in np.unique(seconds[closed]).tolist():
                    part = raw[seconds == second]
                    errors = Counter(
                        e
                        for (_, e), s in zip(row._errors, error_seconds, strict=True)
                        if s == second
                    )
                    out[second] = _sample_interval(part, errors)
                if consume:
                    kept = raw[~closed]
                    row._samples = array("q", kept.tobytes())
                    row._errors = [
                        pair
                        for pair, s in zip(row._errors, error_seconds, strict=True)
                        if s >= now_sec
                    ]

        for buffer_name in ("_events", "_cancels"):
            buf = getattr(row, buffer_name)
            if not buf:
                continue
            pairs = np.frombuffer(buf, dtype=np.int64).reshape(-1, 2)
            seconds = (pairs[:, 1 if buffer_name == "_cancels" else 0] + off) // NS_PER_S
            closed = seconds < now_sec
            if not closed.any():
                continue
            for second in np.unique(seconds[closed]).tolist():
                interval = out.setdefault(second, Interval())
                mask = seconds == second
                if buffer_name == "_events":
                    interval.events += int(pairs[mask, 1].sum())
                else:
                    interval.cancelled += int(np.count_nonzero(mask))
            if consume:
                setattr(row, buffer_name, array("q", pairs[~closed].tobytes()))
        return out

    # -- windows ----------------------------------------------------------------------------
    def window(self, start_ns: int, end_ns: int) -> Window:
        """Exact stats of the whole seconds [second(start), second(end)), by done time."""
        self.flush()
        first, last = self.second_of(start_ns), self.second_of(end_ns)
        return self.window_seconds(first, last)

    def window_seconds(
        self, first: int, last: int, *, leave_out: frozenset[int] = frozenset()
    ) -> Window:
        """Seconds [first, last) summed; `leave_out`: seconds left out of the sum (a paired
        run's saturated seconds, docs/SPEC.md §6.8), the window's span unchanged."""
        per_row: dict[RowKey, list[Interval]] = {}
        gauges: list[tuple[float, dict[str, str], str, float]] = []
        seconds = (
            sorted(s for s in self.intervals if first <= s < last)
            if len(self.intervals) < (last - first)
            else range(first, last)
        )
        for second in seconds:
            if second in leave_out:
                continue
            for key, interval in self.intervals.get(second, {}).items():
                per_row.setdefault(key, []).append(interval)
        gauge_seconds = (
            sorted(s for s in self.gauges if first <= s < last)
            if len(self.gauges) < (last - first)
            else range(first, last)
        )
        for second in gauge_seconds:
            for (name, labels), value in self.gauges.get(second, {}).items():
                gauges.append((float(second), dict(labels), name, value))
        rows = {key: RowStats.of_intervals(items) for key, items in per_row.items()}
        left_out = sum(1 for s in leave_out if first <= s < last)
        return Window(float(first), float(max(first, last)), rows, gauges, left_out)

    def totals(self) -> Window:
        """The whole run so far, including the still-open second."""
        rows = {key: stats.copy() for key, stats in self._cumulative.items()}
        far_future = 1 << 62
        for row in self._rows.values():
            pending = self._drain(row, far_future, consume=False)
            if not pending:
                continue
            extra = RowStats.of_intervals(pending.values())
            key = (row.kind, row.name)
            if key in rows:
                rows[key].merge(extra)
            else:
                rows[key] = extra
        now_s = self.unix_s(self._clock_ns())
        return Window(float(self.first_second), max(now_s, float(self.first_second)), rows)

    # -- shards -----------------------------------------------------------------------------
    def merge(self, other: Recorder) -> None:
        """Add another recorder (a shard) into this one: plain sums per second per row."""
        for second, per_row in other.intervals.items():
            for key, interval in per_row.items():
                # A copy: _store adds late samples into what it keeps, and the shard's
                # intervals must stay the shard's.
                copy = Interval()
                copy.add(interval)
                self._store(key, second, copy)
        for second, snapshot in other.gauges.items():
            mine = dict(self.gauges.get(second, {}))
            for gkey, value in snapshot.items():
                mine[gkey] = mine.get(gkey, 0.0) + value
            self.gauges[second] = mine
        # Still-buffered samples move over with their clocks re-based onto ours.
        shift = other._offset_ns - self._offset_ns
        for key, theirs in other._rows.items():
            mine_row = self.row(*key)
            if theirs._samples:
                raw = np.frombuffer(theirs._samples, dtype=np.int64).reshape(-1, _FIELDS).copy()
                raw[:, [_INTENDED, _SENT, _DONE]] += shift
                mine_row._samples.frombytes(raw.tobytes())
                mine_row._errors.extend((done + shift, e) for done, e in theirs._errors)
            for buffer_name, time_cols in (("_events", [0]), ("_cancels", [0, 1])):
                buf = getattr(theirs, buffer_name)
                if buf:
                    pairs = np.frombuffer(buf, dtype=np.int64).reshape(-1, 2).copy()
                    pairs[:, time_cols] += shift
                    getattr(mine_row, buffer_name).frombytes(pairs.tobytes())
        self.first_second = min(self.first_second, other.first_second)


def _sample_interval(part: np.ndarray, errors: Counter[str]) -> Interval:
    intended = part[:, _INTENDED]
    sent = part[:, _SENT]
    done = part[:, _DONE]
    failed = part[:, _FAILED] != 0
    latencies = np.stack((done - intended, done - sent, sent - intended)) / _NS_PER_MS
    response, service, start_lag = SparseHistogram.of_rows(latencies)
    n_failed = int(np.count_nonzero(failed))
    server = part[:, _SERVER]
    told = server >= 0
    return Interval(
        count=int(part.shape[0]),
        failures=n_failed,
        bytes=int(part[:, _NBYTES].sum()),
        errors=errors or None,
        response=response,
        service=service,
        start_lag=start_lag,
        failed_response=(
            SparseHistogram.of_values(latencies[0][failed]) if n_failed else EMPTY_SPARSE
        ),
        server=(
            SparseHistogram.of_values(server[told] * _NS_PER_US / _NS_PER_MS)
            if told.any()
            else EMPTY_SPARSE
        ),
    )


__all__ = ["NS_PER_S", "Recorder", "Row"]
