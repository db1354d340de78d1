"""One actor's lifecycle, as both the local substrate (local_substrate/actors.py) and the
in-memory fake (fake.py) run it (docs/SPEC.md §2.1, §2.4): the states, the moves between
them, and the suspend and pause transitions with their waits and their background form.
Where an actor's state lives (a worker process, the snapshot store, nowhere) is each
substrate's own, supplied as effects (ActorMachine's abstract methods); when and in what
order an actor changes state is decided here, once.

    SUSPENDED --resume--> RESUMING --> RUNNING --suspend--> SUSPENDING --> SUSPENDED
                                       RUNNING --pause----> PAUSING    --> PAUSED
    PAUSED --resume--> RESUMING --> RUNNING       PAUSED --suspend--> SUSPENDING --> SUSPENDED
    any state a worker holds --worker died--> CRASHED --revert--> SUSPENDED

A change that fails goes back where it came from (a wake to SUSPENDED or PAUSED, a suspend
or pause to RUNNING, a suspend of a paused actor to PAUSED); every status change goes through
`move`, which refuses any other (a bug, never a client's doing). Every change of one actor
runs under its lock, so concurrent calls are serialised in arrival order. A call that finds
the actor already where it leads is a no-op. A deleted actor is NOT_FOUND (the router's
ACTOR_NOT_FOUND); a CRASHED one answers ABORTED "... crashed" to everything but GetActor and
DeleteActor, the message §3.4 replaces an actor on.

A request in flight is counted on its actor, and a suspend or pause waits for the count to
reach zero before it takes the state away. A suspend in the background (SuspendActorAsync)
takes a free lock at once, so a later call queues behind it, answers, and finishes in a task.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import ClassVar, Generic, TypeVar

from agentsession_core.substrate.protocol import actor_target

SUSPENDED = "SUSPENDED"
RESUMING = "RESUMING"
RUNNING = "RUNNING"
SUSPENDING = "SUSPENDING"
PAUSING = "PAUSING"
PAUSED = "PAUSED"
CRASHED = "CRASHED"

# The only moves there are: from each state, where it may go next.
TRANSITIONS: Mapping[str, frozenset[str]] = {
    SUSPENDED: frozenset({RESUMING}),
    RESUMING: frozenset({RUNNING, SUSPENDED, PAUSED, CRASHED}),
    RUNNING: frozenset({SUSPENDING, PAUSING, CRASHED}),
    SUSPENDING: frozenset({SUSPENDED, RUNNING, PAUSED, CRASHED}),
    PAUSING: frozenset({PAUSED, RUNNING, CRASHED}),
    PAUSED: frozenset({RESUMING, SUSPENDING, CRASHED}),
    CRASHED: frozenset({SUSPENDED}),
}


class IllegalMove(AssertionError):
    """A status change the lifecycle has no arrow for: a bug in a substrate's code."""


class EffectFailed(Exception):
    """An effect could not move the actor's state (a worker gave no usable answer); the
    transition goes back where it came from and the caller hears UNAVAILABLE."""


@dataclass(eq=False)
class ActorLife:
    """What the lifecycle keeps of one actor; each substrate's actor record extends it."""

    atespace: str
    name: str
    _: KW_ONLY
    status: str = SUSPENDED
    version: int = 0
    deleted: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    inflight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.idle.set()

    @property
    def key(self) -> str:
        """How workers and logs name the actor: the router target's own form."""
        return actor_target(self.atespace, self.name)


A = TypeVar("A", bound=ActorLife)
T = TypeVar("T")


