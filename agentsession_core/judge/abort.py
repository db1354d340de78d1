"""Abort rules (docs/SPEC.md §6): thresholds marked abort, checked every second on a sliding
window once the warm-up is over; a trip ends the window and the campaign at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from agentsession_core.judge.thresholds import References, Threshold
from agentsession_core.judge.verdict import ThresholdResult, evaluate
from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.measure.stats import Window


class AbortMonitor:
    """Abort rules on a sliding window of whole, closed seconds, once the warm-up is over.

    ``check`` is meant for a hold's ``should_stop`` (called ~10× a second): it does real
    work once per new second only. Once tripped it keeps returning the same reason. `target`
    gives the sliding window's references (verdict.evaluate), from the window itself.
    """

    def __init__(
        self,
        recorder: Recorder,
        rules: list[Threshold],
        *,
        sliding_s: float = 30.0,
        delay_s: float = 60.0,
        target: Callable[[Window], float | References | None],
        start_ns: int | None = None,
    ) -> None:
        if sliding_s < 1:
            raise ValueError("sliding_s must be at least one second")
        self.recorder = recorder
        self.rules = list(rules)
        self.sliding_s = sliding_s
        self.delay_s = delay_s
        self.target = target
        self.start_ns = recorder.now_ns() if start_ns is None else start_ns
        self.reason: str | None = None
        self.last_results: list[ThresholdResult] = []
        self._judged_second: int | None = None

    def check(self, now_ns: int | None = None) -> str | None:
        if self.reason is not None or not self.rules:
            return self.reason
        rec = self.recorder
        now_ns = rec.now_ns() if now_ns is None else now_ns
        if now_ns - self.start_ns < self.delay_s * NS_PER_S:
            return None
        second = rec.second_of(now_ns)
        if second == self._judged_second:
            return None
        self._judged_second = second
        rec.flush(now_ns)
        # Only whole seconds after the monitor started, so the fill never leaks in.
        first = max(rec.second_of(self.start_ns) + 1, second - math.ceil(self.sliding_s))
        if first >= second:
            return None
        window = rec.window_seconds(first, second)
        target = self.target(window)
        self.last_results = [evaluate(rule, window, target) for rule in self.rules]
        for rule, result in zip(self.rules, self.last_results, strict=True):
            if result.passed is False:
                self.reason = (
                    f"abort rule {rule.text!r} tripped over the last "
                    f"{second - first}s: {result.detail}"
                )
                return self.reason
        return None


__all__ = ["AbortMonitor"]
