"""closed (docs/SPEC.md §4.1): N sessions, each looping think → step forever, started at the spawn
rate. The level is the number of sessions; raising it spawns more, lowering it retires the
newest ones after their current turn.

Registration is the spawn ramp: it ends when every session has started (its actor created and
serving), so the hold measures the whole population, or fails the run at its deadline. In
lifecycle `none` each session runs step 1 as soon as its actor serves (docs/SPEC.md §4.2's
registration rule), so a script whose first think is long (personal-assistant-light: 55 min)
does not measure empty sandboxes until then.

Every step that falls due — its think over — is booked as a `closed`/StepsDue event at its
intended time: the think model's own rate, which achieved_rps is judged against
(docs/SPEC.md §6).
"""

from __future__ import annotations

import asyncio
import logging

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.populations.base import Population
from agentsession_core.engine.session import Session, Stopped
from agentsession_core.measure.stats import STEPS_DUE_ROW

log = logging.getLogger("agentsession")


class ClosedPopulation(Population):
    kind = "closed"

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self._retired: set[int] = set()
        ctx.primes = ctx.params.population.lifecycle_mode == "none"
        self._due = ctx.recorder.row(*STEPS_DUE_ROW)

    async def register(self) -> None:
        params = self.ctx.params.population
        deadline_s = params.registration_deadline()
        started = self._grow(params.sessions, deadline_s)
        if not started:
            return
        done, pending = await asyncio.wait(started, timeout=deadline_s)
        registered = sum(1 for f in done if f.result())
        if self.ctx.stopping.is_set():
            return
        if pending or registered < len(started):
            self.registration_failed(registered, len(started), deadline_s)
        log.info("registration: %d of %d sessions registered", registered, len(started))

    def _grow(self, target: int, deadline_s: float) -> list[asyncio.Future[bool]]:
        """Start sessions up to `target` active ones; each future says whether its session
        started before the deadline (one that did not is retired)."""
        active = [s for s in self.sessions if s.id not in self._retired]
        new = [self.new_session() for _ in range(max(0, target - len(active)))]
        deadline_ns = now_ns() + int(deadline_s * 1e9)
        loop = asyncio.get_running_loop()
        started: list[asyncio.Future[bool]] = []
        for session, intended in zip(new, self.spawn_times(len(new), now_ns()), strict=True):
            future: asyncio.Future[bool] = loop.create_future()
            started.append(future)
            self.spawn(self._live(session, intended, deadline_ns, future), f"session-{session.id}")
        return started

    async def _live(
        self, session: Session, intended_ns: int, deadline_ns: int, started: asyncio.Future[bool]
    ) -> None:
        ok = False
        try:
            ok = await self.start_session(
                session, intended_ns, prime=self.ctx.primes, deadline_ns=deadline_ns
            )
        finally:
            started.set_result(ok)
        if not ok:
            self._retired.add(session.id)
            return
        try:
            while not self.ctx.stopping.is_set() and session.id not in self._retired:
                await session.think_and_step(due=self._due, paused=self.wait_while_paused)
        except Stopped:
            pass

    def set_level(self, multiplier: float) -> None:
        super().set_level(multiplier)
        target = max(1, round(self.ctx.params.population.sessions * multiplier))
        active = [s for s in self.sessions if s.id not in self._retired]
        if target > len(active):
            deadline_s = self.ctx.params.population.registration_deadline(target - len(active))
            started = self._grow(target, deadline_s)
            self.spawn(self._report_grow(started, multiplier, deadline_s), "grow")
        else:
            for session in active[target:]:
                self._retired.add(session.id)

    async def _report_grow(
        self, started: list[asyncio.Future[bool]], multiplier: float, deadline_s: float
    ) -> None:
        """A level's new sessions that could not start by their deadline are retired; one
        line says so (the window's achieved_rps shows the missing load)."""
        results = await asyncio.gather(*started)
        if not all(results) and not self.ctx.stopping.is_set():
            log.warning(
                "level %.2gx: %d of %d new sessions started before the %g s deadline: %s",
                multiplier,
                sum(results),
                len(results),
                deadline_s,
                self.last_start_failure or "no answer in time",
            )
