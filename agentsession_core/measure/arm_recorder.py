"""One arm of a paired run booking into the run's recorder (docs/SPEC.md §6.8).

Both arms of a paired run are driven by one generator and measured by one recorder, so their
seconds line up exactly and a shard's merge stays a plain sum. The reference arm's engine
gets an `ArmRecorder`: the same store, with every row it books named for its arm
(`measure/stats.py` arm_row) and every gauge labelled with it; the windows it reads back are
its own arm's view (`Window.arm`), so its population's own figures (turnover_window, the
resident set) are computed from its own rows by the same code as the candidate's.
"""

from __future__ import annotations

from agentsession_core.measure.recorder import GaugeKey, Recorder, Row
from agentsession_core.measure.stats import ARM_LABEL, HEALTH_KIND, Window, arm_row


class ArmRecorder(Recorder):
    """`base` as arm `arm` sees it. It shares the base's store (never its own copy): the
    base flushes, the arm only books and reads."""

    def __init__(self, base: Recorder, arm: str) -> None:  # no super().__init__: shared state
        self.base = base
        self.arm = arm
        self._clock_ns = base._clock_ns
        self._offset_ns = base._offset_ns
        self._rows = base._rows
        self.intervals = base.intervals
        self.gauges = base.gauges
        self._gauge_now = base._gauge_now
        self._cumulative = base._cumulative

    @property
    def first_second(self) -> int:
        return self.base.first_second

    @first_second.setter
    def first_second(self, value: int) -> None:
        raise TypeError("an arm's view does not move the run's clock")

    @property
    def closed_until(self) -> int:
        return self.base.closed_until

    @closed_until.setter
    def closed_until(self, value: int) -> None:
        raise TypeError("an arm's view does not close seconds: the run's recorder does")

    def row(self, kind: str, name: str) -> Row:
        if kind == HEALTH_KIND:  # the one generator's health: both arms book the same rows
            return self.base.row(kind, name)
        return self.base.row(kind, arm_row(name, self.arm))

    def gauge(self, name: str, labels: dict[str, str] | tuple, value: float) -> None:
        mine = dict(labels)
        self.base.gauge(name, {**mine, ARM_LABEL: self.arm}, value)

    def current_gauges(self) -> dict[GaugeKey, float]:
        return {
            (name, tuple((k, v) for k, v in labels if k != ARM_LABEL)): value
            for (name, labels), value in self.base.current_gauges().items()
            if (ARM_LABEL, self.arm) in labels
        }

    def flush(self, now_ns: int | None = None) -> None:
        self.base.flush(now_ns)

    def window_seconds(
        self, first: int, last: int, *, leave_out: frozenset[int] = frozenset()
    ) -> Window:
        return self.base.window_seconds(first, last, leave_out=leave_out).arm(self.arm)

    def totals(self) -> Window:
        return self.base.totals().arm(self.arm)

    def merge(self, other: Recorder) -> None:
        raise TypeError("an arm's view is not merged into: merge into the run's recorder")


__all__ = ["ArmRecorder"]
