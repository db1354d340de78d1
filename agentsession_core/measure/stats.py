"""What the recorder hands out: one second of one row (Interval), one row over a window
(RowStats) and a whole window (Window).

An Interval keeps sparse histograms, because the recorder keeps one per second per row for the
whole run (docs/SPEC.md §5.4); RowStats keeps dense ones, because a window is read many times
(every percentile, every threshold). Both add up the same way, counters by plain sums and
histograms by adding bucket counts, so any window is exact and percentiles are never averaged
(docs/SPEC.md §5.3).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentsession_core.measure.histogram import (
    EMPTY_SPARSE,
    LogHistogram,
    SparseHistogram,
    merge_sparse,
    percentiles,
    percentiles_through,
)

RowKey = tuple[str, str]

# Row kinds (docs/SPEC.md §5.1) use the upstream runner's names, so its dashboards read our
# stats.jsonl ("<kind>_<name>") unchanged: every control-plane call is a `grpc` row and every
# router request an `http` row, whatever wire the substrate speaks; the turnover wake latency
# is `rps`/TimeToWake.
CONTROL_KIND = "grpc"
ROUTER_KIND = "http"
TIME_TO_WAKE_ROW: RowKey = ("rps", "TimeToWake")

# Rows of the load's own shape, not requests (docs/SPEC.md §5.1): they stay out of the
# Locust CSVs, the Aggregated row and a threshold's "all requests", and a rule names them.
# Each step of a closed session that fell due (its think over) and each turn arrival, booked
# as events at their intended times: the rate the load model asked for, which achieved_rps is
# judged against (docs/SPEC.md §6). QueueWait: how long a turn arrival waited for the
# session's previous turn (docs/SPEC.md §4.3). Backlog: swaps a tick could not start;
# ResidentShortfall: each second, awake minus the residents (docs/SPEC.md §4.2).
# FleetExhausted: a cold resume the rate asked for with no suspended actor left to resume
# (docs/SPEC.md §4.7); a second that books one is void.
LOAD_KINDS = ("closed", "turns", "turnover", "cold_resume")
STEPS_DUE_ROW: RowKey = ("closed", "StepsDue")
ARRIVALS_ROW: RowKey = ("turns", "Arrivals")
QUEUE_WAIT_ROW: RowKey = ("turns", "QueueWait")
BACKLOG_ROW: RowKey = ("turnover", "Backlog")
RESIDENT_SHORTFALL_ROW: RowKey = ("turnover", "ResidentShortfall")
FLEET_EXHAUSTED_ROW: RowKey = ("cold_resume", "FleetExhausted")
INTENDED_ROWS: tuple[RowKey, ...] = (STEPS_DUE_ROW, ARRIVALS_ROW)

# A cohort's figures (docs/SPEC.md §4.5, §4.6) under the upstream runner's names and its
# `summary` kind, so its dashboards read them: per actor `ActorTimeToReady` (spawn: from the
# actor's intended CreateActor to its first step's end), `ActorTimeToResume` and
# `ActorTimeToSuspend` (burst: from the burst's start); per cohort one sample on each of
# `TimeToReady_<k>pct` (from the cohort's start until k % of it was ready), `TimeToAllReady`,
# `TimeToFirstResume_<k>pct`, `TimeToAllResumed`, `TimeToSuspend_<k>pct` and
# `TimeToAllSuspended`. A mark the cohort never reached is one failed sample. They are listed
# in the CSVs and stats.jsonl and judged by name, but they are figures made of requests other
# rows count (CreateActor, FirstTouch, Step_*, SuspendActor), so no total adds them
# (measure/health.py counts_requests).
SUMMARY_KIND = "summary"
ACTOR_READY_ROW: RowKey = (SUMMARY_KIND, "ActorTimeToReady")
ALL_READY_ROW: RowKey = (SUMMARY_KIND, "TimeToAllReady")
ACTOR_RESUME_ROW: RowKey = (SUMMARY_KIND, "ActorTimeToResume")
ALL_RESUMED_ROW: RowKey = (SUMMARY_KIND, "TimeToAllResumed")
ACTOR_SUSPEND_ROW: RowKey = (SUMMARY_KIND, "ActorTimeToSuspend")
ALL_SUSPENDED_ROW: RowKey = (SUMMARY_KIND, "TimeToAllSuspended")
READY_MARK = "TimeToReady"  # TimeToReady_<k>pct
RESUME_MARK = "TimeToFirstResume"  # TimeToFirstResume_<k>pct
SUSPEND_MARK = "TimeToSuspend"  # TimeToSuspend_<k>pct
CRASH_ROW: RowKey = ("actor", "CrashCount")


def mark_row(prefix: str, k: int) -> RowKey:
    """The row of the time until k % of a cohort was done: `TimeToReady_90pct`."""
    return (SUMMARY_KIND, f"{prefix}_{k}pct")


def is_cohort_figure(key: RowKey) -> bool:
    """A cohort's figure or an actor's part in one (docs/SPEC.md §4.5): listed and judged,
    never added into a total of requests."""
    return key[0] == SUMMARY_KIND


# A breakdown row holds a subset of another row's requests, split by one label, and is
# named after it: `TimeToWake:pool=fast` beside `TimeToWake` (docs/SPEC.md §5.1). Its
# requests are already counted in the row it splits, so the Aggregated row, a window's
# request totals and a threshold without ROWS leave it out, and a ROWS pattern selects it
# only when the pattern names a label too (`TimeToWake:pool=*`).
BREAKDOWN_MARK = ":"


def breakdown(key: RowKey, label: str, value: str) -> RowKey:
    """The row of `key`'s requests whose `label` is `value`."""
    kind, name = key
    return (kind, f"{name}{BREAKDOWN_MARK}{label}={value}")


