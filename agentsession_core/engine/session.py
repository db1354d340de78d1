"""One session's life (docs/SPEC.md §3): start, think, wake, step, hibernate; what a failure
makes it do (classify, replace) is its Recovery (recovery.py).

A Session owns one actor and a cursor into the script. Populations decide *when* a session
thinks, wakes or parks; the session decides *how*, books every request under its row with
intended / sent / done times, and maps every failure to an action through FailureClass.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from agentsession_core.engine import ops
from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.pacing import stream, think_jitter
from agentsession_core.engine.recovery import (
    REPLACE_AFTER,
    RETRY_BACKOFF_NS,
    Recovery,
    StepFailed,
    Stopped,
)
from agentsession_core.measure.stats import CONTROL_KIND, ROUTER_KIND, TIME_TO_WAKE_ROW
from agentsession_core.substrate.errors import (
    NOT_SUSPENDED,
    TIMEOUT,
    FailureClass,
    SubstrateError,
)
from agentsession_core.substrate.interface import ActorInfo, reset_server_time, server_time_us

if TYPE_CHECKING:
    from agentsession_core.measure.recorder import Row
    from agentsession_core.script import Step

log = logging.getLogger("agentsession")
T = TypeVar("T")

FIRST_TOUCH_DEADLINE = 120.0  # seconds a new actor gets to start serving

HIBERNATE_ROW = {
    "suspend": "SuspendActor",
    "suspend-async": "SuspendActorAsync",
    "pause": "PauseActor",
}


class Session(Recovery):
    # Slots and lazily made random streams: a parked session is a few hundred bytes, so one
    # generator process can hold 100k of them (bench/RESULTS.md, density).
    __slots__ = (
        "_payload_rng",
        "_think_rng",
        "actor",
        "awake",
        "created",
        "ctx",
        "cursor",
        "failures_in_a_row",
        "generation",
        "id",
        "needs_hibernate",
        "not_suspended",
        "part",
        "ready_ns",
        "state",
        "wake_given_up",
        "wakes",
    )

    def __init__(self, ctx: RunContext, sid: int) -> None:
        self.ctx = ctx
        self.id = sid
        self.generation = 0
        self.actor = f"{ctx.actor_prefix}-{sid}"
        self.cursor = 0
        self.part = ctx.part_of(sid)  # its script, for its whole life (replacements too)
        self.failures_in_a_row = 0
        self.awake = False
        self.created = False
        self.needs_hibernate = False
        # The last wake timed out on the client's side: the substrate may still complete it,
        # and then the actor holds a worker no resident counts (turnover parks it at once).
        self.wake_given_up = False
        # Wakes begun, and whether the last park was read back still RUNNING (park_check.py):
        # the next implicit wake is then no wake (docs/SPEC.md §3.4 NOT_SUSPENDED).
        self.wakes = 0
        self.not_suspended = False
        self.ready_ns = now_ns()  # when the current think started
        self.state = "new"  # for the sessions-by-state gauge
        self._think_rng: random.Random | None = None
        self._payload_rng: random.Random | None = None

    @property
    def think_rng(self) -> random.Random:
        # Made on first use: the stream depends only on (seed, session id), not on when.
        if self._think_rng is None:
            self._think_rng = stream(self.ctx.params.seed, "session", self.id, "think")
        return self._think_rng

    @property
    def payload_rng(self) -> random.Random:
        if self._payload_rng is None:
            self._payload_rng = stream(self.ctx.params.seed, "session", self.id, "payload")
        return self._payload_rng

    # ---------------------------------------------------------------- booking
    def row(self, kind: str, name: str) -> Row:
        return self.ctx.recorder.row(kind, name)  # cached by the recorder

    async def _booked(
        self, kind: str, name: str, intended_ns: int, call: Callable[[], Awaitable[T]]
    ) -> T:
        """Run one request and book it under (kind, name) from its intended time, with the
        server time its answers reported (interface.note_server_time)."""
        row = self.row(kind, name)
        reset_server_time()
        sent = now_ns()
        try:
            result = await call()
        except SubstrateError as exc:
            row.fail(intended_ns, sent, now_ns(), exc.code)
            raise
        except asyncio.CancelledError:
            row.cancelled(intended_ns, now_ns())
            raise
        nbytes = result if isinstance(result, int) else 0
        row.ok(intended_ns, sent, now_ns(), nbytes, server_time_us())
        return result

    # ---------------------------------------------------------------- the think gap
    def next_step(self) -> Step:
        return self.part.script.steps[self.cursor]

    def think_ns(self, step: Step) -> int:
        scale = self.ctx.params.think_scale
        # Zero-think runs (the generator benches, capacity probes) skip the jitter draw: the
        # think stream feeds nothing else, so every gap is 0 either way.
        gap = 0
        if scale:
            gap = int(step.think_seconds * scale * think_jitter(self.think_rng) * 1e9)
        if self.ctx.intended_log is not None:
            self.ctx.intended_log.append(("think", self.id, gap))
        return gap

    # ---------------------------------------------------------------- lifecycle
    async def start(self, intended_ns: int, *, prime: bool = False) -> None:
        """CreateActor, first touch until it serves, then (prime) step 1, then hibernate, so
        every later step starts from a hibernated actor. Populations that register
        (ctx.registers) book that first park as *_Register. Stop guard (docs/SPEC.md §4.3):
        after stop no CreateActor or first touch is sent (Stopped)."""
        ctx = self.ctx
        if ctx.stopping.is_set():
            raise Stopped
        self.state = "starting"
        try:
            await self._create(intended_ns)
        except SubstrateError as exc:
            if exc.code != "NOT_FOUND":
                raise StepFailed(exc, f"{self.actor}: CreateActor") from None
            # The atespace is gone: a substrate that lost its state (restarted on an empty
            # store) forgets it with the actors. Made again here, once, or every replacement
            # would fail the same way for the rest of the run (docs/SPEC.md §3.2).
            await self._ensure_atespace()
            try:
                await self._create(now_ns())
            except SubstrateError as again:
                raise StepFailed(again, f"{self.actor}: CreateActor") from None
        ctx.ledger.created_actor(self.actor)
        self.created = True
        if ctx.params.population.wake_probe == "none":
            # No request through the router (docs/SPEC.md §3.2): no first touch, no step 1;
            # parked at once, so its first wake is a resume like every later one.
            self.awake = True
            await self.hibernate(register=ctx.registers, may_replace=False)
            return
        await self._first_touch()
        self.awake = True
        if prime:
            await self.run_step(now_ns())
        await self.hibernate(register=ctx.registers, may_replace=False)

    async def _create(self, intended_ns: int) -> None:
        """CreateActor, booked; the ledger knows the name before it is sent (a lost answer
        may still have created it) and forgets it only on a definite refusal."""
        ctx = self.ctx
        namespace, template = ctx.params.target.template_ref
        retrying = ctx.ledger.creating(self.actor)
        # The name's pool, the same whenever this name is created (docs/SPEC.md §2.6); no
        # pools, no selector argument at all.
        pool = {} if ctx.pools is None else {"worker_selector": ctx.pools.selector(self.actor)}
        try:
            await self._booked(
                CONTROL_KIND,
                "CreateActor",
                intended_ns,
                lambda: ctx.substrate.create_actor(
                    ctx.atespace, self.actor, namespace, template, **pool
                ),
            )
        except SubstrateError as exc:
            if retrying and exc.code == "ALREADY_EXISTS":
                return  # our earlier attempt, whose answer was lost, created it
            if exc.status:  # a definite refusal: nothing to clean up
                ctx.ledger.not_created(self.actor)
            raise

    async def _ensure_atespace(self) -> None:
        ctx = self.ctx
        try:
            await ctx.substrate.ensure_atespace(ctx.atespace)
        except SubstrateError as exc:
            raise StepFailed(exc, f"{self.actor}: EnsureAtespace {ctx.atespace}") from None
        ctx.atespace_remade += 1
        if ctx.atespace_remade == 1:  # every session that meets it makes it again: said once
            log.warning("atespace %s was gone (CreateActor NOT_FOUND): made again", ctx.atespace)

    async def _first_touch(self) -> None:
        deadline = time.monotonic() + FIRST_TOUCH_DEADLINE
        intended = now_ns()
        while True:
            if self.ctx.stopping.is_set():
                raise Stopped
            try:
                await self._booked(ROUTER_KIND, "FirstTouch", intended, self._ping)
                return
            except SubstrateError as exc:
                if exc.failure_class is not FailureClass.RETRY_LATER or time.monotonic() > deadline:
                    raise StepFailed(exc, f"{self.actor}: first touch") from None
            await asyncio.sleep(0.2)

    async def _ping(self) -> int:
        ctx = self.ctx
        response = await ctx.substrate.request(
            ctx.atespace,
            self.actor,
            "ping",
            json={"message": "wake"},
            timeout=ctx.params.target.request_timeout_seconds,
        )
        return len(response.body)

    async def hibernate(
        self, *, register: bool = False, intended_ns: int | None = None, may_replace: bool = True
    ) -> bool:
        """Park the actor per lifecycle mode; a failure leaves needs_hibernate set so the next
        turn re-drives it before anything else, and an actor the substrate says is gone or
        crashed is replaced (not while it is being started: replace() starts the new one).
        Returns True when the actor is parked. After stop nothing is sent (docs/SPEC.md
        §4.3): cleanup suspends and deletes every actor."""
        ctx = self.ctx
        mode = ctx.params.population.lifecycle_mode
        if mode == "none" or ctx.stopping.is_set():
            self.ready_ns = now_ns()
            return False
        name = HIBERNATE_ROW[mode] + ("_Register" if register else "")
        substrate, a, n = ctx.substrate, ctx.atespace, self.actor
        self.state = "hibernating"

        async def call() -> None:
            if mode == "pause":
                await substrate.pause_actor(a, n)
            else:
                await substrate.suspend_actor(a, n, wait=mode == "suspend")

        try:
            await self._booked(CONTROL_KIND, name, intended_ns or now_ns(), call)
        except SubstrateError as exc:
            self.needs_hibernate = True
            self.state = "idle"
            action = self._note_failure(exc, f"{n}: {name}")
            if action is FailureClass.REPLACE and may_replace:
                await self.replace()
                return not self.awake
            self.ready_ns = now_ns()
            return False
        self.needs_hibernate = False
        self.awake = False
        self.state = "parked"
        self.ready_ns = now_ns()
        self.not_suspended = False
        if ctx.park_check is not None:  # a sample of parks read back, off this path
            ctx.park_check.after_park(self)
        return True

    async def resume(self, intended_ns: int) -> None:
        try:
            await self._booked(CONTROL_KIND, "ResumeActor", intended_ns, self._resume_call)
        except SubstrateError as exc:
            if exc.crashed:
                self.row("actor", "CrashCount").event(now_ns())
            raise StepFailed(exc, f"{self.actor}: ResumeActor") from None

    async def _resume_call(self) -> ActorInfo:
        """ResumeActor; `resumed: false` (the actor was already running: its suspend never
        happened) is a failure, NOT_SUSPENDED, never a wake (docs/SPEC.md §3.4)."""
        ctx = self.ctx
        info = await ctx.substrate.resume_actor(ctx.atespace, self.actor)
        if info.resumed is False:
            raise SubstrateError(
                NOT_SUSPENDED,
                f"ResumeActor answered resumed=false: actor {self.actor} was already "
                f"{info.status} (its suspend did not happen)",
            )
        return info

    def _not_suspended(
        self, rows: list[tuple[Row, int]], intended_ns: int, first_touch: bool
    ) -> None:
        """Implicit mode: the last park was read back still RUNNING (park_check.py), so this
        wake would wake nothing: booked failed NOT_SUSPENDED, no request sent."""
        self.not_suspended = False
        self.awake = True
        self.state = "idle"
        done = now_ns()
        if first_touch:
            rows.append((self.row(ROUTER_KIND, "WakeFirstTouch"), intended_ns))
        for row, intended in rows:
            row.fail(intended, done, done, NOT_SUSPENDED)
        error = SubstrateError(
            NOT_SUSPENDED, f"actor {self.actor} was read back RUNNING after its park"
        )
        raise StepFailed(error, f"{self.actor}: wake")

    async def wake(
        self, intended_ns: int, *, first_touch: bool = True, time_to_wake: bool = False
    ) -> None:
        """Wake the actor: ResumeActor first in explicit mode, then the probe request.
        WakeFirstTouch runs from the probe's intended time (the end of the think, or the end
        of ResumeActor); TimeToWake runs from `intended_ns` (a turnover tick) to the answer."""
        if self.ctx.stopping.is_set():
            raise Stopped
        self.state = "waking"
        self.wake_given_up = False
        self.wakes += 1
        rows = []
        if time_to_wake:
            rows.append((self.row(*TIME_TO_WAKE_ROW), intended_ns))
            if self.part.time_to_wake is not None:  # a mix: the script's own row beside it
                rows.append((self.row(*self.part.time_to_wake), intended_ns))
            if self.ctx.pools is not None:  # beside it, per pool, so a slow pool shows
                rows.append((self.row(*self.ctx.pools.wake_row(self.actor)), intended_ns))
        population = self.ctx.params.population
        if population.resume_mode == "explicit" and population.lifecycle_mode != "none":
            sent = now_ns()
            try:
                await self.resume(intended_ns)
            except StepFailed as failed:
                # The wake failed before its probe: book it as a failed wake all the same.
                for row, intended in rows:
                    row.fail(intended, sent, now_ns(), failed.error.code)
                if first_touch:
                    self.row(ROUTER_KIND, "WakeFirstTouch").fail(
                        intended_ns, sent, now_ns(), failed.error.code
                    )
                if failed.error.code == NOT_SUSPENDED:  # running all along, on its worker
                    self.awake = True
                    self.state = "idle"
                else:
                    self.state = "parked"
                raise
            self.awake = True  # RUNNING now, holding a worker, whatever the probe says
            if population.wake_probe == "none":  # the wake ends at ResumeActor's answer
                self._resumed(rows, sent)
                return
            probe_intended = now_ns()
        else:
            if self.not_suspended:
                self._not_suspended(rows, intended_ns, first_touch)
            probe_intended = intended_ns
        if first_touch:
            rows.append((self.row(ROUTER_KIND, "WakeFirstTouch"), probe_intended))
        reset_server_time()
        sent = now_ns()
        try:
            nbytes = await self._ping()
        except SubstrateError as exc:
            for row, intended in rows:
                row.fail(intended, sent, now_ns(), exc.code)
            if exc.crashed:
                self.row("actor", "CrashCount").event(now_ns())
            self.state = "idle" if self.awake else "parked"
            self.wake_given_up = exc.code == TIMEOUT and not self.awake
            raise StepFailed(exc, f"{self.actor}: wake probe") from None
        except asyncio.CancelledError:
            for row, intended in rows:
                row.cancelled(intended, now_ns())
            raise
        done = now_ns()
        server_us = server_time_us()
        for row, intended in rows:
            row.ok(intended, sent, done, nbytes, server_us)
        self.awake = True
        self.state = "idle"

    def _resumed(self, rows: list[tuple[Row, int]], sent: int) -> None:
        """wake_probe none: the wake's rows booked at ResumeActor's answer, with its server
        time (docs/SPEC.md §3.3)."""
        done, server_us = now_ns(), server_time_us()
        for row, intended in rows:
            row.ok(intended, sent, done, 0, server_us)
        self.state = "idle"

    async def run_step(self, intended_ns: int) -> None:
        """The ops of the step under the cursor, booked together as Step_<name> (in a mix
        Step_<name>/<script>); the first failing op ends the step. The cursor advances only
        when the step succeeds."""
        ctx = self.ctx
        step = self.next_step()
        row = self.row(ROUTER_KIND, self.part.step_rows[self.cursor])
        reset_server_time()  # the step's server time is the sum over its ops
        sent = now_ns()
        nbytes = 0
        self.state = "stepping"
        for index, op in enumerate(step.ops, start=1):
            if ctx.stopping.is_set():
                # Stop guard: after stop no new request starts.
                row.cancelled(intended_ns, now_ns())
                raise Stopped
            try:
                nbytes += await ops.perform(
                    ctx.substrate,
                    ctx.atespace,
                    self.actor,
                    op,
                    self.payload_rng,
                    ctx.params.target.request_timeout_seconds,
                )
            except SubstrateError as exc:
                row.fail(intended_ns, sent, now_ns(), f"op {index} {op.kind}: {exc.code}")
                if exc.crashed:  # in lifecycle none a crash shows here, not on a wake
                    self.row("actor", "CrashCount").event(now_ns())
                where = f"{self.actor}: step {step.name}: op {index} {op.kind}"
                raise StepFailed(exc, where) from None
            except asyncio.CancelledError:
                row.cancelled(intended_ns, now_ns())
                raise
        row.ok(intended_ns, sent, now_ns(), nbytes, server_time_us())
        self.state = "idle"
        self.cursor = (self.cursor + 1) % len(self.part.script.steps)
        self.failures_in_a_row = 0
        ctx.refused_in_a_row = 0

    # ---------------------------------------------------------------- turns
    async def turn(
        self,
        intended_ns: int,
        *,
        first_touch: bool = True,
        time_to_wake: bool = False,
        park: bool = True,
    ) -> bool:
        """One scripted step at `intended_ns`: re-drive a failed hibernate, wake (booked
        from the intended time), run the next step. Lifecycle none has no wake, so the step
        itself is booked from the intended time. A failure is handled (docs/SPEC.md §3.4;
        `park` as in handle) and returns False; the caller decides when the actor parks."""
        try:
            if self.needs_hibernate:
                await self.hibernate()
            if self.ctx.params.population.lifecycle_mode == "none":
                await self.run_step(intended_ns)
            else:
                await self.wake(intended_ns, first_touch=first_touch, time_to_wake=time_to_wake)
                if self.ctx.params.population.wake_probe == "none":
                    self.failures_in_a_row = 0  # no step: the wake is the whole turn
                else:
                    await self.run_step(now_ns())
        except StepFailed as failed:
            await self.handle(failed, park=park)
            return False
        return True

    async def think_and_step(
        self, due: Row | None = None, paused: Callable[[], Awaitable[bool]] | None = None
    ) -> None:
        """The closed loop: think (the actor parked), then a turn, then park again. `due`
        books the step's intended start once its think is over (closed/StepsDue). A think
        that ends while the load is `paused` by hand waits the pause out and starts again:
        the step is not owed for the paused seconds."""
        if self.needs_hibernate:  # park before thinking, not after
            await self.hibernate()
        intended = self.ready_ns + self.think_ns(self.next_step())
        self.state = "thinking"
        if not await self.ctx.wait_until(intended):
            return
        if paused is not None and await paused():
            self.ready_ns = now_ns()
            return
        if due is not None:
            due.event(intended)
        if await self.turn(intended):
            await self.hibernate()


__all__ = ["HIBERNATE_ROW", "REPLACE_AFTER", "RETRY_BACKOFF_NS", "Session", "StepFailed", "Stopped"]
