"""What a failure makes a session do (docs/SPEC.md §3.4): classify it, count it, park the
actor or replace it with a fresh one at step 1.

Recovery is the failure half of Session (session.py), apart so each stays readable: a mixin
without state of its own, whose methods run on a Session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.measure.stats import CONTROL_KIND
from agentsession_core.substrate.errors import FailureClass, SubstrateError

log = logging.getLogger("agentsession")
T = TypeVar("T")

REPLACE_AFTER = 3  # consecutive counted failures before an actor is replaced
RETRY_BACKOFF_NS = 100_000_000  # a failed turn waits this long on top of its think


class Stopped(Exception):
    """The run is stopping: the session starts no new request."""


class StepFailed(Exception):
    """A request of a turn failed; carries the substrate error and where it happened."""

    def __init__(self, error: SubstrateError, where: str) -> None:
        super().__init__(f"{where}: {error}")
        self.error = error
        self.where = where


class Recovery:
    """docs/SPEC.md §3.4's table, acted on."""

    if not TYPE_CHECKING:  # Session's slots hold the state: a parked session stays small
        __slots__ = ()
    else:  # what it uses of the Session it is part of
        ctx: RunContext
        id: int
        actor: str
        generation: int
        cursor: int
        failures_in_a_row: int
        awake: bool
        needs_hibernate: bool
        ready_ns: int

        async def start(self, intended_ns: int, *, prime: bool = False) -> None: ...

        async def hibernate(
            self,
            *,
            register: bool = False,
            intended_ns: int | None = None,
            may_replace: bool = True,
        ) -> bool:
            raise NotImplementedError

        async def _booked(
            self, kind: str, name: str, intended_ns: int, call: Callable[[], Awaitable[T]]
        ) -> T:
            raise NotImplementedError

    async def handle(
        self, failed: StepFailed, *, registering: bool = False, park: bool = True
    ) -> None:
        """docs/SPEC.md §3.4: what a failure makes the session do next. `park=False` keeps an
        awake actor awake: in turnover only the conductor parks (docs/SPEC.md §4.2)."""
        action = self._note_failure(failed.error, failed.where)
        if action is FailureClass.REPLACE or self.failures_in_a_row >= REPLACE_AFTER:
            await self.replace()
        elif not park:
            self.ready_ns = now_ns()
        elif self.awake or self.ctx.params.population.lifecycle_mode == "none":
            await self.hibernate(register=registering and self.ctx.registers)
        else:
            self.ready_ns = now_ns() + RETRY_BACKOFF_NS

    def note_failure(self, failed: StepFailed) -> FailureClass:
        return self._note_failure(failed.error, failed.where)

    def _note_failure(self, exc: SubstrateError, where: str) -> FailureClass:
        action = exc.failure_class
        if action is FailureClass.MISCONFIGURED:
            self.ctx.surface(exc, where)
        elif action is FailureClass.COUNT:
            self.failures_in_a_row += 1
        if action is not FailureClass.RETRY_LATER:
            self.ctx.failure_log.failure(exc.code, f"{where} ({exc})")
        return action

    async def replace(self) -> None:
        """SuspendActor + DeleteActor the old actor (booked as DeleteActor), then a fresh
        session at step 1 on a new actor. After stop nothing is sent: the old actor stays in
        the ledger, and cleanup deletes it (docs/SPEC.md §4.3 stop guard)."""
        ctx = self.ctx
        if ctx.stopping.is_set():
            return
        old = self.actor
        try:
            await self._booked(
                CONTROL_KIND, "DeleteActor", now_ns(), lambda: ctx.ledger.remove(ctx.substrate, old)
            )
        except SubstrateError as exc:
            log.warning("%s: delete on replace failed (%s); cleanup retries it", old, exc)
        self.generation += 1
        self.actor = f"{ctx.actor_prefix}-{self.id}-r{self.generation}"
        self.cursor = 0
        self.failures_in_a_row = 0
        self.awake = False
        self.needs_hibernate = False
        ctx.replacements.log("%s replaced by %s", old, self.actor)
        try:
            await self.start(now_ns(), prime=ctx.primes)
        except StepFailed as failed:
            self._note_failure(failed.error, failed.where)
            self.ready_ns = now_ns() + RETRY_BACKOFF_NS
        except Stopped:  # stop came while the replacement started: cleanup has it
            pass
