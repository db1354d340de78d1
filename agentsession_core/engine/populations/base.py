"""What every population shares: the session table, spawning on an intended-time
schedule, registration (docs/SPEC.md §4.2) and a bounded stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.pacing import ramp_time_ns
from agentsession_core.engine.session import Session, StepFailed, Stopped

if TYPE_CHECKING:
    from agentsession_core.measure.recorder import Recorder

log = logging.getLogger("agentsession")

REGISTRATION_IN_FLIGHT = 1024  # registrations started but not finished, at most
START_RETRY_FIRST_NS = 200_000_000  # a refused CreateActor is retried after 0.2 s, 0.4 s, …
START_RETRY_MAX_NS = 5_000_000_000  # … up to every 5 s


class Population:
    """Base: subclasses implement register / fill / run and set_level."""

    kind = "base"

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.sessions: list[Session] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self.level_multiplier = 1.0
        self.steady_start_ns: int | None = None
        self.stopped_ns: int | None = None  # when stop began: the end of the load

    # ------------------------------------------------------------ phases
    async def register(self) -> None:
        """Create the sessions (and, where the population wants it, prime them)."""

    async def fill(self) -> None:
        """Bring the population to its steady state; marks steady_start_ns."""
        self.steady_start_ns = await self.ctx.steady_start()

    def set_level(self, multiplier: float) -> None:
        self.level_multiplier = multiplier

    @property
    def level(self) -> float:
        return self.ctx.params.population.level * self.level_multiplier

    # ------------------------------------------------------------ helpers
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("task %s failed: %r", task.get_name(), task.exception())

    def new_session(self) -> Session:
        session = Session(self.ctx, len(self.sessions))
        self.sessions.append(session)
        return session

    def spawn_times(self, count: int, start_ns: int) -> list[int]:
        """Intended start times at the spawn rate (open schedule)."""
        rate = self.ctx.params.population.spawn_rate
        return [ramp_time_ns(start_ns, rate, i) for i in range(count)]

    async def start_session(self, session: Session, intended_ns: int, *, prime: bool) -> bool:
        """Start one session at its intended time. A CreateActor that fails is retried
        (with backoff, each retry booked from its own time) until the run stops, so a
        capacity refusal never quietly shrinks the population. False only on stop."""
        backoff_ns = START_RETRY_FIRST_NS
        while await self.ctx.wait_until(intended_ns):
            try:
                await session.start(intended_ns, prime=prime)
                return True
            except StepFailed as failed:
                if session.created:  # created, then failed: the session handles it
                    await session.handle(failed, registering=True)
                    return True
                session.note_failure(failed)
            except Stopped:
                return False
            intended_ns = now_ns() + backoff_ns
            backoff_ns = min(2 * backoff_ns, START_RETRY_MAX_NS)
        return False

    async def register_all(self, *, prime: bool) -> None:
        """docs/SPEC.md §4.2 registration: every session's actor is created at the spawn rate,
        runs step 1 as soon as it serves (prime) and is parked (booked *_Register); then
        wait until registration has been quiet for registration_quiet_seconds.

        Sessions are made as they fall due, at most REGISTRATION_IN_FLIGHT at a time, so a
        100k population never holds 100k coroutines at once; a start held back by that bound
        shows as start lag, measured from its intended time."""
        params = self.ctx.params.population
        start = now_ns()
        gate = asyncio.Semaphore(REGISTRATION_IN_FLIGHT)
        registered = 0

        async def register(session: Session, intended_ns: int) -> None:
            nonlocal registered
            try:
                registered += await self.start_session(session, intended_ns, prime=prime)
            finally:
                gate.release()

        async with asyncio.TaskGroup() as group:
            for i in range(params.sessions):
                intended = ramp_time_ns(start, params.spawn_rate, i)
                if not await self.ctx.wait_until(intended):
                    break
                await gate.acquire()
                group.create_task(register(self.new_session(), intended))
        log.info("registration: %d of %d sessions registered", registered, params.sessions)
        # Registration is over when it has been quiet this long (or the run stops).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.ctx.stopping.wait(), params.registration_quiet_seconds)

    def states(self) -> Counter[str]:
        return Counter(s.state for s in self.sessions)

    # ------------------------------------------------------------ what only some populations have
    def gauges(self) -> dict[str, dict[str, int]]:
        """Gauges beyond sessions-by-state, sampled once a second: name -> {state: n}."""
        return {}

    def summary_rows(self, recorder: Recorder) -> dict[str, dict[str, Any]]:
        """stats.jsonl rows of this population's own phase at the end of the run:
        row kind -> measurements."""
        return {}

    async def stop(self, grace: float) -> None:
        """Stop guard: no new request after stop; in-flight work gets `grace` seconds, then
        it is cancelled (booked as cancelled, not failed)."""
        if self.stopped_ns is None:
            self.stopped_ns = now_ns()
        self.ctx.stopping.set()
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
