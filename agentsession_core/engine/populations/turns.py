"""turns (docs/SPEC.md §4.3): agents that work in bursts.

Every registered session starts turns on its own Poisson schedule (turns_per_hour, from its
seeded stream). A turn wakes the actor, runs the next scripted step, keeps the actor awake
until the turn's length (U[0.5, 1.5) × turn_mean, from the turn's intended start) and then
parks it. One turn at a time: an arrival that falls inside a running turn waits for it, and
that wait shows as start lag (the turn is measured from its intended time).
"""

from __future__ import annotations

import logging

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.pacing import poisson_gap_ns, stream
from agentsession_core.engine.populations.base import Population
from agentsession_core.engine.session import Session, Stopped

log = logging.getLogger("agentsession")


class TurnsPopulation(Population):
    kind = "turns"

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.turns_started = 0
        ctx.registers = True

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
        while not self.ctx.stopping.is_set():
            intended += poisson_gap_ns(arrivals, self.level / 3600.0)
            if self.ctx.intended_log is not None:
                self.ctx.intended_log.append(("arrival", session.id, intended - start_ns))
            if not await self.ctx.wait_until(intended):
                return
            self.turns_started += 1
            length_ns = int(
                lengths.uniform(0.5, 1.5) * self.ctx.params.population.turn_mean_seconds * 1e9
            )
            try:
                await self._turn(session, intended, length_ns)
            except Stopped:
                return

    async def _turn(self, session: Session, intended_ns: int, length_ns: int) -> None:
        if await session.turn(intended_ns) and await self.ctx.wait_until(intended_ns + length_ns):
            await session.hibernate()
