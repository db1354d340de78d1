"""spawn (docs/SPEC.md §4.5): cohorts of new actors, each measured from its CreateActor
until it is ready.

Every `cohort_period_seconds` from the steady start (never while the last cohort still runs:
a cohort due then starts as soon as it ended) a cohort of `sessions` × level new actors is
created, at `spawn_rate` per second from the cohort's start or, with `at_once`, all at its
start. An actor is **ready** when its first scripted step has succeeded: CreateActor, the
first touch until it serves, step 1 (Session.start with prime), so an actor that answers a
ping but cannot do work is not ready. Its time to ready runs from its own intended
CreateActor (`summary`/ActorTimeToReady); the cohort's marks run from the cohort's start
(engine/populations/cohort.py). A ready actor is parked by the lifecycle mode at once, so it
frees its worker for the rest of the cohort (lifecycle `none` keeps every ready actor
running until the cohort ends, as a platform that must hold the whole cohort at once); a
CreateActor refused for capacity or an outage is retried with the engine's backoff, each
attempt booked from its own time. An actor not ready by `cohort_deadline_seconds` after the
cohort's start, or refused for good, or whose first touch or step 1 failed, is a failure of
its cohort (no replacement: the cohort measures the actors it asked for). A crash is counted
on `actor`/CrashCount. Once every actor is ready or failed, the cohort's actors are deleted
(booked `grpc`/DeleteActor; one that cannot be is left to the run's cleanup) and the cohort
is over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from agentsession_core.engine.backoff import Backoff, transient
from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.pacing import ramp_time_ns
from agentsession_core.engine.population_params import SpawnParams, settings_of
from agentsession_core.engine.populations.base import Population, failure_line
from agentsession_core.engine.populations.cohort import CohortBook
from agentsession_core.engine.session import Session, StepFailed, Stopped
from agentsession_core.measure.stats import (
    ACTOR_READY_ROW,
    ALL_READY_ROW,
    CONTROL_KIND,
    CRASH_ROW,
    READY_MARK,
)
from agentsession_core.substrate.errors import SubstrateError

log = logging.getLogger("agentsession")

DEADLINE = "DEADLINE_EXCEEDED"  # an actor not ready by its cohort's deadline


class CohortSession(Session):
    """A session that says when its first step succeeded: the spawn's ready."""

    __slots__ = ("on_ready",)

    def __init__(self, ctx: RunContext, sid: int) -> None:
        super().__init__(ctx, sid)
        self.on_ready: Callable[[int], None] | None = None  # called once, at the first step's end

    async def run_step(self, intended_ns: int) -> None:
        await super().run_step(intended_ns)
        if self.on_ready is not None:
            ready, self.on_ready = self.on_ready, None
            ready(now_ns())


def crashed_outside_a_step(failed: StepFailed) -> bool:
    """A crash Session has not counted itself (it counts those inside a step's ops)."""
    return failed.error.crashed and ": step " not in failed.where


async def delete_cohort(ctx: RunContext, names: list[str], concurrency: int) -> int:
    """Delete a cohort's actors (SuspendActor + DeleteActor, booked as DeleteActor), at most
    `concurrency` at once; returns how many could not be (the run's cleanup retries them)."""
    row = ctx.recorder.row(CONTROL_KIND, "DeleteActor")
    gate = asyncio.Semaphore(concurrency)
    left = 0

    async def delete(name: str) -> None:
        nonlocal left
        async with gate:
            sent = now_ns()
            try:
                await ctx.ledger.remove(ctx.substrate, name)
            except SubstrateError as exc:
                row.fail(sent, sent, now_ns(), exc.code)
                left += 1
                return
            row.ok(sent, sent, now_ns())

    await asyncio.gather(*(delete(name) for name in names))
    return left