class ActorMachine(ABC, Generic[A]):
    """The lifecycle's rules over a substrate's effects. `refused` is the exception the
    substrate answers refusals with; `refusal` makes one."""

    refused: ClassVar[type[Exception]]

    def __init__(self) -> None:
        self._background: set[asyncio.Task[None]] = set()

    # ---- the substrate's effects ---------------------------------------------------------

    @abstractmethod
    def refusal(self, code: str, message: str, *, router: bool) -> Exception:
        """A refusal in the substrate's own form, said to the control API or the router."""

    @abstractmethod
    async def save(self, actor: A) -> None:
        """A RUNNING actor's state written to the store as its next version and taken off
        its worker. EffectFailed: nothing changed."""

    @abstractmethod
    async def spill(self, actor: A) -> None:
        """A PAUSED actor's state moved from its worker into the store as its next
        version. EffectFailed: nothing changed."""

    @abstractmethod
    async def hold_paused(self, actor: A) -> bool:
        """A RUNNING actor's state kept where it runs, its slot freed, as its next version;
        False, with nothing changed, when there is no room to hold it (the pause is then
        carried out as a suspend). EffectFailed: nothing changed."""

    def suspended(self, actor: A) -> None:
        """Told once an actor is SUSPENDED (the local substrate counts it)."""

    # ---- the rules -----------------------------------------------------------------------

    def move(self, actor: A, to: str) -> None:
        if to not in TRANSITIONS.get(actor.status, frozenset()):
            raise IllegalMove(f"actor {actor.key}: no move from {actor.status} to {to}")
        actor.status = to

    def usable(self, actor: A, *, router: bool) -> None:
        """Refuse a deleted or CRASHED actor."""
        if actor.deleted:
            raise self.refusal(
                "ACTOR_NOT_FOUND" if router else "NOT_FOUND",
                f"actor {actor.key} was deleted",
                router=router,
            )
        if actor.status == CRASHED:
            raise self.refusal(
                "ABORTED", f"actor {actor.key} crashed (its worker died); delete it", router=router
            )

    @staticmethod
    def request_done(actor: A) -> None:
        """A request to the actor finished: one fewer in flight."""
        actor.inflight -= 1
        if actor.inflight == 0:
            actor.idle.set()

    @staticmethod
    async def drain(actor: A) -> None:
        """Until no request is in flight on the actor."""
        while actor.inflight:
            actor.idle.clear()
            await actor.idle.wait()

    async def _or_back(self, actor: A, effect: Awaitable[T], back: str, call: str) -> T:
        """The effect's result; when it fails, nothing changed: the actor goes `back` and the
        call is refused UNAVAILABLE (its worker's death said first, by `usable`)."""
        try:
            return await effect
        except EffectFailed as exc:
            self.usable(actor, router=False)
            self.move(actor, back)
            raise self.refusal(
                "UNAVAILABLE", f"{call} of {actor.key}: {exc}", router=False
            ) from None

    async def suspend_locked(self, actor: A) -> None:
        """SuspendActor under the actor's lock: RUNNING (or an async suspend's SUSPENDING)
        or PAUSED to SUSPENDED; anything else is where it leads already, or refused."""
        if actor.status == PAUSED:
            self.move(actor, SUSPENDING)
            await self._or_back(actor, self.spill(actor), PAUSED, "suspend")
            self.move(actor, SUSPENDED)
            self.suspended(actor)
            return
        if actor.status == SUSPENDING:  # an async suspend's start, taken with the lock
            self.move(actor, RUNNING)
        if actor.status != RUNNING:
            return
        self.move(actor, SUSPENDING)
        await self.drain(actor)
        self.usable(actor, router=False)  # its worker died while it drained
        await self._or_back(actor, self.save(actor), RUNNING, "suspend")
        self.move(actor, SUSPENDED)
        self.suspended(actor)

    async def pause_locked(self, actor: A) -> None:
        """PauseActor under the actor's lock: RUNNING to PAUSED, or to SUSPENDED when its
        state has no room where it runs."""
        if actor.status != RUNNING:
            return
        self.move(actor, PAUSING)
        await self.drain(actor)
        self.usable(actor, router=False)
        held = await self._or_back(actor, self.hold_paused(actor), RUNNING, "pause")
        if not held:
            self.move(actor, RUNNING)
            await self.suspend_locked(actor)
            return
        self.move(actor, PAUSED)

    async def suspend_in_background(self, actor: A) -> None:
        """SuspendActorAsync: a free lock is taken at once (the actor SUSPENDING), so a later
        call queues behind the suspend, which finishes in a task; a busy one is queued for.
        Nobody hears a background refusal: the actor's status tells it (background_failed)."""
        held = not actor.lock.locked()
        if held:
            await actor.lock.acquire()
            try:
                self.usable(actor, router=False)
            except BaseException:
                actor.lock.release()
                raise
            if actor.status == RUNNING:
                self.move(actor, SUSPENDING)

        async def run() -> None:
            if not held:
                await actor.lock.acquire()
            try:
                if actor.deleted or actor.status == CRASHED:
                    return
                await self.suspend_locked(actor)
            except self.refused as exc:
                self.background_failed(actor, exc)
            finally:
                actor.lock.release()

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def background_failed(self, actor: A, exc: Exception) -> None:
        """A background suspend was refused (nobody to answer)."""

    def stop(self) -> None:
        """Cancel the background suspends (a server stopping)."""
        for task in list(self._background):
            task.cancel()

    async def settle(self) -> None:
        """Let the background suspends finish."""
        await asyncio.gather(*self._background, return_exceptions=True)


__all__ = [
    "CRASHED",
    "PAUSED",
    "PAUSING",
    "RESUMING",
    "RUNNING",
    "SUSPENDED",
    "SUSPENDING",
    "TRANSITIONS",
    "ActorLife",
    "ActorMachine",
    "EffectFailed",
    "IllegalMove",
]
