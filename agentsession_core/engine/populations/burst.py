"""burst (docs/SPEC.md §4.6): K parked actors woken at once, then parked at once, every
period — the morning when every user comes back.

Registration is turnover's (docs/SPEC.md §4.2): `sessions` actors are created at the spawn
rate, each runs step 1 as soon as it serves and is parked (booked *_Register). From the steady
start, every `cohort_period_seconds` (never while the last burst still runs: one due then
starts as soon as it ended) a burst:

1. re-drives the parks that failed last time (outside the measured burst);
2. **resume burst**: every actor of the cohort (`sessions` × level, at most the registered
   ones) is woken at the same instant — implicitly by its first router request, or with
   ResumeActor first in explicit mode (Session.wake, booked WakeFirstTouch from the burst's
   start). An actor is resumed when that first request is answered
   (`summary`/ActorTimeToResume from the burst's start); the cohort's marks are
   `TimeToFirstResume_<k>pct` and `TimeToAllResumed` (engine/populations/cohort.py). Each
   resumed actor then runs its next scripted step (booked Step_*), so what is parked next
   holds fresh state;
3. **suspend burst**: once every woken actor's step has ended, every actor that is awake is
   parked by the lifecycle mode (SuspendActor, or PauseActor in `pause`) at the same instant:
   `summary`/ActorTimeToSuspend, `TimeToSuspend_<k>pct`, `TimeToAllSuspended`;
4. a wake that failed is handled as a session's failure is (docs/SPEC.md §3.4: retried at the
   next burst, or the actor replaced), so the cohort keeps its size.

An actor not resumed (or not parked) within `cohort_deadline_seconds` of its burst's start is
a failure of that burst.
"""

from __future__ import annotations

import asyncio
import logging

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.population_params import BurstParams, settings_of
from agentsession_core.engine.populations.base import Population, failure_line
from agentsession_core.engine.populations.cohort import CohortBook
from agentsession_core.engine.populations.spawn import DEADLINE
from agentsession_core.engine.session import HIBERNATE_ROW, Session, StepFailed, Stopped
from agentsession_core.measure.stats import (
    ACTOR_RESUME_ROW,
    ACTOR_SUSPEND_ROW,
    ALL_RESUMED_ROW,
    ALL_SUSPENDED_ROW,
    RESUME_MARK,
    SUSPEND_MARK,
)

log = logging.getLogger("agentsession")

HANDLE_AT_ONCE = 64  # failed wakes handled (retried, replaced) at once after a burst


