"""Parks read back (docs/SPEC.md §3.4, NOT_SUSPENDED in implicit mode).

In implicit mode nothing the client sends after a park says whether the park happened: the
router wakes the actor on the first request, and a router that finds it still running simply
serves it, as fast as a warm actor. So a platform whose suspends silently fail would look
faster. What the client can know is the actor's state read back: on a seeded sample of parks
(`population.park_check_share`), once SuspendActor (or PauseActor) has answered, a task of
its own asks GetActor, booked as `grpc`/GetActor_ParkCheck: ok when the actor is parked, a
failure NOT_SUSPENDED when it is still RUNNING. The session's next wake is then booked
failed NOT_SUSPENDED instead of a TimeToWake sample.

Off the wake path: the park has already been booked and the session goes on; the check is one
control call per sampled park, never awaited by a turn. A check whose answer comes after the
session began a wake (or was replaced) cannot tell the park's outcome from the wake's, and is
booked cancelled. Unsampled parks are not checked: a platform that drops a share of its
suspends shows that share in the row's failure ratio, and its unchecked wakes still count as
wakes (the limit docs/SPEC.md states).
"""

from __future__ import annotations

import asyncio

from agentsession_core.engine.context import Parked, RunContext, now_ns
from agentsession_core.engine.pacing import stream
from agentsession_core.measure.stats import CONTROL_KIND
from agentsession_core.substrate.errors import NOT_SUSPENDED, SubstrateError
from agentsession_core.substrate.interface import reset_server_time, server_time_us

PARK_CHECK_ROW = (CONTROL_KIND, "GetActor_ParkCheck")
# States a park leaves behind, or on the way there.
PARKED_STATES = frozenset({"SUSPENDED", "SUSPENDING", "PAUSED", "PAUSING"})


class ParkCheck:
    def __init__(self, ctx: RunContext, share: float) -> None:
        self.ctx = ctx
        self.share = share
        self._rng = stream(ctx.params.seed, "park-check")
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    def of(cls, ctx: RunContext) -> ParkCheck | None:
        """The run's check, when it has one: implicit wakes that park, a share above 0."""
        population = ctx.params.population
        share = population.park_check_share
        if population.resume_mode != "implicit" or population.lifecycle_mode == "none":
            return None
        return cls(ctx, share) if share > 0 else None

    def after_park(self, session: Parked) -> None:
        """A park has been answered: read it back when the draw says so."""
        if self._rng.random() >= self.share or self.ctx.stopping.is_set():
            return
        task = asyncio.create_task(
            self._check(session, session.actor, session.wakes), name=f"park-check-{session.id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _check(self, session: Parked, actor: str, wakes: int) -> None:
        ctx = self.ctx
        row = ctx.recorder.row(*PARK_CHECK_ROW)
        reset_server_time()
        sent = now_ns()
        try:
            info = await ctx.substrate.get_actor(ctx.atespace, actor)
        except asyncio.CancelledError:
            row.cancelled(sent, now_ns())
            raise
        except SubstrateError as exc:
            if ctx.stopping.is_set():  # cleanup may have deleted it meanwhile
                row.cancelled(sent, now_ns())
            else:
                row.fail(sent, sent, now_ns(), exc.code)
            return
        done = now_ns()
        if session.actor != actor or session.wakes != wakes or ctx.stopping.is_set():
            row.cancelled(sent, done)  # woken or replaced since: the answer is not the park's
            return
        if info.status in PARKED_STATES:
            row.ok(sent, sent, done, 0, server_time_us())
            return
        row.fail(sent, sent, done, NOT_SUSPENDED)
        if info.status == "RUNNING":
            session.not_suspended = True