# A run of several scripts (docs/SPEC.md §1.6, §5.1) names a script's own rows with the
# script's name after a slash: `Step_01_read_task/coding-session`, `TimeToWake/coding-session`
# beside the overall TimeToWake. So `Step_*` still merges every step once, `TimeToWake` is
# still the overall row, and a rule selects one script with `Step_*/NAME`, `TimeToWake/NAME`
# or `*/NAME`. The slash cannot be in a script name, and the threshold language's `:` ends
# a row pattern, so neither can be the separator's other choice. A run of one script keeps
# its names unchanged.
SCRIPT_SEPARATOR = "/"
SCRIPT_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")  # script/validate.py's NAME_PATTERN


def script_row(name: str, script: str) -> str:
    """`name` as the row of one script of a mix."""
    return f"{name}{SCRIPT_SEPARATOR}{script}"


def row_script(name: str) -> tuple[str, str | None]:
    """(the row name without its script, the script) of a mix's row; (name, None) for any
    other row."""
    base, separator, script = name.rpartition(SCRIPT_SEPARATOR)
    if separator and base and SCRIPT_NAME.fullmatch(script):
        return base, script
    return name, None


def is_breakdown(key: RowKey) -> bool:
    """A row of requests another row counts too: a pool's (`TimeToWake:pool=fast`) or, in a
    mix, a script's TimeToWake (`TimeToWake/coding-session`, the overall row's samples again).
    Listed in the CSVs and stats.jsonl, never added into a total (Aggregated, all requests),
    and selected only by a pattern that names its label or script (judge/verdict.py)."""
    kind, name = key
    if BREAKDOWN_MARK in name:
        return True
    return (kind, row_script(name)[0]) == TIME_TO_WAKE_ROW and name != TIME_TO_WAKE_ROW[1]


# A paired run (docs/SPEC.md §6.8) drives two arms, the candidate and the reference, side
# by side into one recorder. The candidate's rows keep their names, so every reader of a run
# reads the candidate as the run (its thresholds, totals, CSV rows, a baseline comparison);
# the reference's rows carry the arm as a breakdown label, `TimeToWake:arm=reference`, so no
# total counts them twice and a rule names them only on purpose. The generator's own rows
# (health) belong to both arms: one generator drives both.
ARM_LABEL = "arm"
CANDIDATE = "candidate"
REFERENCE = "reference"
ARMS = (CANDIDATE, REFERENCE)
HEALTH_KIND = "generator"  # generator health's rows (measure/health.py)
_ARM_MARK = f"{BREAKDOWN_MARK}{ARM_LABEL}="


def arm_row(name: str, arm: str) -> str:
    """`name` as arm `arm`'s row (the candidate's is the name itself)."""
    return name if arm == CANDIDATE else f"{name}{_ARM_MARK}{arm}"


def row_arm(key: RowKey) -> tuple[RowKey, str | None]:
    """(the row without its arm label, its arm); the generator's rows are every arm's (None)."""
    kind, name = key
    if kind == HEALTH_KIND:
        return key, None
    base, mark, arm = name.rpartition(_ARM_MARK)
    if mark and base:
        return (kind, base), arm
    return key, CANDIDATE


