"""What a person watching a run sees: one status line a second on a terminal, a plain log
line every few seconds otherwise (CI logs, cron mail); the same line for any load."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

from agentsession_core.engine.load import Load
from agentsession_core.measure.stats import ROUTER_KIND, TIME_TO_WAKE_ROW

log = logging.getLogger("agentsession")

HEADLINE_ROWS = (TIME_TO_WAKE_ROW, (ROUTER_KIND, "WakeFirstTouch"))
PLAIN_EVERY_S = 10.0
RECENT_S = 10  # the figures on the line are over the last this many seconds


class Progress:
    """The line for `load`; `paused`: whether a pause by hand holds it; `swaps_at`: a
    turnover's intended wakes per second at 1× (its swaps are the rate shown), else None."""

    def __init__(
        self,
        load: Load,
        *,
        live: bool,
        paused: Callable[[], bool] = lambda: False,
        swaps_at: float | None = None,
    ) -> None:
        self.load = load
        self.live = live
        self.paused = paused
        self.swaps_at = swaps_at
        self.started = time.monotonic()
        self._last_plain = 0.0

    def line(self) -> str:
        load = self.load
        rec = load.recorder
        now = rec.now_ns()
        recent = rec.window(now - RECENT_S * 1_000_000_000, now)
        states = load.states()
        parts = [
            f"{load.phase:<8}",
            f"{time.monotonic() - self.started:6.0f}s",
            "sessions " + " ".join(f"{k}={v}" for k, v in sorted(states.items())),
        ]
        if self.swaps_at is not None:
            woke = recent.row(*TIME_TO_WAKE_ROW)
            rate = woke.count / recent.duration_s if recent.duration_s else 0.0
            parts.append(f"swaps {rate:.1f}/{self.swaps_at * load.level:.1f}/s")
        parts += load.progress_parts()  # a turnover's resident set, a sharded load's shards
        for kind, name in HEADLINE_ROWS:
            stats = recent.row(kind, name)
            if stats.count:
                p50, p99 = stats.response.quantile(0.5), stats.response.quantile(0.99)
                parts.append(f"{name} p50 {p50:.0f}ms p99 {p99:.0f}ms")
        totals = rec.totals()
        failures = sum(s.failures for (k, _), s in totals.rows.items() if k != "generator")
        parts.append(f"errors {failures}")
        saturated = self._saturated(now)
        if saturated:  # early on the line: the live display cuts it at 200 characters
            parts.insert(2, saturated)
        if self.paused():  # by hand (docs/SPEC.md §5.10): no new work starts
            parts.insert(1, "PAUSED")
        return "  ".join(parts)

    def _saturated(self, now: int) -> str:
        """The generator's saturated seconds in the last RECENT_S whole seconds, with the
        latest reason: a window holding them is judged void (docs/SPEC.md §5.6), so whoever
        watches the run learns it while it runs, not from the verdict."""
        last = self.load.recorder.second_of(now)  # the current second is still open
        seconds = self.load.health.saturated_in(last - RECENT_S, last)
        if not seconds:
            return ""
        return f"SATURATED {len(seconds)}/{RECENT_S}s ({seconds[-1][1]})"

    def tick(self) -> None:
        if self.live:
            sys.stderr.write("\r\x1b[2K" + self.line()[:200])
            sys.stderr.flush()
        elif time.monotonic() - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = time.monotonic()
            log.info("progress: %s", self.line())

    def close(self) -> None:
        if self.live:
            sys.stderr.write("\n")
            sys.stderr.flush()
