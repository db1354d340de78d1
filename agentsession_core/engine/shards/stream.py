"""The coordinator's side of the per-second stream: what each shard hands over, merged into
one recorder, in order, with each shard's generator health kept apart.

Every drain of a shard carries a `ShardDelta`: the per-second intervals and gauge snapshots
its recorder closed since the last drain, how far it has closed (`closed_until`), the actor
names it is about to create or has deleted (the shared ledger), its log lines and status.

The merged recorder only ever sees whole seconds: a second is merged once every live shard
has closed it (the watermark), so a window, an abort rule or a CSV line never reads a second
that one shard has not delivered yet. The merged recorder's clock is the watermark (it runs
behind the wall clock by the shards' flush and the drain interval): `flush()` and the abort
monitor then close and judge only complete seconds. Counts and histogram buckets are plain
sums (`Recorder.merge`), so any window of the merged stream equals the sum of the shards'.

A shard added during the run (a lost shard's sessions carried on by a survivor: `grow`)
holds the watermark back only from its first delivery on, so the merge never waits for a
shard that is still starting; it delivers only seconds from its own start.

Generator health is per process and does not add up (two shards at 60 % CPU are not one
saturated generator), so each shard's health rows are also kept in a mirror recorder of its
own and judged alone: a window is void when any one shard was saturated, and says which.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agentsession_core.measure.health import CPU_GAUGE, HEALTH_KIND, GeneratorHealth
from agentsession_core.measure.histogram import PERCENTILES
from agentsession_core.measure.recorder import GaugeKey, Recorder
from agentsession_core.measure.stats import Interval, RowKey, Window

Seconds = dict[int, dict[RowKey, Interval]]
GaugeSeconds = dict[int, dict[GaugeKey, float]]


@dataclass
class Loss:
    """A shard lost mid-run: from `at` (unix s) until its sessions ran again elsewhere
    (`back`, None while they do not) the merged load is short, so a window that overlaps
    that span is void, named by `reason`."""

    shard: int
    at: float
    reason: str
    back: float | None = None
    carried_by: list[int] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)  # seconds after `at` each step ended

    def overlaps(self, window: Window) -> bool:
        return self.at < window.end_s and (self.back is None or self.back > window.start_s)

    @property
    def line(self) -> str:
        if self.back is None:
            return self.reason
        clock = time.strftime("%H:%M:%S", time.gmtime(self.back))
        by = ", ".join(str(k) for k in self.carried_by)
        return f"{self.reason}; its sessions carried on by shards {by} from {clock} UTC"


@dataclass
class ShardDelta:
    """One drain of one shard (pickled by Dask on its way to the coordinator)."""

    intervals: Seconds = field(default_factory=dict)
    gauges: GaugeSeconds = field(default_factory=dict)
    closed_until: int | None = None  # every second before this one has been handed over
    monitored: list[list[int]] = field(default_factory=list)  # GeneratorHealth.monitored
    journal: list[tuple[str, str]] = field(default_factory=list)  # ("+"|"-", actor name)
    reference_journal: list[tuple[str, str]] = field(default_factory=list)  # a paired run's
    logs: list[tuple[int, str]] = field(default_factory=list)  # (level, message)
    status: dict[str, Any] = field(default_factory=dict)


def _as_recorder(intervals: Seconds, gauges: GaugeSeconds) -> Recorder:
    """Seconds and gauges as a recorder that Recorder.merge can add (nothing buffered)."""
    delta = Recorder()
    delta.intervals = intervals
    delta.gauges = gauges
    seconds = [*intervals, *gauges]
    if seconds:
        delta.first_second = min(seconds)
    return delta


class ShardStream:
    """Merges the shards' deltas into `recorder` second by second, in watermark order."""

    def __init__(self, count: int, *, voids: bool = True) -> None:
        """`voids`: a shard's saturated seconds void a window (generator.void_when_saturated);
        a lost shard always does."""
        self.count = count
        self.voids = voids
        self.recorder: Recorder | None = None
        self.merged_until = 0  # seconds below this are in the merged recorder
        self.closed_until: dict[int, int] = {}
        self.live: set[int] = set(range(count))
        self._staged: dict[int, list[tuple[dict[RowKey, Interval], dict[GaugeKey, float]]]] = {}
        self.mirrors = [Recorder() for _ in range(count)]
        self.health = [GeneratorHealth(mirror, voids=voids) for mirror in self.mirrors]
        self.names: list[set[str]] = [set() for _ in range(count)]
        self.reference_names: list[set[str]] = [set() for _ in range(count)]  # paired runs
        self.status: list[dict[str, Any]] = [{} for _ in range(count)]
        self.merge_seconds = 0.0  # coordinator time spent merging (the bench reports it)
        self.merged_deltas = 0
        self.joining: set[int] = set()  # added by grow, not delivered yet
        self.losses: list[Loss] = []

    def grow(self) -> int:
        """One more shard (its index): live, holding the watermark from its first delivery."""
        index = self.count
        self.count += 1
        self.mirrors.append(Recorder())
        self.health.append(GeneratorHealth(self.mirrors[-1], voids=self.voids))
        self.names.append(set())
        self.reference_names.append(set())
        self.status.append({})
        self.joining.add(index)
        return index

    # ------------------------------------------------------------ the merged clock
    def attach(self, recorder: Recorder) -> None:
        """`recorder` was made with clock_ns=self.clock_ns; from now on its clock is the
        watermark."""
        self.recorder = recorder
        self.merged_until = recorder.first_second

    def clock_ns(self) -> int:
        real = time.monotonic_ns()
        if self.recorder is None:  # the recorder's own construction reads the real clock
            return real
        return min(real, self.recorder.mono_ns_of_second(self.merged_until))

    @property
    def watermark(self) -> int | None:
        """The first second some live shard has not handed over yet (None: no live shard
        has delivered anything, or none is live)."""
        if not self.live or any(k not in self.closed_until for k in self.live):
            return None
        return min(self.closed_until[k] for k in self.live)

    # ------------------------------------------------------------ deltas in
    def add(self, index: int, delta: ShardDelta) -> None:
        started = time.thread_time()  # CPU, not wall: a busy machine preempts the loop
        for second, rows in delta.intervals.items():
            self._staged.setdefault(second, []).append((rows, {}))
        for second, gauges in delta.gauges.items():
            self._staged.setdefault(second, []).append(({}, gauges))
        if delta.closed_until is not None:
            self.closed_until[index] = delta.closed_until
            if index in self.joining:
                self.joining.discard(index)
                self.live.add(index)
        self._mirror(index, delta)
        for names, journal in (
            (self.names[index], delta.journal),
            (self.reference_names[index], delta.reference_journal),
        ):
            for op, name in journal:
                (names.add if op == "+" else names.discard)(name)
        self.status[index].update(delta.status)
        self.advance()
        self.merge_seconds += time.thread_time() - started
        self.merged_deltas += 1

    def _mirror(self, index: int, delta: ShardDelta) -> None:
        health_rows = {
            second: {key: it for key, it in rows.items() if key[0] == HEALTH_KIND}
            for second, rows in delta.intervals.items()
        }
        cpu = {
            second: {key: v for key, v in gauges.items() if key[0] == CPU_GAUGE}
            for second, gauges in delta.gauges.items()
        }
        self.mirrors[index].merge(_as_recorder(health_rows, cpu))
        if delta.monitored:
            self.health[index].monitored = [list(span) for span in delta.monitored]

    def drop(self, index: int) -> None:
        """Shard `index` is gone: it no longer holds the watermark back."""
        self.live.discard(index)
        self.joining.discard(index)
        self.advance()

    def advance(self, *, final: bool = False) -> None:
        """Merge every staged second below the watermark (all of them when `final`)."""
        rec = self.recorder
        if rec is None:
            return
        if final:
            target = max([*self._staged, rec.closed_until - 1, self.merged_until - 1]) + 1
        else:
            mark = self.watermark
            if mark is None or mark <= self.merged_until:
                return
            target = mark
        self.merged_until = max(self.merged_until, target)
        # Close the merged recorder up to there first (it has no rows of its own, so that
        # writes empty gauge snapshots), then add the shards' seconds into them.
        rec.flush(rec.mono_ns_of_second(target))
        ready = sorted(s for s in self._staged if s < target)
        if not ready:
            return
        intervals: Seconds = {}
        gauges: GaugeSeconds = {}
        for second in ready:
            for rows, snapshot in self._staged.pop(second):
                mine = intervals.setdefault(second, {})
                for key, interval in rows.items():
                    if key in mine:
                        mine[key].add(interval)
                    else:
                        copy = Interval()
                        copy.add(interval)
                        mine[key] = copy
                summed = gauges.setdefault(second, {})
                for gkey, value in snapshot.items():
                    summed[gkey] = summed.get(gkey, 0.0) + value
        rec.merge(_as_recorder(intervals, gauges))

    # ------------------------------------------------------------ generator health
    def void_reason(self, window: Window) -> str | None:
        """A shard lost during `window` (before its sessions ran again elsewhere), or the first
        shard whose generator was saturated in it, named."""
        for loss in self.losses:
            if loss.overlaps(window):
                return loss.line
        for index, health in enumerate(self.health):
            reason = health.void_reason(window)
            if reason is not None:
                return f"shard {index}: {reason}"
        return None

    def health_summary(self, index: int) -> dict[str, Any]:
        """shards/<k>/health.json: what shard `index`'s generator went through."""
        mirror, health = self.mirrors[index], self.health[index]
        seconds = sorted(mirror.intervals) or [mirror.first_second]
        first, last = seconds[0], seconds[-1] + 1
        whole = mirror.window_seconds(first, last)
        cpu = [v for _, _, name, v in whole.gauges if name == CPU_GAUGE]
        out: dict[str, Any] = {
            "shard": index,
            "monitored": health.monitored,
            "saturated_seconds": [
                {"unix": second, "reason": reason}
                for second, reason in health.saturated_in(first, last)
            ],
            "cpu_percent_mean": sum(cpu) / len(cpu) if cpu else None,
            "cpu_percent_max": max(cpu) if cpu else None,
        }
        for key, name in (
            (("generator", "LoopLag"), "loop_lag"),
            (("generator", "DispatchLag"), "dispatch_lag"),
        ):
            stats = whole.row(*key)
            hist = stats.response if name == "loop_lag" else stats.start_lag
            out[f"{name}_p99_ms"] = hist.quantile(PERCENTILES["p99"]) if hist.count else None
            out[f"{name}_max_ms"] = hist.max if hist.count else None
        return out


class MergedHealth(GeneratorHealth):
    """The merged stream's generator health: never started, each shard judged alone."""

    def __init__(self, stream: ShardStream, recorder: Recorder) -> None:
        super().__init__(recorder)
        self.stream = stream

    def void_reason(self, window: Window) -> str | None:
        return self.stream.void_reason(window)


__all__ = ["Loss", "MergedHealth", "ShardDelta", "ShardStream"]
