"""closed (docs/SPEC.md §4.1): N sessions, each looping think → step forever, started at the spawn
rate. The level is the number of sessions; raising it spawns more, lowering it retires the
newest ones after their current turn."""

from __future__ import annotations

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.populations.base import Population
from agentsession_core.engine.session import Session, Stopped


class ClosedPopulation(Population):
    kind = "closed"

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self._retired: set[int] = set()

    async def register(self) -> None:
        self._grow(self.ctx.params.population.sessions)
        # The spawn ramp is part of the load; registration ends when it is scheduled.

    def _grow(self, target: int) -> None:
        active = [s for s in self.sessions if s.id not in self._retired]
        new = [self.new_session() for _ in range(max(0, target - len(active)))]
        for session, intended in zip(new, self.spawn_times(len(new), now_ns()), strict=True):
            self.spawn(self._live(session, intended), f"session-{session.id}")

    async def _live(self, session: Session, intended_ns: int) -> None:
        if not await self.start_session(session, intended_ns, prime=False):
            return
        try:
            while not self.ctx.stopping.is_set() and session.id not in self._retired:
                await session.think_and_step()
        except Stopped:
            pass

    def set_level(self, multiplier: float) -> None:
        super().set_level(multiplier)
        target = max(1, round(self.ctx.params.population.sessions * multiplier))
        active = [s for s in self.sessions if s.id not in self._retired]
        if target > len(active):
            self._grow(target)
        else:
            for session in active[target:]:
                self._retired.add(session.id)
