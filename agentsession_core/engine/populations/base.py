"""What every population shares: the session table, spawning on an intended-time
schedule, registration with its deadline (docs/SPEC.md §4.2) and a bounded stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from agentsession_core.engine.backoff import Backoff
from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.pacing import ramp_time_ns
from agentsession_core.engine.session import Session, StepFailed, Stopped
from agentsession_core.errors import AgentsessionError
from agentsession_core.measure.health import is_request_row

if TYPE_CHECKING:
    from agentsession_core.measure.recorder import Recorder

log = logging.getLogger("agentsession")

REGISTRATION_IN_FLIGHT = 1024  # registrations started but not finished, at most


class RegistrationError(AgentsessionError):
    """Registration missed its deadline: the run fails, and cleanup deletes every actor it
    created (docs/SPEC.md §3.5)."""


def failure_line(failed: StepFailed) -> str:
    """`CreateActor RESOURCE_EXHAUSTED (quota of 7 actors reached)`: what failed, without
    the actor's name, for one-line summaries."""
    call = failed.where.split(": ", 1)[-1]
    return f"{call} {failed.error.code} ({failed.error.message})"


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
        self.last_start_failure: str | None = None  # failure_line of the latest failed start
        self.paused = False  # by hand (run/live_control.py): no new work starts
        self._pause_waiters: set[asyncio.Future[None]] = set()

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

    def set_paused(self, paused: bool) -> None:
        """Pause or resume by hand (docs/SPEC.md §5.10): while paused no new swap, turn or
        step starts and nothing is deleted; work already in flight finishes."""
        self.paused = paused
        if not paused:
            for waiter in list(self._pause_waiters):
                if not waiter.done():
                    waiter.set_result(None)

    async def wait_while_paused(self) -> bool:
        """Wait out a pause (a stop ends the wait too); True when there was one to wait out,
        so the caller restarts its clock rather than owing the paused seconds."""
        if not self.paused:
            return False
        waiter = asyncio.get_running_loop().create_future()
        self._pause_waiters.add(waiter)
        self.ctx.stopping.sleepers.add(waiter)  # a stop resolves it (StopSignal)
        try:
            await waiter
        finally:
            self._pause_waiters.discard(waiter)
            self.ctx.stopping.sleepers.discard(waiter)
        return True

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

    @property
    def tasks_in_flight(self) -> int:
        return len(self._tasks)

    def new_session(self) -> Session:
        session = Session(self.ctx, self.ctx.first_session + len(self.sessions))
        self.sessions.append(session)
        return session

    def spawn_times(self, count: int, start_ns: int) -> list[int]:
        """Intended start times at the spawn rate (open schedule)."""
        rate = self.ctx.params.population.spawn_rate
        return [ramp_time_ns(start_ns, rate, i) for i in range(count)]

    async def start_session(
        self, session: Session, intended_ns: int, *, prime: bool, deadline_ns: int | None = None
    ) -> bool:
        """Start one session at its intended time. A CreateActor that fails is retried
        (with backoff, each retry booked from its own time) until the run stops or the
        deadline passes, so a capacity refusal never quietly shrinks the population and a
        quota never keeps it retrying forever. False on stop or at the deadline."""
        backoff = Backoff()
        while await self.ctx.wait_until(intended_ns):
            if deadline_ns is not None and now_ns() >= deadline_ns:
                return False
            try:
                await session.start(intended_ns, prime=prime)
                return True
            except StepFailed as failed:
                self.last_start_failure = failure_line(failed)
                if session.created:  # created, then failed: the session handles it
                    try:
                        await session.handle(failed, registering=True)
                    except Stopped:
                        return False
                    return True
                session.note_failure(failed)
            except Stopped:
                return False
            intended_ns = now_ns() + backoff.next_ns()
        return False

    def registration_failed(self, registered: int, wanted: int, deadline_s: float) -> None:
        """Raise the one line a run that could not register ends with."""
        why = self.last_start_failure or self._failures_while_registering() or "no answer in time"
        raise RegistrationError(
            f"registration: {registered} of {wanted} sessions registered before the "
            f"{deadline_s:g} s deadline: {why}"
        )

    def _failures_while_registering(self) -> str | None:
        """The failure booked most often so far, with its row and count: what kept sessions
        from being registered when every call was retried rather than given up on (a router
        answering RESOURCE_EXHAUSTED to every first touch: issue 38 saw 3,690 of them and
        the line said "no answer in time")."""
        found: Counter[tuple[str, str]] = Counter()
        for key, stats in self.ctx.recorder.totals().rows.items():
            if is_request_row(key):
                for error, count in stats.errors.items():
                    found[(key[1], error)] += count
        if not found:
            return None
        (row, error), count = found.most_common(1)[0]
        return f"{row} failed {count} times, most often {error}"

    async def register_all(self, *, prime: bool) -> None:
        """docs/SPEC.md §4.2 registration: every session's actor is created at the spawn rate,
        runs step 1 as soon as it serves (prime) and is parked (booked *_Register); then
        wait until registration has been quiet for registration_quiet_seconds.

        Sessions are made as they fall due, at most REGISTRATION_IN_FLIGHT at a time, so a
        100k population never holds 100k coroutines at once; a start held back by that bound
        shows as start lag, measured from its intended time.

        The whole of it has a deadline (PopulationParams.registration_deadline): a substrate
        that refuses CreateActor (a quota) ends the run with one line naming the refusal
        (RegistrationError), and cleanup deletes the actors already created."""
        params = self.ctx.params.population
        start = now_ns()
        deadline_s = params.registration_deadline()
        gate = asyncio.Semaphore(REGISTRATION_IN_FLIGHT)
        registered = 0

        async def register(session: Session, intended_ns: int) -> None:
            nonlocal registered
            try:
                # Awaited first, then added: `registered += await ...` would read the count
                # before the await and lose every other task's update in between.
                started = await self.start_session(session, intended_ns, prime=prime)
                if started:
                    registered += 1
            finally:
                gate.release()

        async def spawn_all() -> None:
            async with asyncio.TaskGroup() as group:
                for i in range(params.sessions):
                    intended = ramp_time_ns(start, params.spawn_rate, i)
                    if not await self.ctx.wait_until(intended):
                        break
                    await gate.acquire()
                    group.create_task(register(self.new_session(), intended))

        with contextlib.suppress(TimeoutError):  # the starts in flight are cancelled (booked)
            async with asyncio.timeout(deadline_s):
                await spawn_all()
        if registered < params.sessions and not self.ctx.stopping.is_set():
            self.registration_failed(registered, params.sessions, deadline_s)
        log.info("registration: %d of %d sessions registered", registered, params.sessions)
        # Registration is over when it has been quiet this long (or the run stops).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(params.registration_quiet_seconds):
                await self.ctx.stopping.wait()

    def states(self) -> Counter[str]:
        return Counter(s.state for s in self.sessions)

    # ------------------------------------------------------------ what only some populations have
    def gauges(self) -> dict[str, dict[str, int]]:
        """Gauges beyond sessions-by-state, sampled once a second: name -> {state: n}."""
        return {}

    def substrate_back(self) -> None:
        """The substrate answers again after the watchdog saw it stop (engine/watchdog.py):
        what the population believes of its actors may be stale (turnover checks its
        resident set)."""

    def problem(self) -> str | None:
        """One line when the load was not what was asked (a turnover whose resident set
        stayed short): a plain run ends failed with it, not "completed" (run/single.py)."""
        return None

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