class BurstPopulation(Population):
    kind = "burst"

    @property
    def settings(self) -> BurstParams:
        """This population's own settings (its kind's model)."""
        return settings_of(self.ctx.params.population, BurstParams)

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        ctx.registers = True
        ctx.primes = True
        self.bursts_started = 0
        self.bursts_complete = 0  # every actor resumed and every woken one parked again
        self._capped = False

    async def register(self) -> None:
        await self.register_all(prime=True)

    async def fill(self) -> None:
        await super().fill()
        start = self.steady_start_ns if self.steady_start_ns is not None else now_ns()
        self.spawn(self._bursts(start), "bursts")

    def cohort(self) -> list[Session]:
        """The sessions the next burst wakes: `sessions` × level of the registered ones."""
        registered = [s for s in self.sessions if s.created]
        want = max(1, round(self.settings.sessions * self.level_multiplier))
        if want > len(registered) and not self._capped:
            self._capped = True
            log.warning(
                "burst: level %.2gx asks for %d actors per burst; %d are registered, so a "
                "burst wakes %d",
                self.level_multiplier,
                want,
                len(registered),
                len(registered),
            )
        return registered[:want]

    async def _bursts(self, t0: int) -> None:
        period_ns = int(self.settings.cohort_period_seconds * 1e9)
        k = 0
        while await self.ctx.wait_until(t0 + k * period_ns):
            if self.paused:  # by hand: a burst due in the pause is not owed
                await self.wait_while_paused()
            else:
                await self.burst()
            if self.ctx.stopping.is_set():
                return
            k += 1
            behind = (now_ns() - t0) // period_ns
            if behind > k:  # the burst outran its period: the next starts now, not later
                k = int(behind)

    def _book(self, n: int, start_ns: int, *, resume: bool) -> CohortBook:
        params = self.settings
        return CohortBook(
            self.ctx.recorder,
            actor_row=ACTOR_RESUME_ROW if resume else ACTOR_SUSPEND_ROW,
            all_row=ALL_RESUMED_ROW if resume else ALL_SUSPENDED_ROW,
            mark=RESUME_MARK if resume else SUSPEND_MARK,
            n=n,
            percents=params.cohort_percentiles,
            start_ns=start_ns,
        )

    async def burst(self) -> tuple[CohortBook, CohortBook | None]:
        """One burst: resume the cohort at once, then park it at once. Returns the two books
        (no suspend book when nothing woke)."""
        cohort = self.cohort()
        self.bursts_started += 1
        redo = [s for s in cohort if s.needs_hibernate]
        if redo:  # last burst's failed parks, before this one's clock starts
            await asyncio.gather(*(s.hibernate() for s in redo))
        start = now_ns()
        resumed = self._book(len(cohort), start, resume=True)
        failed: list[tuple[Session, StepFailed]] = []
        deadline_s = self.settings.cohort_deadline_seconds
        await asyncio.gather(*(self._wake(s, start, deadline_s, resumed, failed) for s in cohort))
        if self.ctx.stopping.is_set():
            resumed.abandon()
            return resumed, None
        resumed.close(now_ns())
        awake = [s for s in cohort if s.awake]
        suspended: CohortBook | None = None
        if awake:
            start = now_ns()
            suspended = self._book(len(awake), start, resume=False)
            await asyncio.gather(*(self._park(s, start, deadline_s, suspended) for s in awake))
            if self.ctx.stopping.is_set():
                suspended.abandon()
                return resumed, suspended
            suspended.close(now_ns())
        complete = resumed.marks.complete and suspended is not None and suspended.marks.complete
        if complete:
            self.bursts_complete += 1
        else:
            log.warning(
                "burst %d: %d of %d actors resumed, %d of %d parked again within %g s%s",
                self.bursts_started,
                resumed.marks.done,
                len(cohort),
                suspended.marks.done if suspended else 0,
                len(awake),
                deadline_s,
                f": {self.last_start_failure}" if self.last_start_failure else "",
            )
        await self._handle(failed)
        return resumed, suspended

    async def _wake(
        self,
        session: Session,
        start_ns: int,
        deadline_s: float,
        book: CohortBook,
        failed: list[tuple[Session, StepFailed]],
    ) -> None:
        """Wake one actor from the burst's start, then run its next step (not under the
        deadline, which only the wake has)."""
        sent = now_ns()
        try:
            async with asyncio.timeout(deadline_s - (sent - start_ns) / 1e9):
                await session.wake(start_ns)
        except StepFailed as failure:
            book.failed(start_ns, sent, now_ns(), failure.error.code)
            self.last_start_failure = failure_line(failure)
            failed.append((session, failure))
            return
        except TimeoutError:
            book.failed(start_ns, sent, now_ns(), DEADLINE)
            self.last_start_failure = f"{session.actor}: not resumed within {deadline_s:g} s"
            session.needs_hibernate = True  # it may still wake: parked before the next burst
            return
        except Stopped:
            return
        book.done(start_ns, sent, now_ns())
        if self.settings.wake_probe == "none":
            return  # no step through the router: parked again as it is
        try:
            await session.run_step(now_ns())
        except StepFailed as failure:
            session.note_failure(failure)  # booked on its Step_ row; it stays in the cohort
        except Stopped:
            return

    async def _park(
        self, session: Session, start_ns: int, deadline_s: float, book: CohortBook
    ) -> None:
        sent = now_ns()
        try:
            async with asyncio.timeout(deadline_s - (sent - start_ns) / 1e9):
                parked = await session.hibernate(intended_ns=start_ns, may_replace=False)
        except TimeoutError:
            book.failed(start_ns, sent, now_ns(), DEADLINE)
            self.last_start_failure = f"{session.actor}: not parked within {deadline_s:g} s"
            session.needs_hibernate = True
            return
        if parked:
            book.done(start_ns, sent, now_ns())
        elif not self.ctx.stopping.is_set():
            mode = self.settings.lifecycle_mode
            book.failed(start_ns, sent, now_ns(), f"{HIBERNATE_ROW[mode]} failed")

    async def _handle(self, failed: list[tuple[Session, StepFailed]]) -> None:
        """The failed wakes, handled as any session's failure (docs/SPEC.md §3.4), a bounded
        number at once: a replacement keeps the cohort's size for the next burst."""
        gate = asyncio.Semaphore(HANDLE_AT_ONCE)

        async def handle(session: Session, failure: StepFailed) -> None:
            async with gate:
                try:
                    await session.handle(failure)
                except Stopped:
                    pass

        await asyncio.gather(*(handle(s, f) for s, f in failed))

    def problem(self) -> str | None:
        """A plain run in which no burst was complete measured no burst: it says so."""
        if self.bursts_started and not self.bursts_complete:
            return (
                f"burst: none of {self.bursts_started} bursts resumed and parked every actor "
                f"(last failure: {self.last_start_failure or 'none recorded'})"
            )
        return None

    def gauges(self) -> dict[str, dict[str, int]]:
        done = {"started": self.bursts_started, "complete": self.bursts_complete}
        return {"bursts": done}
