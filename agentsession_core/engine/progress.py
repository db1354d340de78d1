"""What a person watching a run sees: one status line a second on a terminal, a plain log
line every few seconds otherwise (CI logs, cron mail)."""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING

from agentsession_core.engine.context import now_ns
from agentsession_core.engine.populations.turnover import TurnoverPopulation
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.stats import ROUTER_KIND, TIME_TO_WAKE_ROW

if TYPE_CHECKING:
    from agentsession_core.engine.engine import Engine

log = logging.getLogger("agentsession")

HEADLINE_ROWS = (TIME_TO_WAKE_ROW, (ROUTER_KIND, "WakeFirstTouch"))
PLAIN_EVERY_S = 10.0


class Progress:
    def __init__(self, engine: Engine, recorder: Recorder, *, live: bool) -> None:
        self.engine = engine
        self.recorder = recorder
        self.live = live
        self.started = time.monotonic()
        self._last_plain = 0.0

    def line(self) -> str:
        engine = self.engine
        rec = self.recorder
        now = now_ns()
        recent = rec.window(now - 10_000_000_000, now)
        states = engine.population.states()
        parts = [
            f"{engine.phase:<8}",
            f"{time.monotonic() - self.started:6.0f}s",
            "sessions " + " ".join(f"{k}={v}" for k, v in sorted(states.items())),
        ]
        if engine.params.population.kind == "turnover":
            woke = recent.row(*TIME_TO_WAKE_ROW)
            rate = woke.count / recent.duration_s if recent.duration_s else 0.0
            parts.append(f"swaps {rate:.1f}/{engine.population.level:.1f}/s")
            population = engine.population
            if isinstance(population, TurnoverPopulation):
                parts.append(f"resident {population.residents}/{population.awake}")
        for kind, name in HEADLINE_ROWS:
            stats = recent.row(kind, name)
            if stats.count:
                p50, p99 = stats.response.quantile(0.5), stats.response.quantile(0.99)
                parts.append(f"{name} p50 {p50:.0f}ms p99 {p99:.0f}ms")
        totals = rec.totals()
        failures = sum(s.failures for (k, _), s in totals.rows.items() if k != "generator")
        parts.append(f"errors {failures}")
        return "  ".join(parts)

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
