"""Stats files: Locust-compatible CSVs and stats.jsonl, all rendered from recorder windows.

The CSV columns are Locust 2.x's (``locust/stats.py``: StatsCSV / StatsCSVFileWriter) so
existing tooling reads them: Type = our row kind, Name = our row name, a final "Aggregated"
row with an empty Type. Latencies are milliseconds measured from the **intended** time (our
headline); they are written with three decimals rather than Locust's integers so sub-ms values
survive. Percentile cells are "N/A" for a row without requests, as in Locust. Rows of kind
``generator`` (loop lag, dispatch lateness) stay out of the CSVs and the Aggregated row; they
appear in stats.jsonl and stats_history.jsonl. Count-only rows (actor/CrashCount, backlog)
show their event count as Request Count but add nothing to Aggregated, which counts requests
only.

density.csv is the density row of upstream's trial summary (docs/SPEC.md §6.7, §7): one
header line of upstream's column names and one row, the capacity search's density frontier
(gate.json's `capacity.density`), with the level and the source of the node figures beside.

stats_history.jsonl is stats_history.csv's per-second companion for what Locust's columns cannot
hold (docs/SPEC.md §5.2, §5.6): one line per second per row that saw anything, generator rows
included, plus the Aggregated line, with the failures by code and the service time and start
lag percentiles of that second (and, for generator rows, their own lag: the health signals
that decide a void window). report.html draws its charts from the two files.

This module only renders (pure and cheap: call it on the event loop with a Window); the run
directory writes the text (``RunDir.write_text`` / ``RunDir.append_text``, from a thread).
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from agentsession_core.measure.health import HEALTH_KIND, counts_requests, is_request_row
from agentsession_core.measure.histogram import PERCENTILES, LogHistogram, percentiles
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.stats import RowKey, RowStats, Window, row_arm


def locust_column(key: str) -> str:
    """Locust's column name of a percentile key: p50 -> "50%", p99_9 -> "99.9%"."""
    return key.removeprefix("p").replace("_", ".") + "%"


# Locust reports every percentile of the table, in its order.
_LOCUST_PERCENTILE_COLUMNS = [locust_column(key) for key in PERCENTILES]
_QUANTILES = list(PERCENTILES.values())

STATS_CSV_COLUMNS = [
    "Type",
    "Name",
    "Request Count",
    "Failure Count",
    "Median Response Time",
    "Average Response Time",
    "Min Response Time",
    "Max Response Time",
    "Average Content Size",
    "Requests/s",
    "Failures/s",
    *_LOCUST_PERCENTILE_COLUMNS,
]
HISTORY_CSV_COLUMNS = [
    "Timestamp",
    "User Count",
    "Type",
    "Name",
    "Requests/s",
    "Failures/s",
    *_LOCUST_PERCENTILE_COLUMNS,
    "Total Request Count",
    "Total Failure Count",
    "Total Median Response Time",
    "Total Average Response Time",
    "Total Min Response Time",
    "Total Max Response Time",
    "Total Average Content Size",
]
FAILURES_CSV_COLUMNS = ["Method", "Name", "Error", "Occurrences"]
AGGREGATED = "Aggregated"
HISTORY_CSV = "stats_history.csv"
HISTORY_JSONL = "stats_history.jsonl"
# The `type` of a stats_history.jsonl record that books a change made by hand through the
# control API (run/live_control.py), not a row's second (docs/SPEC.md §5.10).
CHANGE_RECORD_TYPE = "control"
# The percentiles of each latency view a stats_history.jsonl line carries.
SECOND_PERCENTILES = percentiles(("p50", "p90", "p99"))


def _ms(value: float) -> float:
    return round(value, 3)


def _percentiles(hist: LogHistogram, count: int) -> list[Any]:
    if count == 0 or hist.count == 0:
        return ["N/A"] * len(_QUANTILES)
    return [_ms(hist.quantile(q)) for q in _QUANTILES]


def _booked(stats: RowStats) -> int:
    """Locust's Request Count: requests, or events for count-only rows."""
    return stats.count if stats.count else stats.events


def _summary(stats: RowStats) -> list[Any]:
    """Request Count … Average Content Size (shared by stats.csv and the history totals)."""
    hist = stats.response
    return [
        _booked(stats),
        stats.failures,
        _ms(hist.quantile(PERCENTILES["p50"])),
        _ms(hist.mean()),
        _ms(hist.min) if hist.count else 0,
        _ms(hist.max) if hist.count else 0,
        _ms(stats.bytes / stats.count) if stats.count else 0,
    ]


