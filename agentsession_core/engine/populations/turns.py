"""turns (docs/SPEC.md §4.3): agents that work in bursts.

Every registered session starts turns on its own Poisson schedule (turns_per_hour, from its
seeded stream). A turn wakes the actor, runs the next scripted step, keeps the actor awake
until the turn's length (U[0.5, 1.5) × turn_mean from when the turn could start) and then
parks it. One turn at a time: an arrival that falls while the previous turn still runs waits
for it. That wait is booked on its own row, `turns`/QueueWait (from the arrival's intended
time to when the turn could start), and the wake is measured from when the turn could start,
so the queue never shows as wake latency. Every arrival is booked as a `turns`/Arrivals event
at its intended time, whatever the queue: the rate the schedule asked for, which achieved_rps
is judged against (docs/SPEC.md §6).
"""

from __future__ import annotations

import logging

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.pacing import poisson_gap_ns, stream
from agentsession_core.engine.populations.base import Population
from agentsession_core.engine.session import Session, Stopped
from agentsession_core.measure.stats import ARRIVALS_ROW, QUEUE_WAIT_ROW

log = logging.getLogger("agentsession")


class TurnsPopulation(Population):
    kind = "turns"

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.turns_started = 0
        ctx.registers = True
        ctx.primes = True
        self._arrivals = ctx.recorder.row(*ARRIVALS_ROW)
        self._queue_wait = ctx.recorder.row(*QUEUE_WAIT_ROW)

    async def register(self) -> None:
        await self.register_all(prime=True)

    async def fill(self) -> None:
        await super().fill()
        start = self.steady_start_ns or now_ns()
        for session in self.sessions:
            if session.created:
                self.spawn(self._turns(session, start), f"turns-{session.id}")

    async def _turns(self, session: Session, start_ns: int) -> None:
        arrivals = stream(self.ctx.params.seed, "session", session.id, "arrivals")
        lengths = stream(self.ctx.params.seed, "session", session.id, "turn-length")
        intended = start_ns
        free_ns = start_ns  # when the session's previous turn ended
        while not self.ctx.stopping.is_set():
            intended += poisson_gap_ns(arrivals, self.level / 3600.0)
            if self.ctx.intended_log is not None:
                self.ctx.intended_log.append(("arrival", session.id, intended - start_ns))
            # The arrival is due at its intended time whether or not the session is free.
            self._arrivals.event(intended)
            could_start = max(intended, free_ns)
            if not await self.ctx.wait_until(could_start):
                return
            # A zero wait is a sample too: QueueWait's percentiles are over every arrival.
            self._queue_wait.ok(intended, could_start, could_start)
            self.turns_started += 1
            length_ns = int(
                lengths.uniform(0.5, 1.5) * self.ctx.params.population.turn_mean_seconds * 1e9
            )
            try:
                await self._turn(session, could_start, length_ns)
            except Stopped:
                return
            free_ns = now_ns()

    async def _turn(self, session: Session, start_ns: int, length_ns: int) -> None:
        if await session.turn(start_ns) and await self.ctx.wait_until(start_ns + length_ns):
            await session.hibernate()