def _labels_arm(labels: dict[str, str]) -> tuple[dict[str, str], str]:
    rest = {k: v for k, v in labels.items() if k != ARM_LABEL}
    return rest, labels.get(ARM_LABEL, CANDIDATE)


# stats.jsonl carries p50 … p99_9 of the headline latency (docs/SPEC.md §7) and a shorter set
# for service time and start lag, which are reported beside it (docs/SPEC.md §5.2).
JSONL_PERCENTILES = percentiles_through("p99_9")
_SIDE_PERCENTILES = percentiles(("p50", "p90", "p99", "p99_9"))

# The three latency views of docs/SPEC.md §5.2, plus the failed requests' own response times
# (Prometheus splits latency by outcome) and the substrate's own handling time of the answered
# requests that reported it (docs/SPEC.md §2, x-server-elapsed-us), booked as server time.
LATENCY_VIEWS = ("response", "service", "start_lag", "failed_response", "server")


def _add_counts(into: Interval | RowStats, other: Interval | RowStats) -> None:
    """The counters and the error tally of `other` added into `into`: the one place that
    knows which counters a row has, for seconds, windows and shards alike."""
    into.count += other.count
    into.failures += other.failures
    into.cancelled += other.cancelled
    into.events += other.events
    into.bytes += other.bytes
    if other.errors:
        if into.errors is None:
            into.errors = Counter()
        into.errors.update(other.errors)


@dataclass(slots=True)
class Interval:
    """One second of one row, in compact form."""

    count: int = 0
    failures: int = 0
    cancelled: int = 0
    events: int = 0
    bytes: int = 0
    # None rather than an empty Counter: most seconds have no errors, and there is one
    # Interval per second per row for the whole run.
    errors: Counter[str] | None = None
    response: SparseHistogram = EMPTY_SPARSE
    service: SparseHistogram = EMPTY_SPARSE
    start_lag: SparseHistogram = EMPTY_SPARSE
    failed_response: SparseHistogram = EMPTY_SPARSE
    server: SparseHistogram = EMPTY_SPARSE

    def add(self, other: Interval) -> None:
        _add_counts(self, other)
        for view in LATENCY_VIEWS:
            setattr(self, view, getattr(self, view).merged(getattr(other, view)))

    def stats(self) -> RowStats:
        return RowStats.of_intervals((self,))


@dataclass
class RowStats:
    """A row over a window: counts and the latency views (ms)."""

    count: int = 0
    failures: int = 0
    cancelled: int = 0
    events: int = 0
    bytes: int = 0
    response: LogHistogram = field(default_factory=LogHistogram)  # done - intended
    service: LogHistogram = field(default_factory=LogHistogram)  # done - sent
    start_lag: LogHistogram = field(default_factory=LogHistogram)  # sent - intended
    failed_response: LogHistogram = field(default_factory=LogHistogram)  # failures only
    server: LogHistogram = field(default_factory=LogHistogram)  # x-server-elapsed-us, ms
    errors: Counter[str] = field(default_factory=Counter)

    @classmethod
    def of_intervals(cls, intervals: Iterable[Interval]) -> RowStats:
        """The sum of many seconds, each histogram built in one numpy pass."""
        items = list(intervals)
        out = cls(
            response=merge_sparse(it.response for it in items),
            service=merge_sparse(it.service for it in items),
            start_lag=merge_sparse(it.start_lag for it in items),
            failed_response=merge_sparse(it.failed_response for it in items),
            server=merge_sparse(it.server for it in items),
        )
        for it in items:
            _add_counts(out, it)
        return out

    def merge(self, other: RowStats) -> None:
        _add_counts(self, other)
        for view in LATENCY_VIEWS:
            getattr(self, view).merge(getattr(other, view))

    def add_interval(self, interval: Interval) -> None:
        _add_counts(self, interval)
        for view in LATENCY_VIEWS:
            getattr(self, view).add_sparse(getattr(interval, view))

    def copy(self) -> RowStats:
        out = RowStats(
            response=self.response.copy(),
            service=self.service.copy(),
            start_lag=self.start_lag.copy(),
            failed_response=self.failed_response.copy(),
            server=self.server.copy(),
        )
        _add_counts(out, self)
        return out

    def rps(self, duration_s: float) -> float:
        return self.count / duration_s if duration_s > 0 else 0.0

    def failure_ratio(self) -> float:
        return self.failures / self.count if self.count else 0.0

    def measurements(self, duration_s: float) -> dict[str, Any]:
        """The stats.jsonl measurements: snake_case keys, latencies in ms."""
        out: dict[str, Any] = {
            "request_count": self.count,
            "failure_count": self.failures,
            "cancelled_count": self.cancelled,
            "event_count": self.events,
            "duration_s": duration_s,
            "requests_per_s": self.rps(duration_s),
            "failures_per_s": self.failures / duration_s if duration_s > 0 else 0.0,
            "events_per_s": self.events / duration_s if duration_s > 0 else 0.0,
            "failure_ratio": self.failure_ratio(),
            "avg_response_time": self.response.mean(),
            "min_response_time": self.response.min if self.response.count else 0.0,
            "max_response_time": self.response.max if self.response.count else 0.0,
            "avg_content_size": self.bytes / self.count if self.count else 0.0,
        }
        out.update(self.response.quantiles(JSONL_PERCENTILES))
        for prefix, hist in (("service", self.service), ("start_lag", self.start_lag)):
            for key, q in _SIDE_PERCENTILES.items():
                out[f"{prefix}_{key}"] = hist.quantile(q)
            out[f"{prefix}_max"] = hist.max if hist.count else 0.0
        if self.server.count:  # only where the substrate reported its handling time
            out["server_count"] = self.server.count
            for key, q in _SIDE_PERCENTILES.items():
                out[f"server_{key}"] = self.server.quantile(q)
            out["server_max"] = self.server.max
        if self.errors:
            out["errors"] = dict(self.errors)
        return out


