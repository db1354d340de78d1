"""The local substrate's actors and their lifecycle (docs/SPEC.md §2.1, §2.4).

The states, the moves between them and the suspend and pause transitions are the state
machine this substrate shares with the in-memory fake (agentsession_core/substrate/
actor_machine.py): every lifecycle change (resume, suspend, pause, delete, and the implicit
resume of a parked router request) runs under the actor's lock, so concurrent calls on one
actor are serialised in arrival order, never interleaved; a call that finds the actor where
it leads is a no-op; a CRASHED actor answers ABORTED "... crashed" to everything but GetActor
and DeleteActor (§3.4 replaces an actor on exactly that message). What is this module's own
is where the state lives and how it moves there (the effects: save, spill, hold_paused, and
the wake's placement and load).

Where the state lives. RUNNING: in its worker, which holds up to `capacity` running actors
(docs/SPEC.md §2.7; placement.py chooses the worker). SUSPENDED: in the snapshot store (or
nowhere: a new actor's golden state is empty). PAUSED: in the worker it ran on, whose slot
is free for other actors meanwhile; resume takes that worker when it has room (a local
swap), otherwise the paused state is spilled to the store and loaded on any worker with room
(migration on demand). A worker keeps at most `pause_budget` bytes of paused state; a
pause beyond it is carried out as a suspend. Paused state dies with its worker, and so does
every actor a worker held: each is CRASHED.

A request in flight is counted on its actor (begin_request / end_request), so a suspend
or pause waits for it to finish rather than snapshotting under it. Waiting for a free
worker is bounded by `park_timeout`: RESOURCE_EXHAUSTED past it (§2.4); a worker with a
free slot but not the memory for the actor refuses it at once, RESOURCE_EXHAUSTED too.

Worker pools (docs/SPEC.md §2.6): an actor's worker selector picks the pool it may run on;
one that no pool's workers match is refused at every wake with FAILED_PRECONDITION
(protocol.NO_POOL_MATCH), as the platform's ResumeActor refuses it. Once an actor has run on a
pool it stays there (`Actor.pool`): its snapshot is restored only on that pool's workers,
as a micro-VM snapshot can only be restored on the CPU model it was taken on. Each actor's
wakes are counted per pool (`placements`, kept after delete for the debug view), the
substrate's own record of where every actor ran.

Faults (docs/SPEC.md §2.4): every wake asks `faults` (faults.py) first, which may delay it,
refuse it, or have its worker killed once it has loaded; every create asks it for room; a
SuspendActor may be answered OK and ignored; a snapshot write or read may be throttled.
What the store keeps across a restart (actor.json, the LIVE marker) is persist.py's.

SuspendActor `?async=true` takes the lock at once if it is free (so a later call queues
behind it), answers 202 and finishes in the background (the machine's
suspend_in_background).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any

import aiohttp

from agentsession_core.substrate.actor_machine import (
    CRASHED,
    PAUSED,
    RESUMING,
    RUNNING,
    SUSPENDED,
    ActorMachine,
    EffectFailed,
)
from agentsession_core.substrate.protocol import (
    WORKER_ADMIN_PREFIX,
    WORKER_SECRET_HEADER,
)
from local_substrate import persist, store
from local_substrate.actor import Actor
from local_substrate.faults import Faults
from local_substrate.metrics import SubstrateCounters
from local_substrate.placement import Need, NoMemory, pool_for
from local_substrate.pool import Pool, WorkerProc
from local_substrate.protocol import WireError
from local_substrate.worker_facts import WorkerFacts, facts_of

# Actors whose placements the debug view keeps after they are deleted, the oldest dropped
# first: enough for a test or a short run to check every actor it made.
PLACEMENTS_KEPT = 10_000


class WorkerFailed(EffectFailed):
    """An admin call to a worker got no usable answer."""


class ActorLifecycle(ActorMachine[Actor]):
    """Every actor of one server, and every change of their states."""

    refused = WireError

    def __init__(self, store_root: Path, *, park_timeout: float, pause_budget: int) -> None:
        super().__init__()
        self.store_root = store_root
        self.park_timeout = park_timeout
        self.pause_budget = pause_budget
        self.actors: dict[tuple[str, str], Actor] = {}
        self.faults = Faults()  # none until the server sets its own
        self._pool: Pool | None = None
        self._session: aiohttp.ClientSession | None = None
        self.metrics = SubstrateCounters()  # /metrics (metrics.py); hooks below bump it
        # Every actor's wakes by pool, deleted ones too (the debug view): the same Counter
        # objects as the actors' own `placements`.
        self.placements: OrderedDict[str, Counter[str]] = OrderedDict()

    def bind(self, pool: Pool, session: aiohttp.ClientSession) -> None:
        """The server's worker pool and HTTP session, once it has started them (the pool
        needs `worker_died` before it starts, so they cannot be constructor arguments)."""
        self._pool, self._session = pool, session

    @property
    def pool(self) -> Pool:
        assert self._pool is not None, "the server has not started"
        return self._pool

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "the server has not started"
        return self._session

    # ---- lookup ---------------------------------------------------------------------------

    async def add(self, actor: Actor) -> None:
        """A new actor (CreateActor), kept in the store's metadata so a restart keeps it."""
        self.faults.check_create(len(self.actors))
        key = (actor.atespace, actor.name)
        self.actors[key] = actor  # before any await, so a second create of the name fails
        self.keep_placements(actor)
        async with actor.lock:  # a DeleteActor racing the create waits for the record
            try:
                await asyncio.to_thread(persist.record_actor, self.snapshot_dir(actor), actor)
            except BaseException:
                self.actors.pop(key, None)
                raise

    def keep_placements(self, actor: Actor) -> None:
        self.placements[actor.key] = actor.placements
        self.placements.move_to_end(actor.key)
        while len(self.placements) > PLACEMENTS_KEPT:
            self.placements.popitem(last=False)

    def lookup(self, atespace: str, name: str, *, router: bool = False) -> Actor:
        """The actor; NOT_FOUND (control API) or the router's ACTOR_NOT_FOUND verdict."""
        actor = self.actors.get((atespace, name))
        if actor is None or actor.deleted:
            if router:
                raise WireError(
                    "ACTOR_NOT_FOUND", f"actor {atespace}/{name} not found", router=True
                )
            raise WireError("NOT_FOUND", f"actor {atespace}/{name} not found")
        return actor

    def refusal(self, code: str, message: str, *, router: bool) -> Exception:
        return WireError(code, message, router=router)

    # ---- the control API's calls ------------------------------------------------------------

    async def resume(self, actor: Actor) -> bool:
        """False when the actor was already RUNNING (ResumeActorResponse.resumed)."""
        with self.metrics.waking(router=False):
            _, resumed = await self.wake(actor, router=False)
        return resumed

    async def suspend(self, actor: Actor, *, faults: bool = True) -> None:
        """SuspendActor; `faults=False` for the server's own parks at a clean stop."""
        async with actor.lock:
            self.usable(actor, router=False)
            if faults and actor.status in (RUNNING, PAUSED):
                if self.faults.suspend_ignored():
                    return  # answered OK; the actor keeps running (`suspend:ignore`)
                self.faults.check_store(actor, "writing", router=False)
            await self.suspend_locked(actor)

    async def pause(self, actor: Actor) -> None:
        async with actor.lock:
            self.usable(actor, router=False)
            await self.pause_locked(actor)

    async def suspend_in_background(self, actor: Actor) -> None:
        if actor.status == RUNNING and self.faults.suspend_ignored():
            self.usable(actor, router=False)
            return  # answered 202; nothing is suspended (`suspend:ignore`)
        await super().suspend_in_background(actor)

    def background_failed(self, actor: Actor, exc: Exception) -> None:
        print(f"agentsession substrate: async suspend: {exc}", file=sys.stderr)

    async def revert(self, actor: Actor) -> None:
        """RevertActor: a CRASHED actor back to SUSPENDED at its last snapshot (the state its
        dead worker held is gone; the store still has what its last suspend wrote, or the
        empty golden state). A SUSPENDED one is FAILED_PRECONDITION, as on the platform. A
        RUNNING or PAUSED one is UNIMPLEMENTED: throwing its live state away needs a hand-back
        from the worker that this lifecycle does not offer; suspend it instead."""
        async with actor.lock:
            if actor.deleted:
                raise WireError("NOT_FOUND", f"actor {actor.key} not found")
            if actor.status == SUSPENDED:
                raise WireError(
                    "FAILED_PRECONDITION", f"actor {actor.key} is SUSPENDED: nothing to revert"
                )
            if actor.status != CRASHED or actor.worker or actor.paused_on:
                raise WireError(
                    "UNIMPLEMENTED",
                    f"actor {actor.key} is {actor.status}: the local substrate reverts only "
                    "crashed actors (suspend a running or paused one)",
                )
            # The LIVE marker said its state was in a worker; now the store's snapshot is it.
            live = self.snapshot_dir(actor) / store.LIVE
            await asyncio.to_thread(live.unlink, missing_ok=True)
            self.move(actor, SUSPENDED)
            actor.version += 1

    async def delete(self, actor: Actor) -> None:
        async with actor.lock:
            if actor.deleted:
                raise WireError("NOT_FOUND", f"actor {actor.key} not found")
            actor.deleted = True
            self.actors.pop((actor.atespace, actor.name), None)
            holder = actor.worker or actor.paused_on
            if holder is not None and holder.alive:
                with contextlib.suppress(WorkerFailed):
                    await self.admin(holder, "drop", actor=actor.key)
                if holder.paused.pop(actor.key, None) is not None:
                    self.pool.freed(holder)
            if actor.worker is not None:
                self.pool.release(actor.worker, actor.key)
            actor.worker = actor.paused_on = None
            await asyncio.to_thread(store.delete_actor, self.snapshot_dir(actor))

    # ---- the router's side ------------------------------------------------------------------

    async def begin_request(self, actor: Actor) -> WorkerProc:
        """The worker to forward a request to, the actor RUNNING and the request counted in
        flight until end_request. A RUNNING actor nobody is changing goes straight through;
        otherwise the request parks on the lock and wakes the actor (§2.2)."""
        if actor.status == RUNNING and not actor.lock.locked() and actor.worker is not None:
            worker = actor.worker
        else:
            with self.metrics.waking(router=True):  # parked until the actor runs
                worker, _ = await self.wake(actor, router=True)
        actor.inflight += 1
        return worker

    def end_request(self, actor: Actor) -> None:
        self.request_done(actor)

    # ---- transitions ------------------------------------------------------------------------

    def snapshot_dir(self, actor: Actor) -> Path:
        return store.actor_dir(self.store_root, actor.atespace, actor.name)

    async def admin(self, worker: WorkerProc, op: str, **body: Any) -> dict[str, Any]:
        if not self.pool.data_plane:
            # A pod-less worker (pool.py): the state change is the control plane's record
            # alone; no bytes move, so a snapshot is counted with none.
            answer: dict[str, Any] = {"bytes": 0}
            self.metrics.worker_answered(op, body, answer)
            return answer
        try:
            async with self.session.post(
                f"{worker.url}{WORKER_ADMIN_PREFIX}/{op}",
                json=body,
                headers={WORKER_SECRET_HEADER: self.pool.secret},
            ) as resp:
                payload = await resp.json(content_type=None)
                if resp.status != 200:
                    raise WorkerFailed(f"worker {worker.name} {op}: {payload}")
                self.metrics.worker_answered(op, body, payload)
                return payload
        except (aiohttp.ClientError, ValueError) as exc:
            raise WorkerFailed(f"worker {worker.name} {op}: {exc!r}") from exc

    async def wake(self, actor: Actor, *, router: bool) -> tuple[WorkerProc, bool]:
        """The actor RUNNING, resuming it if needed: its worker, and whether it resumed."""
        try:
            async with asyncio.timeout(self.park_timeout):
                await actor.lock.acquire()
        except TimeoutError:
            raise WireError(
                "DEADLINE_EXCEEDED",
                f"actor {actor.key} stayed busy in another lifecycle call for {self.park_timeout}s",
                router=router,
            ) from None
        try:
            self.usable(actor, router=router)
            resumed = actor.status != RUNNING
            if resumed:
                await self._resume_locked(actor, router=router)
                assert actor.worker is not None
                self.metrics.woke(router=router, pool=actor.worker.pool)
            assert actor.worker is not None
            return actor.worker, resumed
        finally:
            actor.lock.release()

    async def _resume_locked(self, actor: Actor, *, router: bool) -> None:
        pool = self.pool
        wanted = pool_for(actor, pool, router=router)
        fault = await self.faults.before_wake(actor, router=router)
        if actor.status == SUSPENDED and actor.version:  # its snapshot is in the store
            self.faults.check_store(actor, "reading", router=router)
        before = actor.status
        self.move(actor, RESUMING)
        # Reserved on its worker while it runs: what its template lets it grow to.
        need = Need(actor.key, actor.limit or 0, wanted, actor.paused_on)
        try:
            worker = await pool.acquire(need, self.park_timeout)
        except TimeoutError:
            self.move(actor, before)
            if (short := pool.shortage(need)) is not None:
                raise WireError(
                    "RESOURCE_EXHAUSTED",
                    f"{short} within the park timeout of {self.park_timeout}s",
                    router=router,
                ) from None
            which = f"the {pool.pool_size(wanted)} workers of pool {wanted}" if wanted else None
            raise WireError(
                "RESOURCE_EXHAUSTED",
                f"no worker freed up for actor {actor.key} within the park timeout of "
                f"{self.park_timeout}s ({which or f'{pool.size} workers'}, "
                f"{pool.slots(wanted)} slots, all busy{pool.draining_note(wanted)})",
                router=router,
            ) from None
        except NoMemory as exc:
            self.move(actor, before)
            raise WireError("RESOURCE_EXHAUSTED", str(exc), router=router) from None
        try:
            if actor.paused_on is worker:
                await self.admin(worker, "unpause", actor=actor.key)
                worker.paused.pop(actor.key, None)
            else:
                if actor.paused_on is not None:
                    await self._spill(actor)
                directory = self.snapshot_dir(actor)
                has_snapshot = await asyncio.to_thread(persist.going_live, directory)
                await self.admin(
                    worker,
                    "load",
                    actor=actor.key,
                    limit=actor.limit,
                    snapshot=str(directory) if has_snapshot else None,
                )
        except WorkerFailed as exc:
            pool.release(worker, actor.key)
            if actor.status != CRASHED:
                self.move(actor, PAUSED if actor.paused_on is not None else SUSPENDED)
            self.usable(actor, router=router)
            raise WireError("UNAVAILABLE", f"resume of {actor.key}: {exc}", router=router) from None
        actor.worker, actor.paused_on = worker, None
        self.move(actor, RUNNING)
        actor.version += 1
        actor.placements[worker.pool] += 1
        if worker.pool and actor.pool is None:
            # Bound for life: its snapshots can be restored on this pool's workers only.
            actor.pool = worker.pool
            await asyncio.to_thread(persist.record_actor, self.snapshot_dir(actor), actor)
        if fault.action == "crash":
            await self.faults.crash_on_wake(actor, worker, fault, router=router)

    async def _spill(self, actor: Actor) -> None:
        """Move a paused state from its worker into the store."""
        holder = actor.paused_on
        assert holder is not None
        await self.admin(
            holder,
            "spill",
            actor=actor.key,
            snapshot=str(self.snapshot_dir(actor)),
            version=actor.version + 1,
        )
        holder.paused.pop(actor.key, None)
        self.pool.freed(holder)
        actor.paused_on = None
        actor.version += 1

    # ---- the state machine's effects (actor_machine.py) ----------------------------------

    async def save(self, actor: Actor) -> None:
        worker = actor.worker
        assert worker is not None
        await self.admin(
            worker,
            "save",
            actor=actor.key,
            snapshot=str(self.snapshot_dir(actor)),
            version=actor.version + 1,
        )
        actor.worker = None
        actor.version += 1
        self.pool.release(worker, actor.key)

    async def spill(self, actor: Actor) -> None:
        await self._spill(actor)

    async def hold_paused(self, actor: Actor) -> bool:
        worker = actor.worker
        assert worker is not None
        state = await self.admin(worker, "state", actor=actor.key)
        if sum(worker.paused.values()) + state["bytes"] > self.pause_budget:
            return False
        held = await self.admin(worker, "pause", actor=actor.key)
        worker.paused[actor.key] = held["bytes"]
        actor.worker, actor.paused_on = None, worker
        actor.version += 1
        self.pool.release(worker, actor.key)
        return True

    def suspended(self, actor: Actor) -> None:
        self.metrics.suspended()

    # ---- the worker facts (docs/SPEC.md §2.7) ----------------------------------------------

    def workers(self) -> list[WorkerFacts]:
        """Every live worker as both wires list it, in slot order."""
        alive = [w for w in self.pool.workers.values() if w.alive]
        return [facts_of(w) for w in sorted(alive, key=lambda w: w.slot)]

    def drain_worker(self, name: str) -> WorkerFacts:
        """DrainWorker: the worker takes no new placements from now on; its actors stay until
        they park. KeyError for a name no live worker has."""
        for worker in self.pool.workers.values():
            if worker.alive and worker.name == name:
                self.pool.drain(worker)
                return facts_of(worker)
        raise KeyError(name)

    def worker_died(self, worker: WorkerProc) -> None:
        """The pool's crash report: the worker's running and paused actors are CRASHED."""
        held = 0
        for actor in self.actors.values():
            if actor.worker is worker or actor.paused_on is worker:
                self.move(actor, CRASHED)
                actor.worker = actor.paused_on = None
                held += 1
        worker.running.clear()
        worker.paused.clear()
        print(
            f"agentsession substrate: worker {worker.name} (pid {worker.pid}) died "
            f"with code {worker.process.returncode}, {held} actors with it (CRASHED); "
            "replacing it",
            file=sys.stderr,
        )
