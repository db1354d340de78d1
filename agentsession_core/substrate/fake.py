"""FakeSubstrate: the Substrate interface in memory, for tests (no sockets, no processes).

It keeps what a caller of the interface can observe (docs/SPEC.md §2): templates and their
memory limits, atespaces, actors and their lifecycle (§2.1: SUSPENDED on creation, then
RUNNING, SUSPENDING, PAUSING, PAUSED, CRASHED; a deleted actor is gone), implicit wakes by
the router (§2.2) and the glutton routes (§2.3, fake_glutton.py). Its lifecycle is the local
substrate's own state machine (actor_machine.py, which local_substrate/actors.py runs too):
lifecycle calls on one actor are serialised on its lock, a suspend or pause waits for the
requests in flight, a call that finds the actor where it leads is a no-op, a CRASHED actor
refuses everything but GetActor and DeleteActor; here the effects only count versions and
free the modelled workers. The memory limit covers an actor's RAM arrays plus its files.

Errors take the clients' path: a control refusal is decoded by errors.error_from_answer
and a router answer by router_wire.router_answer, from the status, body and headers of
the wire form (protocol.py), so every SubstrateError classifies (errors.classify, §3.4)
exactly as it would against a server.

Workers: by default none are modelled (a wake never waits for room, ListWorkers answers
UNIMPLEMENTED, as a substrate without a listing does). With `workers=N` there are N workers
"fake-0" … of `worker_capacity` actors and `worker_memory` bytes each (fake_workers.py): a
wake places the actor, reserving its template's memory limit, or is refused
RESOURCE_EXHAUSTED (the actor stays parked); `list_workers` lists them, `drain(name)` marks
one draining.

Not modelled: worker pools, per-op size caps, the pause budget, real bytes (see
fake_glutton.py). Faults: `fail_wakes` and `crash_wakes` are the
shares of wakes (explicit or implicit) that fail with RESOURCE_EXHAUSTED (the actor stays
parked) or crash the actor, drawn once per wake from a stream seeded by `seed`; crash()
kills one actor's worker on demand, restart() every worker (or, without the store, forgets
everything); `max_actors` is a quota: a CreateActor that would hold more actors at once is
refused with RESOURCE_EXHAUSTED; `ignore_suspends` is the share of SuspendActor calls answered
OK while the actor keeps running (its next ResumeActor answers `resumed: false`), as the local
substrate's `suspend:ignore` rule.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import orjson

from agentsession_core.substrate.actor_machine import (
    CRASHED,
    RESUMING,
    RUNNING,
    ActorLife,
    ActorMachine,
)
from agentsession_core.substrate.errors import TIMEOUT, SubstrateError, error_from_answer
from agentsession_core.substrate.fake_glutton import JSON, GluttonState, Origin, Refused, serve
from agentsession_core.substrate.fake_workers import FakeWorkers, NoRoom
from agentsession_core.substrate.interface import (
    ActorInfo,
    RouterResponse,
    Substrate,
    Template,
    WorkerInfo,
)
from agentsession_core.substrate.protocol import (
    DEFAULT_TEMPLATE,
    ELAPSED_HEADER,
    NAME_PATTERN,
    ROUTER_HEADER,
    ROUTER_VERDICT,
    actor_target,
)
from agentsession_core.substrate.router_wire import router_answer

FAKE_WORKER = "fake"  # ActorInfo.worker while a worker holds the actor's state
_HELD = ("RUNNING", "SUSPENDING", "PAUSING", "PAUSED")  # the states a worker holds (§2.4)

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _control_call(method: Callable[_P, Awaitable[_T]]) -> Callable[_P, Coroutine[Any, Any, _T]]:
    """A control-API call: a refusal leaves as HttpSubstrate decodes the answer it gets."""

    @functools.wraps(method)
    async def call(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await method(*args, **kwargs)
        except Refused as refused:
            raise error_from_answer(refused.status, refused.body(), from_router=True) from None

    return call


@dataclass(eq=False)
class _Actor(ActorLife):
    state: GluttonState
    reserve: int | None = None  # its template's memory limit: what a worker reserves for it
    worker: str | None = None  # the modelled worker holding it (workers=N only)
    workers: FakeWorkers | None = None  # the substrate's modelled workers, if any

    def release(self) -> None:
        """Its worker no longer holds it (suspended, crashed, deleted)."""
        if self.workers is not None and self.worker is not None:
            self.workers.release(self.key)
        self.worker = None

    def info(self) -> ActorInfo:
        worker = self.worker or (FAKE_WORKER if self.status in _HELD else None)
        return ActorInfo(self.atespace, self.name, self.status, worker, self.version)


class _Lifecycle(ActorMachine[_Actor]):
    """The shared state machine with the fake's effects: a snapshot is a new version, and a
    suspended actor frees its modelled worker (a paused one keeps it)."""

    refused = Refused

    def refusal(self, code: str, message: str, *, router: bool) -> Exception:
        return Refused(code, message, "router" if router else "control")

    async def save(self, actor: _Actor) -> None:
        actor.release()
        actor.version += 1

    async def spill(self, actor: _Actor) -> None:
        actor.release()
        actor.version += 1

    async def hold_paused(self, actor: _Actor) -> bool:
        actor.version += 1
        return True


class FakeSubstrate(Substrate):
    """`templates` maps (namespace, name) to a memory limit in bytes (None: no limit); the
    default is the local substrate's, benchmark-workloads/glutton with 1 GiB."""

    def __init__(
        self,
        templates: Mapping[tuple[str, str], int | None] | None = None,
        *,
        fail_wakes: float = 0.0,
        crash_wakes: float = 0.0,
        seed: int = 0,
        max_actors: int | None = None,
        workers: int | None = None,
        worker_capacity: int = 1,
        worker_memory: int | None = None,
        ignore_suspends: float = 0.0,
    ) -> None:
        if not 0.0 <= ignore_suspends <= 1.0:
            raise ValueError("ignore_suspends is a share: between 0 and 1")
        if min(fail_wakes, crash_wakes) < 0 or fail_wakes + crash_wakes > 1:
            raise ValueError("fail_wakes and crash_wakes are shares: >= 0 and at most 1 together")
        self._workers = (
            FakeWorkers(workers, worker_capacity, worker_memory) if workers is not None else None
        )
        self.templates: dict[tuple[str, str], int | None] = (
            dict(templates) if templates is not None else {DEFAULT_TEMPLATE: 1 << 30}
        )
        self.fail_wakes, self.crash_wakes = fail_wakes, crash_wakes
        self.max_actors = max_actors
        self.atespaces: set[str] = set()
        # Each actor's worker selector as CreateActor gave it (docs/SPEC.md §2.6).
        self.selectors: dict[tuple[str, str], dict[str, str]] = {}
        self.wakes = 0  # wakes that brought an actor to RUNNING
        self._actors: dict[tuple[str, str], _Actor] = {}
        self._rng = random.Random(seed)
        # A stream of its own, so the wakes' draws are the same with or without it.
        self.ignore_suspends = ignore_suspends
        self._ignore_rng = random.Random(f"{seed}/ignore-suspends")
        self._life = _Lifecycle()

    def crash(self, atespace: str, name: str) -> bool:
        """The actor's worker dies: an actor a worker holds (RUNNING, PAUSED) becomes CRASHED;
        a suspended one lives in the store and is unharmed. Returns whether it crashed."""
        actor = self._actors.get((atespace, name))
        if actor is None or actor.status not in _HELD:
            return False
        self._life.move(actor, CRASHED)
        actor.release()
        return True

    def drain(self, worker: str) -> None:
        """Mark a modelled worker draining: it takes no new placement, keeps its actors."""
        if self._workers is None:
            raise KeyError(worker)
        self._workers.drain(worker)

    def restart(self, *, keep_store: bool) -> None:
        """The substrate went away and came back (docs/SPEC.md §2.4): on its store, what a
        worker held is CRASHED and the rest is kept; without it (a platform that lost its
        state), every atespace and actor is gone."""
        if self._workers is not None:  # every worker process died
            self._workers.clear()
        for actor in self._actors.values():
            actor.worker = None
        if keep_store:
            for actor in self._actors.values():
                if actor.status in _HELD:
                    self._life.move(actor, CRASHED)
            return
        for actor in self._actors.values():
            actor.deleted = True
        self._actors.clear()
        self.atespaces.clear()

    # ---- control API --------------------------------------------------------------------

    @_control_call
    async def get_template(self, namespace: str, name: str) -> Template:
        if (namespace, name) not in self.templates:
            raise Refused("NOT_FOUND", f"template {namespace}/{name} not found")
        return Template(namespace, name, self.templates[(namespace, name)])

    @_control_call
    async def ensure_atespace(self, atespace: str) -> None:
        self.atespaces.add(_checked_name(atespace, "atespace"))

    @_control_call
    async def create_actor(
        self,
        atespace: str,
        name: str,
        template_namespace: str,
        template_name: str,
        *,
        worker_selector: Mapping[str, str] | None = None,
    ) -> ActorInfo:
        self._atespace(atespace)
        where = f"CreateActor in {atespace}"
        _checked_name(name, f"{where}: field 'name'")
        ref = (template_namespace, template_name)
        if ref not in self.templates:
            raise Refused("NOT_FOUND", f"{where}: template {ref[0]}/{ref[1]} not found")
        if (atespace, name) in self._actors:
            raise Refused("ALREADY_EXISTS", f"actor {atespace}/{name} already exists")
        if self.max_actors is not None and len(self._actors) >= self.max_actors:
            raise Refused("RESOURCE_EXHAUSTED", f"quota of {self.max_actors} actors reached")
        limit = self.templates[ref]
        actor = _Actor(atespace, name, GluttonState(actor_target(atespace, name), limit))
        actor.reserve, actor.workers = limit, self._workers
        self._actors[(atespace, name)] = actor
        self.selectors[(atespace, name)] = dict(worker_selector or {})
        return actor.info()

    @_control_call
    async def get_actor(self, atespace: str, name: str) -> ActorInfo:
        return self._actor(atespace, name).info()

    @_control_call
    async def list_actors(self, atespace: str) -> list[ActorInfo]:
        self._atespace(atespace)
        return [a.info() for (space, _), a in sorted(self._actors.items()) if space == atespace]

    @_control_call
    async def resume_actor(self, atespace: str, name: str) -> ActorInfo:
        actor = self._actor(atespace, name)
        before = actor.version
        await self._wake(actor, "control")
        # False when it was already running: a suspend `ignore_suspends` dropped (§3.4).
        return dataclasses.replace(actor.info(), resumed=actor.version != before)

    @_control_call
    async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
        actor = self._actor(atespace, name)
        if self.ignore_suspends and self._ignore_rng.random() < self.ignore_suspends:
            self._life.usable(actor, router=False)
            return  # answered OK; the actor keeps running
        if not wait:
            await self._life.suspend_in_background(actor)
            return
        async with actor.lock:
            self._life.usable(actor, router=False)
            await self._life.suspend_locked(actor)

    @_control_call
    async def pause_actor(self, atespace: str, name: str) -> None:
        actor = self._actor(atespace, name)
        async with actor.lock:
            self._life.usable(actor, router=False)
            await self._life.pause_locked(actor)

    @_control_call
    async def delete_actor(self, atespace: str, name: str) -> None:
        actor = self._actor(atespace, name)
        async with actor.lock:
            if actor.deleted:  # deleted by a call that held the lock before us
                raise Refused("NOT_FOUND", f"actor {actor.key} not found")
            actor.deleted = True
            actor.release()
            self._actors.pop((atespace, name), None)

    @_control_call
    async def list_workers(self) -> list[WorkerInfo]:
        if self._workers is None:
            raise Refused("UNIMPLEMENTED", "this FakeSubstrate models no workers (workers=None)")
        return self._workers.listing()

    def _atespace(self, atespace: str) -> None:
        if atespace not in self.atespaces:
            raise Refused("NOT_FOUND", f"atespace {atespace!r} not found (PUT it first)")

    def _actor(self, atespace: str, name: str) -> _Actor:
        self._atespace(atespace)
        actor = self._actors.get((atespace, name))
        if actor is None:
            raise Refused("NOT_FOUND", f"actor {atespace}/{name} not found")
        return actor

    # ---- router -------------------------------------------------------------------------

    async def request(
        self,
        atespace: str,
        actor: str,
        route: str,
        *,
        json: Any = None,
        body: bytes | None = None,
        params: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> RouterResponse:
        raw = orjson.dumps(json) if json is not None else (body or b"")
        path = "/" + route.lstrip("/")
        start = time.perf_counter_ns()
        headers: dict[str, str] = {}
        try:
            async with asyncio.timeout(timeout):
                status, payload, kind = await self._route(atespace, actor, path, raw, params or {})
        except TimeoutError:
            raise SubstrateError(TIMEOUT, f"router {route}: no answer within the timeout") from None
        except Refused as refused:
            status, payload, kind = refused.status, refused.body(), JSON
            if refused.origin == "router":
                headers[ROUTER_HEADER] = ROUTER_VERDICT
        headers["content-type"] = kind
        headers[ELAPSED_HEADER] = str((time.perf_counter_ns() - start) // 1000)
        return router_answer(status, payload, headers, path)

    async def _route(
        self, atespace: str, name: str, path: str, raw: bytes, params: dict[str, str]
    ) -> tuple[int, bytes, str]:
        actor = self._actors.get((atespace, name))
        if actor is None:
            raise Refused("ACTOR_NOT_FOUND", f"actor {atespace}/{name} not found", "router")
        if actor.status != RUNNING or actor.lock.locked():
            await self._wake(actor, "router")  # parks on the lock, as the router does
        actor.inflight += 1
        try:
            answer = await serve(actor.state, path, raw, params)
        finally:
            self._life.request_done(actor)
        if actor.status == CRASHED:  # crash() while the request was inside the actor
            raise _crashed(actor, "router", mid_request=True)
        return answer

    # ---- lifecycle ----------------------------------------------------------------------

    async def _wake(self, actor: _Actor, origin: Origin) -> None:
        life = self._life
        async with actor.lock:
            life.usable(actor, router=origin == "router")
            if actor.status == RUNNING:
                return
            draw = self._rng.random()
            before = actor.status
            life.move(actor, RESUMING)
            if draw < self.crash_wakes:
                life.move(actor, CRASHED)  # its worker died loading it
                raise _crashed(actor, origin)
            if draw < self.crash_wakes + self.fail_wakes:
                life.move(actor, before)
                message = f"no room to wake actor {actor.key} (FakeSubstrate fail_wakes)"
                raise Refused("RESOURCE_EXHAUSTED", message, origin)
            if self._workers is not None and before not in _HELD:  # paused: still there
                try:
                    actor.worker = self._workers.place(actor.key, actor.reserve)
                except NoRoom as no_room:
                    life.move(actor, before)
                    raise Refused("RESOURCE_EXHAUSTED", str(no_room), origin) from None
            life.move(actor, RUNNING)
            actor.version += 1
            self.wakes += 1

    async def aclose(self) -> None:
        """Let the background suspends finish."""
        await self._life.settle()


def _crashed(actor: _Actor, origin: Origin, *, mid_request: bool = False) -> Refused:
    # "crashed" in an ABORTED message is what §3.4 replaces an actor on; the local
    # substrate's words otherwise.
    if mid_request:
        return Refused(
            "ABORTED", f"actor {actor.key} crashed (its worker died mid-request)", origin
        )
    return Refused("ABORTED", f"actor {actor.key} crashed (its worker died); delete it", origin)


def _checked_name(value: str, where: str) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise Refused("INVALID_ARGUMENT", f"{where}: {value!r} must match {NAME_PATTERN.pattern}")
    return value
