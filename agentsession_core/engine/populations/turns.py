"""turns (docs/SPEC.md §4.3): agents that work in bursts.

Every registered session starts turns on its own Poisson schedule (turns_per_hour, from its
seeded stream). A turn wakes the actor, runs the next scripted step, keeps the actor awake
until the turn's length (U[0.5, 1.5) × turn_mean from when the turn could start) and then
parks it. One turn at a time.

Arrivals are open-loop: each session's arrival clock is a chain of timer callbacks, apart
from its turns, that books every arrival at its intended time as a `turns`/Arrivals event
(the rate the schedule asks for, which achieved_rps is judged against, docs/SPEC.md §6) and
hands it to the session, whether or not the session is free. An arrival that falls while the
previous turn still runs waits for it; that wait is booked on its own row, `turns`/QueueWait
(from the arrival's intended time to when the turn could start), and the wake is measured
from when the turn could start, so the queue never shows as wake latency.
"""

from __future__ import annotations

import asyncio
import logging
import random

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.pacing import poisson_gap_ns, stream
from agentsession_core.engine.population_params import TurnsParams, settings_of
from agentsession_core.engine.populations.base import Population
from agentsession_core.engine.session import Session, Stopped
from agentsession_core.measure.stats import ARRIVALS_ROW, QUEUE_WAIT_ROW

log = logging.getLogger("agentsession")


class ArrivalClock:
    """One session's arrivals: drawn one ahead, each booked when its time comes."""

    __slots__ = ("due", "handle", "rng", "sid", "start_ns", "waiter")

    def __init__(self, sid: int, rng: random.Random, start_ns: int) -> None:
        self.sid = sid
        self.rng = rng
        self.start_ns = start_ns
        self.due: list[int] = []  # arrived, not yet started (intended times, oldest first)
        self.handle: asyncio.TimerHandle | None = None
        self.waiter: asyncio.Future[None] | None = None


class TurnsPopulation(Population):
    kind = "turns"

    @property
    def settings(self) -> TurnsParams:
        """This population's own settings (its kind's model)."""
        return settings_of(self.ctx.params.population, TurnsParams)

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.turns_started = 0
        ctx.registers = True
        ctx.primes = True
        self._arrivals = ctx.recorder.row(*ARRIVALS_ROW)
        self._queue_wait = ctx.recorder.row(*QUEUE_WAIT_ROW)
        self._clocks: list[ArrivalClock] = []

    async def register(self) -> None:
        await self.register_all(prime=True)

    async def fill(self) -> None:
        await super().fill()
        start = self.steady_start_ns or now_ns()
        for session in self.sessions:
            if session.created:
                rng = stream(self.ctx.params.seed, "session", session.id, "arrivals")
                clock = ArrivalClock(session.id, rng, start)
                self._clocks.append(clock)
                self._schedule(clock, start)
                self.spawn(self._turns(session, clock), f"turns-{session.id}")

    # ------------------------------------------------------------ the arrival clocks
    def _schedule(self, clock: ArrivalClock, previous_ns: int) -> None:
        """Draw the arrival after `previous_ns` and set the timer that books it."""
        intended = previous_ns + poisson_gap_ns(clock.rng, self.level / 3600.0)
        if self.ctx.intended_log is not None:
            self.ctx.intended_log.append(("arrival", clock.sid, intended - clock.start_ns))
        delay = max(0.0, (intended - now_ns()) / 1e9)
        clock.handle = asyncio.get_running_loop().call_later(delay, self._arrive, clock, intended)

    def _arrive(self, clock: ArrivalClock, intended_ns: int) -> None:
        if self.ctx.stopping.is_set():
            return
        if self.paused:  # by hand: the arrival is not booked and no turn starts for it
            self._schedule(clock, intended_ns)
            return
        woke = now_ns()
        self.ctx.dispatch_lag.ok(intended_ns, woke, woke)  # how late the clock fired
        self._arrivals.event(intended_ns)
        clock.due.append(intended_ns)
        if clock.waiter is not None and not clock.waiter.done():
            clock.waiter.set_result(None)
        self._schedule(clock, intended_ns)

    async def _next_arrival(self, clock: ArrivalClock) -> int | None:
        """The oldest arrival not yet started, waiting for one; None once the run stops."""
        stopping = self.ctx.stopping
        while not clock.due:
            if stopping.is_set():
                return None
            clock.waiter = asyncio.get_running_loop().create_future()
            stopping.sleepers.add(clock.waiter)  # a stop wakes it (StopSignal)
            try:
                await clock.waiter
            finally:
                stopping.sleepers.discard(clock.waiter)
                clock.waiter = None
        return None if stopping.is_set() else clock.due.pop(0)

    # ------------------------------------------------------------ the turns
    async def _turns(self, session: Session, clock: ArrivalClock) -> None:
        lengths = stream(self.ctx.params.seed, "session", session.id, "turn-length")
        free_ns = clock.start_ns  # when the session's previous turn ended
        while (intended := await self._next_arrival(clock)) is not None:
            could_start = max(intended, free_ns)
            # A zero wait is a sample too: QueueWait's percentiles are over every turn.
            self._queue_wait.ok(intended, could_start, could_start)
            self.turns_started += 1
            length_ns = int(lengths.uniform(0.5, 1.5) * self.settings.turn_mean_seconds * 1e9)
            try:
                await self._turn(session, could_start, length_ns)
            except Stopped:
                return
            free_ns = now_ns()

    async def _turn(self, session: Session, start_ns: int, length_ns: int) -> None:
        if await session.turn(start_ns) and await self.ctx.wait_until(start_ns + length_ns):
            await session.hibernate()

    async def stop(self, grace: float) -> None:
        for clock in self._clocks:  # no arrival after stop
            if clock.handle is not None:
                clock.handle.cancel()
        await super().stop(grace)