@dataclass
class Window:
    """Stats over whole seconds [start_s, end_s) (unix seconds)."""

    start_s: float
    end_s: float
    rows: dict[RowKey, RowStats]
    gauges: list[tuple[float, dict[str, str], str, float]] = field(default_factory=list)
    left_out: int = 0  # seconds of the span not summed (a paired run's saturated seconds)

    @property
    def duration_s(self) -> float:
        """The seconds summed: the span less those left out, so rates stay per second."""
        return max(0.0, self.end_s - self.start_s - self.left_out)

    def row(self, kind: str, name: str) -> RowStats:
        return self.rows.get((kind, name)) or RowStats()

    def gauge_series(self, name: str) -> list[tuple[float, dict[str, str], float]]:
        return [(t, labels, v) for t, labels, n, v in self.gauges if n == name]

    def arm(self, arm: str) -> Window:
        """The window as arm `arm` of a paired run saw it: its rows under their plain names
        (and the generator's, which are both arms'), its gauges without the arm label. The
        candidate's view of an unpaired run is the window itself."""
        rows: dict[RowKey, RowStats] = {}
        for key, stats in self.rows.items():
            plain, owner = row_arm(key)
            if owner is None or owner == arm:
                rows[plain] = stats
        gauges = []
        for t, labels, name, value in self.gauges:
            rest, owner = _labels_arm(labels)
            if owner == arm:
                gauges.append((t, rest, name, value))
        return Window(self.start_s, self.end_s, rows, gauges, self.left_out)

    def aggregate(self, include: Callable[[RowKey], bool] = lambda key: True) -> RowStats:
        """All selected rows merged (Locust's "Aggregated" row)."""
        total = RowStats()
        for key in sorted(self.rows):
            if include(key):
                total.merge(self.rows[key])
        return total


__all__ = [
    "ACTOR_READY_ROW",
    "ACTOR_RESUME_ROW",
    "ACTOR_SUSPEND_ROW",
    "ALL_READY_ROW",
    "ALL_RESUMED_ROW",
    "ALL_SUSPENDED_ROW",
    "ARMS",
    "ARM_LABEL",
    "ARRIVALS_ROW",
    "BACKLOG_ROW",
    "BREAKDOWN_MARK",
    "CANDIDATE",
    "CONTROL_KIND",
    "CRASH_ROW",
    "FLEET_EXHAUSTED_ROW",
    "HEALTH_KIND",
    "INTENDED_ROWS",
    "JSONL_PERCENTILES",
    "LATENCY_VIEWS",
    "LOAD_KINDS",
    "QUEUE_WAIT_ROW",
    "READY_MARK",
    "REFERENCE",
    "RESIDENT_SHORTFALL_ROW",
    "RESUME_MARK",
    "ROUTER_KIND",
    "SCRIPT_SEPARATOR",
    "STEPS_DUE_ROW",
    "SUMMARY_KIND",
    "SUSPEND_MARK",
    "TIME_TO_WAKE_ROW",
    "Interval",
    "RowKey",
    "RowStats",
    "Window",
    "arm_row",
    "breakdown",
    "is_breakdown",
    "is_cohort_figure",
    "mark_row",
    "row_arm",
    "row_script",
    "script_row",
]