class SpawnPopulation(Population):
    kind = "spawn"

    @property
    def settings(self) -> SpawnParams:
        """This population's own settings (its kind's model)."""
        return settings_of(self.ctx.params.population, SpawnParams)

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        ctx.registers = False  # a ready actor's park is the spawn's own: SuspendActor
        ctx.primes = True
        self._next_id = 0
        self.cohorts_started = 0
        self.cohorts_complete = 0

    @property
    def cohort_size(self) -> int:
        return max(1, round(self.settings.sessions * self.level_multiplier))

    async def register(self) -> None:
        """Nothing to register: every cohort creates its own actors in the hold."""

    async def fill(self) -> None:
        await super().fill()
        start = self.steady_start_ns if self.steady_start_ns is not None else now_ns()
        self.spawn(self._cohorts(start), "spawn-cohorts")

    async def _cohorts(self, t0: int) -> None:
        period_ns = int(self.settings.cohort_period_seconds * 1e9)
        k = 0
        while await self.ctx.wait_until(t0 + k * period_ns):
            if self.paused:  # by hand: a cohort due in the pause is not owed
                await self.wait_while_paused()
            else:
                await self.cohort(now_ns())
            if self.ctx.stopping.is_set():
                return
            k += 1
            behind = (now_ns() - t0) // period_ns
            if behind > k:  # the cohort outran its period: the next starts now, not later
                k = int(behind)

    def _new_session(self) -> CohortSession:
        session = CohortSession(self.ctx, self.ctx.first_session + self._next_id)
        self._next_id += 1
        return session

    async def cohort(self, start_ns: int) -> CohortBook:
        """One cohort from `start_ns`: create, wait for ready, delete. Returns its book."""
        params = self.settings
        n = self.cohort_size
        book = CohortBook(
            self.ctx.recorder,
            actor_row=ACTOR_READY_ROW,
            all_row=ALL_READY_ROW,
            mark=READY_MARK,
            n=n,
            percents=params.cohort_percentiles,
            start_ns=start_ns,
        )
        deadline_ns = start_ns + int(params.cohort_deadline_seconds * 1e9)
        self.cohorts_started += 1
        sessions: list[CohortSession] = []
        tasks = []
        for i in range(n):
            intended = start_ns if params.at_once else ramp_time_ns(start_ns, params.spawn_rate, i)
            session = self._new_session()
            sessions.append(session)
            tasks.append(asyncio.create_task(self._actor(session, intended, deadline_ns, book)))
        self.sessions = list(sessions)  # the current cohort, for the sessions gauge
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
        if self.ctx.stopping.is_set():  # cut short by the stop: nothing more is booked
            book.abandon()
            return book
        book.close(now_ns())
        if book.marks.complete:
            self.cohorts_complete += 1
        else:
            log.warning(
                "spawn cohort %d: %d of %d actors ready within %g s (%d failed)%s",
                self.cohorts_started,
                book.marks.done,
                n,
                params.cohort_deadline_seconds,
                book.marks.failed,
                f": {self.last_start_failure}" if self.last_start_failure else "",
            )
        live = set(self.ctx.ledger.live)
        names = [s.actor for s in sessions if s.actor in live]
        await self._count_crashed([s.actor for s in sessions if s.on_ready is None], live)
        await delete_cohort(self.ctx, names, self.ctx.params.cleanup.concurrency)
        self.sessions = []
        return book

    async def _count_crashed(self, ready: list[str], live: set[str]) -> None:
        """A worker that died during the cohort took the ready actors it held with it, and
        nothing the cohort still did failed for it: only the substrate's listing says so.
        One ListActors at the cohort's end books CrashCount for each ready actor it shows
        CRASHED (issue 38: a worker killed mid-cohort went unseen, exit 0)."""
        mine = {name for name in ready if name in live}
        if not mine:
            return
        try:
            listed = await self.ctx.substrate.list_actors(self.ctx.atespace)
        except SubstrateError as exc:
            log.warning(
                "spawn cohort %d: its actors could not be listed to count crashes: %s",
                self.cohorts_started,
                exc.code,
            )
            return
        crashed = sorted(a.name for a in listed if a.name in mine and a.status == "CRASHED")
        if not crashed:
            return
        row = self.ctx.recorder.row(*CRASH_ROW)
        at = now_ns()
        row.event(at, len(crashed))
        log.warning(
            "spawn cohort %d: %d of its ready actors crashed before it ended (%s): a worker "
            "that held them died",
            self.cohorts_started,
            len(crashed),
            ", ".join(crashed[:5]) + (" …" if len(crashed) > 5 else ""),
        )

    async def _actor(
        self, session: CohortSession, intended_ns: int, deadline_ns: int, book: CohortBook
    ) -> None:
        """One actor of the cohort, from its intended CreateActor to ready (or its failure);
        the deadline stops counting once it is ready, so its park is never cut short."""
        sent: int | None = None
        timeout = asyncio.timeout((deadline_ns - now_ns()) / 1e9)

        def ready(at_ns: int) -> None:
            timeout.reschedule(None)
            book.done(intended_ns, sent if sent is not None else intended_ns, at_ns)

        session.on_ready = ready
        try:
            async with timeout:
                backoff = Backoff()
                attempt = intended_ns
                while await self.ctx.wait_until(attempt):
                    sent = sent if sent is not None else now_ns()
                    try:
                        await session.start(attempt, prime=True)
                        return
                    except StepFailed as failed:
                        self.last_start_failure = failure_line(failed)
                        if crashed_outside_a_step(failed):
                            self.ctx.recorder.row(*CRASH_ROW).event(now_ns())
                        session.note_failure(failed)  # a misconfigured request is said once
                        if session.created or not transient(failed.error):
                            book.failed(intended_ns, sent, now_ns(), failed.error.code)
                            return
                    attempt = now_ns() + backoff.next_ns()
        except TimeoutError:
            if session.on_ready is not None:
                # A failure at the deadline, never a negative latency: an actor whose turn in
                # the ramp fell after the cohort's deadline never started, and is booked as
                # failing the moment it was due (issue 38: -699 ms with a 1 ms deadline).
                at = now_ns()
                due = min(intended_ns, at)
                book.failed(due, min(sent if sent is not None else due, at), at, DEADLINE)
                if self.last_start_failure is None:
                    self.last_start_failure = f"{session.actor}: not ready by the deadline"
        except Stopped:
            pass  # the run stopped: the cohort's figures are partial and not booked

    def problem(self) -> str | None:
        """A plain run in which no cohort was complete measured no spawn: it says so."""
        if self.cohorts_started and not self.cohorts_complete:
            return (
                f"spawn: none of {self.cohorts_started} cohorts had every actor ready "
                f"(last failure: {self.last_start_failure or 'none recorded'})"
            )
        return None

    def gauges(self) -> dict[str, dict[str, int]]:
        done = {"started": self.cohorts_started, "complete": self.cohorts_complete}
        return {"spawn_cohorts": done}
