"""The worker pool: a fixed number of worker processes, each holding up to `capacity` running
actors at once (docs/SPEC.md §2.7; 1 unless asked, one actor per process as before).

Each worker is an OS process forked from the pool's fork server (worker_process.py), on its
own loopback port (handshake: `LISTENING <port>` down its pipe). The pipe's other end stays
with us; when we go, it goes.

`acquire` takes a slot on a worker with room for the actor (placement.py decides which: the
one holding its paused state first, then the most free slots). When no worker has room (a
free slot and the memory) it waits: waiters are served first come, first served as slots and
memory come free; `acquire` gives up after its timeout (the caller turns that into
RESOURCE_EXHAUSTED, saying which it lacked: `shortage`). Only an actor no worker could hold
even empty is refused at once (`NoMemory`). `release` gives the actor's slot and reservation
back; `freed` says a worker's paused state went (its memory is free for a waiter).

Worker pools (docs/SPEC.md §2.6): started with `pools` ({name: workers}), the slots are cut
into named pools in order and each worker carries the label `pool: NAME`, as a platform's
WorkerPool labels its workers; `shapes` may give a pool its own capacity and memory.
`acquire(pool=NAME)` places only on that pool's workers, and a freed slot goes to the first
waiter its pool can serve; a replacement worker keeps its slot's pool. Without pools every
worker is unlabelled and `pool=None` takes any of them. A draining worker (`drain`) takes no
new placements; its actors stay until they park.

A watcher per process notices its exit; unless the pool is stopping, the worker is
reported to `on_crash` (the server marks every actor it held CRASHED) and a replacement is
started in the same slot, so the pool returns to full size.

Without a data plane (`data_plane=False`, `serve --no-data-plane`, docs/SPEC.md §2.4) the
workers are pod-less: slots with their capacity and memory, placed on and listed as any
worker, and no process behind them (PodlessProcess), as a platform's control plane is load
tested alone with workers that run nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

from agentsession_core.substrate.protocol import POOL_LABEL, WORKER_SECRET_ENV
from local_substrate import placement, worker_process
from local_substrate.placement import Need
from local_substrate.worker_process import WorkerProcess

SPAWN_TIMEOUT = 60.0


@dataclass(frozen=True)
class WorkerShape:
    """How much one worker holds: running actors at once, and bytes (None: no limit)."""

    capacity: int = 1
    memory: int | None = None


ONE_ACTOR = WorkerShape()  # one actor per worker, no memory limit: the default


class PodlessProcess:
    """The process a pod-less worker does not have: no pid, never exits on its own."""

    pid = 0
    returncode: int | None = None

    async def wait(self) -> int:
        return 0

    def kill(self) -> None:
        """Nothing to kill."""

    def close_pipe(self) -> None:
        """No pipe."""


@dataclass(eq=False)
class WorkerProc:
    slot: int
    generation: int
    process: WorkerProcess | PodlessProcess
    port: int
    scratch: Path
    capacity: int = 1  # running actors it may hold at once
    memory: int | None = None  # bytes its actors may reserve (placement.py); None: no limit
    running: dict[str, int] = field(default_factory=dict)  # actor → bytes it reserves here
    paused: dict[str, int] = field(default_factory=dict)  # actor → bytes held here
    alive: bool = True
    pool: str = ""  # its pool's name, its one label (pool: NAME); "" without pools
    draining: bool = False  # DrainWorker: no new placements; its actors stay until they park
    freed_seq: int = 0  # when it last had a slot come free (placement's tie-break)

    @property
    def name(self) -> str:
        return f"w{self.slot}" if self.generation == 0 else f"w{self.slot}.{self.generation}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid


class Pool:
    def __init__(
        self,
        size: int,
        scratch_root: Path,
        worker_args: list[str],
        on_crash: Callable[[WorkerProc], None],
        seed: int = 0,
        pools: dict[str, int] | None = None,
        shape: WorkerShape = ONE_ACTOR,
        shapes: dict[str, WorkerShape] | None = None,
        data_plane: bool = True,
    ) -> None:
        self.data_plane = data_plane  # False: pod-less workers (the module docstring)
        self.pools = dict(pools or {})
        self.shape = shape  # every worker's, unless its pool has its own in `shapes`
        self.shapes = dict(shapes or {})
        self.size = sum(self.pools.values()) if self.pools else size
        # Slot → pool name, the pools in the order given.
        self._pool_of = [name for name, count in self.pools.items() for _ in range(count)]
        self.scratch_root = scratch_root
        self.worker_args = worker_args
        self.on_crash = on_crash
        self.seed = seed
        # The router's key to the workers' ports: new each start, unless the environment
        # fixes one (to reach a worker by hand, as tests do).
        self.secret = os.environ.get(WORKER_SECRET_ENV) or secrets.token_hex(16)
        self.workers: dict[int, WorkerProc] = {}
        self.crashes = 0
        self._freed = count(1)
        self._waiters: deque[tuple[asyncio.Future[WorkerProc], Need]] = deque()
        self._watchers: set[asyncio.Task[None]] = set()
        self._stopping = False

    async def start(self) -> None:
        await asyncio.gather(*(self._spawn(slot, 0) for slot in range(self.size)))

    async def _spawn(self, slot: int, generation: int) -> WorkerProc:
        scratch = self.scratch_root / f"w{slot}-{generation}"
        await asyncio.to_thread(scratch.mkdir, parents=True, exist_ok=True)
        seed = self.seed * 1_000_003 + slot * 1009 + generation
        pool = self._pool_of[slot] if self._pool_of else ""
        shape = self.shape_of(pool)
        process: WorkerProcess | PodlessProcess = PodlessProcess()
        port = 0
        if self.data_plane:
            argv = ["--scratch", str(scratch), "--seed", str(seed)]
            argv += ["--capacity", str(shape.capacity), *self.worker_args]
            try:
                process, port = await worker_process.start(argv, self.secret, SPAWN_TIMEOUT)
            except worker_process.WorkerDidNotStart as exc:
                raise RuntimeError(f"worker slot {slot} did not start: {exc}") from exc
        worker = WorkerProc(
            slot,
            generation,
            process,
            port,
            scratch,
            capacity=shape.capacity,
            memory=shape.memory,
            pool=pool,
            freed_seq=next(self._freed),
        )
        self.workers[slot] = worker
        if self.data_plane:  # a pod-less worker never exits on its own: nothing to watch
            task = asyncio.create_task(self._watch(worker))
            self._watchers.add(task)
            task.add_done_callback(self._watchers.discard)
        return worker

    async def _watch(self, worker: WorkerProc) -> None:
        await worker.process.wait()
        worker.alive = False
        if self._stopping:
            return
        self.crashes += 1
        self.on_crash(worker)
        await asyncio.to_thread(shutil.rmtree, worker.scratch, True)
        while not self._stopping:
            try:
                replacement = await self._spawn(worker.slot, worker.generation + 1)
            except RuntimeError as exc:
                print(f"agentsession substrate: {exc}; retrying", file=sys.stderr)
                await asyncio.sleep(1.0)
                continue
            self._give(replacement)
            return

    def shape_of(self, pool: str) -> WorkerShape:
        return self.shapes.get(pool, self.shape)

    def free_count(self, pool: str | None = None) -> int:
        """Workers (of `pool`) that would take a placement now: alive, not draining, with a
        free slot."""
        return sum(
            1
            for w in self.workers.values()
            if placement.takes_placements(w, pool) and placement.free_slots(w) > 0
        )

    def waiting(self, pool: str | None = None) -> int:
        """Acquires waiting for a free worker (the wake queue of /metrics)."""
        return sum(
            1
            for future, need in self._waiters
            if not future.done() and (pool is None or need.pool == pool)
        )

    def pool_matching(self, selector: dict[str, str]) -> str | None:
        """The pool whose workers carry every label of `selector`; None for an empty selector
        (any worker). KeyError when no pool's workers match (docs/SPEC.md §2.6)."""
        if not selector:
            return None
        for name in self.pools:
            if selector.items() <= {POOL_LABEL: name}.items():
                return name
        raise KeyError(selector)

    def pool_size(self, pool: str | None) -> int:
        return self.size if pool is None else self.pools.get(pool, 0)

    def draining_note(self, pool: str | None) -> str:
        """The draining workers, said in a refusal's message ("" when none drains)."""
        draining = sum(
            1 for w in self.workers.values() if w.draining and (pool is None or w.pool == pool)
        )
        return f", {draining} of the workers draining" if draining else ""

    def slots(self, pool: str | None) -> int:
        """Running actors the workers (of `pool`) may hold at once, draining ones too."""
        return sum(w.capacity for w in self.workers.values() if pool is None or w.pool == pool)

    async def acquire(self, need: Need, timeout: float) -> WorkerProc:
        """A slot for `need.actor` on a worker with room (placement.choose), waiting up to
        `timeout` for a slot and the memory to come free; placement.NoMemory at once when no
        worker could ever hold it."""
        worker = self._take(need)
        if worker is not None:
            return worker
        future: asyncio.Future[WorkerProc] = asyncio.get_running_loop().create_future()
        entry = (future, need)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(future)
        except TimeoutError:
            if future.done() and not future.cancelled() and future.exception() is None:
                # Handed over just as we gave up: pass it on rather than leak it.
                self.release(future.result(), need.actor)
            future.cancel()
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)

    def _take(self, need: Need) -> WorkerProc | None:
        chosen = placement.choose(self.workers.values(), need)
        if chosen is None:
            return None
        assert isinstance(chosen, WorkerProc)
        chosen.running[need.actor] = need.reserve
        return chosen

    def release(self, worker: WorkerProc, actor: str) -> None:
        """`actor`'s slot on `worker` is free again."""
        if worker.running.pop(actor, None) is None:
            return
        worker.freed_seq = next(self._freed)
        self.freed(worker)

    def freed(self, worker: WorkerProc) -> None:
        """Room came free on `worker` (a slot, a reservation, a paused state): serve the
        waiters it lets in."""
        if worker.alive and not self._stopping:
            self._give(worker)

    def shortage(self, need: Need) -> placement.NoMemory | None:
        """What `need` lacked when its wait timed out: the memory (NoMemory) or a slot (None)."""
        return placement.shortage(self.workers.values(), need)

    def drain(self, worker: WorkerProc) -> None:
        worker.draining = True

    def _give(self, worker: WorkerProc) -> None:
        """Room came free on `worker` (or it is new): serve the waiters it lets in, first
        come first served; one that can never fit is refused."""
        for entry in list(self._waiters):
            future, need = entry
            if future.done():
                self._waiters.remove(entry)
                continue
            if not placement.takes_placements(worker, need.pool):
                continue
            try:
                taken = self._take(need)
            except placement.NoMemory as exc:
                self._waiters.remove(entry)
                future.set_exception(exc)
                continue
            if taken is None:
                continue
            self._waiters.remove(entry)
            future.set_result(taken)
            if placement.free_slots(worker) == 0:
                return

    async def stop(self, grace: float = 5.0) -> None:
        self._stopping = True
        for future, _ in self._waiters:
            future.cancel()
        workers = list(self.workers.values())
        for worker in workers:
            worker.process.close_pipe()  # it goes (it ignores SIGTERM: fork_server.py)
        for worker in workers:
            try:
                async with asyncio.timeout(grace):
                    await worker.process.wait()
            except TimeoutError:
                worker.process.kill()
                await worker.process.wait()
        for task in list(self._watchers):
            task.cancel()
