"""Intended-time schedules: seeded random streams, pacers and the tick-based dispatcher.

Modelled on vegeta's pacer: a Pacer only answers "when is the next arrival after t?", in
seconds since the schedule start. The Dispatcher turns those intended times into calls on the
event loop without ever waiting for the work it released (open model, no coordinated
omission): lateness shows up as start lag, never as a thinner schedule.

Reproducibility (SPEC §5.5): every random choice comes from ``stream(run_seed, *parts)``, a
``random.Random`` seeded from sha256 of the run seed and the parts, so a session's stream
depends only on (seed, session id, purpose), not on sharding or scheduling order.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import time
from collections.abc import Callable
from typing import Protocol

from agentsession_core.recorder import Row

NS_PER_S = 1_000_000_000


def derive_seed(run_seed: int, *parts: str | int) -> int:
    """A stable 64-bit seed for (run_seed, *parts); never Python's salted hash()."""
    text = "\x1f".join([f"i{run_seed}"] + [
        f"i{p}" if isinstance(p, int) else f"s{p}" for p in parts])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def stream(run_seed: int, *parts: str | int) -> random.Random:
    """The random stream for one purpose, e.g. stream(seed, "session", 17, "think")."""
    return random.Random(derive_seed(run_seed, *parts))


def think_jitter(rng: random.Random) -> float:
    """The think-time multiplier U[0.8, 1.2) (SPEC §3.3)."""
    return 0.8 + 0.4 * rng.random()


class Pacer(Protocol):
    """An arrival schedule in seconds since its start."""

    generation: int  # bumped on every rate change so a waiting dispatcher re-plans

    def next_after(self, t: float) -> float:
        """The next intended time strictly after t (the previous arrival, 0.0 at the start);
        math.inf while the rate is zero."""
        ...


class ConstantPacer:
    """Evenly spaced arrivals at rate_per_s: 1/r, 2/r, ..."""

    def __init__(self, rate_per_s: float) -> None:
        self.generation = 0
        self.rate_per_s = _checked_rate(rate_per_s)

    def set_rate(self, rate_per_s: float) -> None:
        self.rate_per_s = _checked_rate(rate_per_s)
        self.generation += 1

    def next_after(self, t: float) -> float:
        if self.rate_per_s == 0:
            return math.inf
        return t + 1.0 / self.rate_per_s


class PoissonPacer:
    """Poisson arrivals: exponential gaps with mean 1/rate drawn from a seeded stream.

    A rate change takes effect from the moment it is made: the exponential is memoryless,
    so re-drawing the pending gap at the new rate keeps the process exactly Poisson.
    """

    def __init__(self, rate_per_s: float, rng: random.Random) -> None:
        self.generation = 0
        self.rate_per_s = _checked_rate(rate_per_s)
        self.rng = rng

    @classmethod
    def per_hour(cls, rate_per_hour: float, rng: random.Random) -> PoissonPacer:
        return cls(_checked_rate(rate_per_hour, "rate_per_hour") / 3600.0, rng)

    def set_rate(self, rate_per_s: float) -> None:
        self.rate_per_s = _checked_rate(rate_per_s)
        self.generation += 1

    def set_rate_per_hour(self, rate_per_hour: float) -> None:
        self.set_rate(_checked_rate(rate_per_hour, "rate_per_hour") / 3600.0)

    def next_after(self, t: float) -> float:
        if self.rate_per_s == 0:
            return math.inf
        return t + self.rng.expovariate(self.rate_per_s)


def _checked_rate(rate: float, parameter: str = "rate_per_s") -> float:
    if not (rate >= 0 and math.isfinite(rate)):
        raise ValueError(f"{parameter}: must be a finite number >= 0, got {rate!r}")
    return float(rate)


def intended_offsets(pacer: Pacer, until_s: float) -> list[float]:
    """The whole schedule up to until_s (for tests, plans and previews)."""
    out: list[float] = []
    t = pacer.next_after(0.0)
    while t <= until_s:
        out.append(t)
        t = pacer.next_after(t)
    return out


class Dispatcher:
    """Releases due arrivals in batches from one loop task.

    Each tick sleeps until the next intended time, but at least min_sleep_s: uvloop returns
    sub-millisecond sleeps at once, so shorter sleeps would busy-spin. On waking it calls
    on_due(intended_ns) for every arrival whose intended time has passed, in order, and goes
    back to sleep; on_due must only start work (create a task), never await it. An arrival is
    never released before its intended time. A rate change (pacer.generation) is noticed within
    max_sleep_s. With a lateness_row, each release books
    (intended, released, released) so the row's start lag is the dispatch lateness.
    """

    def __init__(self, *, min_sleep_s: float = 0.001, max_sleep_s: float = 0.05,
                 clock_ns: Callable[[], int] = time.monotonic_ns,
                 lateness_row: Row | None = None) -> None:
        self.min_sleep_s = min_sleep_s
        self.max_sleep_s = max_sleep_s
        self.clock_ns = clock_ns
        self.lateness_row = lateness_row
        self.released = 0

    async def run(self, pacer: Pacer, on_due: Callable[[int], None], stop: asyncio.Event,
                  start_ns: int) -> None:
        stop_waiter = asyncio.ensure_future(stop.wait())
        try:
            await self._run(pacer, on_due, stop, start_ns, stop_waiter)
        finally:
            stop_waiter.cancel()

    async def _run(self, pacer: Pacer, on_due: Callable[[int], None], stop: asyncio.Event,
                   start_ns: int, stop_waiter: asyncio.Future) -> None:
        clock = self.clock_ns
        row = self.lateness_row
        generation = pacer.generation
        previous = 0.0
        upcoming = pacer.next_after(previous)
        while not stop.is_set():
            if pacer.generation != generation:
                generation = pacer.generation
                elapsed = (clock() - start_ns) / NS_PER_S
                upcoming = pacer.next_after(max(previous, elapsed))
            now = clock()
            while upcoming != math.inf and start_ns + round(upcoming * NS_PER_S) <= now:
                intended = start_ns + round(upcoming * NS_PER_S)
                on_due(intended)
                self.released += 1
                if row is not None:
                    row.ok(intended, now, now)
                previous = upcoming
                upcoming = pacer.next_after(previous)
                if stop.is_set() or pacer.generation != generation:
                    break
            if stop.is_set() or pacer.generation != generation:
                continue
            if upcoming == math.inf:
                wait = self.max_sleep_s
            else:
                gap = (start_ns + round(upcoming * NS_PER_S) - clock()) / NS_PER_S
                wait = min(self.max_sleep_s, max(self.min_sleep_s, gap))
            await asyncio.wait((stop_waiter,), timeout=wait)