def _csv_text(header: list[str] | None, rows: Iterable[list[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if header is not None:
        writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def _request_rows(window: Window) -> list[tuple[RowKey, RowStats]]:
    """The rows the CSVs list (per-script TimeToWake too); Aggregated adds up only the
    request rows."""
    return [(key, window.rows[key]) for key in sorted(window.rows) if is_request_row(key)]


def render_stats_csv(window: Window) -> str:
    duration = window.duration_s
    rows = []
    entries = [
        *((k, s) for k, s in _request_rows(window)),
        (("", AGGREGATED), window.aggregate(counts_requests)),
    ]
    for (kind, name), stats in entries:
        booked = _booked(stats)
        summary = _summary(stats)
        rows.append(
            [
                kind,
                name,
                *summary,
                round(booked / duration, 6) if duration else 0.0,
                round(stats.failures / duration, 6) if duration else 0.0,
                *_percentiles(stats.response, stats.count),
            ]
        )
    return _csv_text(STATS_CSV_COLUMNS, rows)


# Upstream's names first (a reader that knows only those finds them), then ours.
DENSITY_CSV = "density.csv"
DENSITY_CSV_COLUMNS = [
    "actors_per_node",
    "actors_per_vcpu",
    "actors_per_gb_ram",
    "actors_per_pod_p50",
    "actors_per_pod_p90",
    "actors_per_pod_p99",
    "actors",
    "workers",
    "nodes",
    "vcpus_per_node",
    "memory_bytes_per_node",
    "level",
    "rate",
    "unit",
    "predicted_actors",
    "predicted_bound",
    "status",
]


def render_density_csv(density: dict[str, Any]) -> str:
    """density.csv from gate.json's `capacity.density`: its frontier's row; the figures are
    empty where none was measured (no worker listing, no level held), the status says why."""
    frontier = density.get("frontier") or {}
    node = density.get("node") or {}
    prediction = density.get("prediction") or {}
    row = {
        **{key: frontier.get(key) for key in DENSITY_CSV_COLUMNS},
        "nodes": node.get("nodes"),
        "vcpus_per_node": node.get("vcpus_per_node"),
        "memory_bytes_per_node": node.get("memory_bytes_per_node"),
        "predicted_actors": prediction.get("actors"),
        "predicted_bound": prediction.get("bound"),
        "status": density.get("status"),
    }
    cells = ["" if row[key] is None else row[key] for key in DENSITY_CSV_COLUMNS]
    return _csv_text(DENSITY_CSV_COLUMNS, [cells])


def render_failures_csv(window: Window) -> str:
    rows = []
    for (kind, name), stats in _request_rows(window):
        for error, occurrences in sorted(stats.errors.items()):
            rows.append([kind, name, error, occurrences])
    return _csv_text(FAILURES_CSV_COLUMNS, rows)


def jsonl_row(
    metric: str,
    measurements: dict[str, Any],
    *,
    tag: str,
    test_name: str,
    timestamp: float | None = None,
) -> dict[str, Any]:
    """One stats.jsonl object; use it for extra rows such as turnover_window / step_window."""
    return {
        "timestamp": time.time() if timestamp is None else timestamp,
        "tag": tag,
        "test_name": test_name,
        "metric": metric,
        "measurements": measurements,
    }


def stats_jsonl_rows(
    window: Window,
    *,
    tag: str,
    test_name: str,
    timestamp: float | None = None,
    arms: bool = False,
) -> list[dict[str, Any]]:
    """One row per (type, name) in the window, metric "<type>_<name>"; `arms` (a paired
    run, docs/SPEC.md §6.8): each row says its arm (`candidate`, `reference`; none for the
    generator's own rows, which are both arms')."""
    stamp = window.end_s if timestamp is None else timestamp
    out = []
    for (kind, name), stats in sorted(window.rows.items()):
        row = jsonl_row(
            f"{kind}_{name}",
            stats.measurements(window.duration_s),
            tag=tag,
            test_name=test_name,
            timestamp=stamp,
        )
        if arms and (arm := row_arm((kind, name))[1]) is not None:
            row["arm"] = arm
        out.append(row)
    return out


def render_jsonl(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY).decode() + "\n" for r in rows)


def render_stats_jsonl(
    window: Window,
    *,
    tag: str,
    test_name: str,
    extra_rows: Iterable[dict[str, Any]] = (),
    arms: bool = False,
) -> str:
    """The whole stats.jsonl: one line per row, then the extra rows (turnover_window, ...)."""
    rows = stats_jsonl_rows(window, tag=tag, test_name=test_name, arms=arms)
    return render_jsonl([*rows, *extra_rows])


def _view(hist: LogHistogram) -> dict[str, float]:
    return {key: _ms(hist.quantile(q)) for key, q in SECOND_PERCENTILES.items()}


def second_record(second: int, key: RowKey, stats: RowStats) -> dict[str, Any] | None:
    """One stats_history.jsonl line: a row's second beyond Locust's columns (None: idle)."""
    if not (stats.count or stats.events or stats.cancelled):
        return None
    out: dict[str, Any] = {"t": second, "type": key[0], "name": key[1], "count": stats.count}
    if stats.failures:
        out["failures"] = stats.failures
        out["errors"] = dict(stats.errors)
    if stats.events:
        out["events"] = stats.events
    if stats.cancelled:
        out["cancelled"] = stats.cancelled
    if stats.count:
        if key[0] == HEALTH_KIND:
            # The lag is the signal (intended -> woke; sent is the wake, so it equals the
            # start lag measure/health.py judges dispatch lateness by).
            out["response"] = _view(stats.response)
        else:
            out["service"] = _view(stats.service)
            out["start_lag"] = _view(stats.start_lag)
    return out


class HistoryWriter:
    """stats_history.csv (and stats_history.jsonl) as the run goes: one line per second per
    active row + Aggregated.

    Unlike Locust's default (cumulative percentiles), each line's percentiles and rates are
    those of that one second; the Total columns are cumulative since the writer started. The
    first CSV text rendered starts with the header unless `header` is False (the file already
    has one).
    """

    def __init__(self, *, header: bool = True) -> None:
        self.next_second: int | None = None
        self._totals: dict[RowKey, RowStats] = {}
        self._aggregate = RowStats()
        self._pending_header = header

    def render_closed(self, recorder: Recorder, user_count: int | Callable[[int], int] = 0) -> str:
        """stats_history.csv lines for every second closed since the last call (loop thread)."""
        return self.render_closed_files(recorder, user_count)[HISTORY_CSV]

    def render_closed_files(
        self, recorder: Recorder, user_count: int | Callable[[int], int] = 0
    ) -> dict[str, str]:
        """{file name: text to append} for stats_history.csv and stats_history.jsonl, for
        every second the recorder closed since the last call (loop thread)."""
        if self.next_second is None:
            self.next_second = recorder.first_second
        lines: list[list[Any]] = []
        records: list[dict[str, Any]] = []
        for second in range(self.next_second, recorder.closed_until):
            users = user_count(second) if callable(user_count) else user_count
            lines.extend(self._second_lines(recorder, second, users, records))
        self.next_second = max(self.next_second, recorder.closed_until)
        header = HISTORY_CSV_COLUMNS if self._pending_header else None
        csv_text = ""
        if lines or header is not None:
            self._pending_header = False
            csv_text = _csv_text(header, lines)
        return {HISTORY_CSV: csv_text, HISTORY_JSONL: render_jsonl(records)}

    def _second_lines(
        self, recorder: Recorder, second: int, users: int, records: list[dict[str, Any]]
    ) -> list[list[Any]]:
        intervals = recorder.intervals.get(second, {})
        out = []
        this_second = RowStats()
        for key in sorted(intervals):
            stats = intervals[key].stats()
            if (record := second_record(second, key, stats)) is not None:
                records.append(record)
            if not is_request_row(key):
                continue
            if counts_requests(key):
                this_second.merge(stats)
            total = self._totals.setdefault(key, RowStats())
            total.merge(stats)
            out.append(self._line(second, users, key, stats, total))
        self._aggregate.merge(this_second)
        if (record := second_record(second, ("", AGGREGATED), this_second)) is not None:
            records.append(record)
        out.append(self._line(second, users, ("", AGGREGATED), this_second, self._aggregate))
        return out

    @staticmethod
    def _line(second: int, users: int, key: RowKey, stats: RowStats, total: RowStats) -> list[Any]:
        return [
            second,
            users,
            key[0],
            key[1],
            f"{_booked(stats):.6f}",
            f"{stats.failures:.6f}",
            *_percentiles(stats.response, stats.count),
            *_summary(total),
        ]


__all__ = [
    "CHANGE_RECORD_TYPE",
    "DENSITY_CSV",
    "DENSITY_CSV_COLUMNS",
    "FAILURES_CSV_COLUMNS",
    "HISTORY_CSV",
    "HISTORY_CSV_COLUMNS",
    "HISTORY_JSONL",
    "STATS_CSV_COLUMNS",
    "HistoryWriter",
    "jsonl_row",
    "locust_column",
    "render_density_csv",
    "render_failures_csv",
    "render_jsonl",
    "render_stats_csv",
    "render_stats_jsonl",
    "second_record",
    "stats_jsonl_rows",
]
