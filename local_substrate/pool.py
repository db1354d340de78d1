"""The worker pool: a fixed number of worker processes, handed out one actor at a time.

Each worker is an OS process forked from the pool's fork server (worker_process.py), on its
own loopback port (handshake: `LISTENING <port>` down its pipe). The pipe's other end stays
with us; when we go, it goes.

`acquire` hands out a free worker, preferring the one that holds the actor's paused state
(its resume is a local swap), otherwise the free worker holding the fewest paused bytes.
Waiters are served first come, first served; `acquire` gives up after its timeout
(the caller turns that into RESOURCE_EXHAUSTED).

Worker pools (docs/SPEC.md §2.6): started with `pools` ({name: workers}), the slots are cut
into named pools in order and each worker carries the label `pool: NAME`, as a platform's
WorkerPool labels its workers. `acquire(pool=NAME)` hands out only that pool's workers, and a
freed worker goes to the first waiter its pool can serve; a replacement worker keeps its
slot's pool. Without pools every worker is unlabelled and `pool=None` takes any of them.

A watcher per process notices its exit; unless the pool is stopping, the worker is
reported to `on_crash` (the server marks its actors CRASHED) and a replacement is started
in the same slot, so the pool returns to full size.
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
from pathlib import Path

from agentsession_core.substrate.protocol import POOL_LABEL, WORKER_SECRET_ENV
from local_substrate import worker_process
from local_substrate.worker_process import WorkerProcess

SPAWN_TIMEOUT = 60.0


@dataclass(eq=False)
class WorkerProc:
    slot: int
    generation: int
    process: WorkerProcess
    port: int
    scratch: Path
    hosting: str | None = None  # "atespace/name" of the running actor
    paused: dict[str, int] = field(default_factory=dict)  # actor → bytes held here
    alive: bool = True
    pool: str = ""  # its pool's name, its one label (pool: NAME); "" without pools

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
    ) -> None:
        self.pools = dict(pools or {})
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
        self._free: list[WorkerProc] = []
        self._waiters: deque[tuple[asyncio.Future[WorkerProc], str | None]] = deque()
        self._watchers: set[asyncio.Task[None]] = set()
        self._stopping = False

    async def start(self) -> None:
        spawned = await asyncio.gather(*(self._spawn(slot, 0) for slot in range(self.size)))
        for worker in spawned:
            self._give(worker)

    async def _spawn(self, slot: int, generation: int) -> WorkerProc:
        scratch = self.scratch_root / f"w{slot}-{generation}"
        await asyncio.to_thread(scratch.mkdir, parents=True, exist_ok=True)
        seed = self.seed * 1_000_003 + slot * 1009 + generation
        argv = ["--scratch", str(scratch), "--seed", str(seed)]
        try:
            process, port = await worker_process.start(
                [*argv, *self.worker_args], self.secret, SPAWN_TIMEOUT
            )
        except worker_process.WorkerDidNotStart as exc:
            raise RuntimeError(f"worker slot {slot} did not start: {exc}") from exc
        pool = self._pool_of[slot] if self._pool_of else ""
        worker = WorkerProc(slot, generation, process, port, scratch, pool=pool)
        self.workers[slot] = worker
        task = asyncio.create_task(self._watch(worker))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)
        return worker

    async def _watch(self, worker: WorkerProc) -> None:
        await worker.process.wait()
        worker.alive = False
        with contextlib.suppress(ValueError):
            self._free.remove(worker)
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

    def free_count(self, pool: str | None = None) -> int:
        return sum(1 for w in self._free if pool is None or w.pool == pool)

    def waiting(self, pool: str | None = None) -> int:
        """Acquires waiting for a free worker (the wake queue of /metrics)."""
        return sum(
            1
            for future, wants in self._waiters
            if not future.done() and (pool is None or wants == pool)
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

    async def acquire(
        self, prefer: WorkerProc | None, timeout: float, pool: str | None = None
    ) -> WorkerProc:
        """A free worker (of `pool`, when given), waiting up to `timeout` for one."""
        if prefer is not None and prefer in self._free:
            self._free.remove(prefer)
            return prefer
        free = [w for w in self._free if pool is None or w.pool == pool]
        if free:
            best = min(free, key=lambda w: sum(w.paused.values()))
            self._free.remove(best)
            return best
        future: asyncio.Future[WorkerProc] = asyncio.get_running_loop().create_future()
        entry = (future, pool)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(future)
        except TimeoutError:
            if future.done() and not future.cancelled():
                # Handed over just as we gave up: pass it on rather than leak it.
                self.release(future.result())
            future.cancel()
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)

    def release(self, worker: WorkerProc) -> None:
        worker.hosting = None
        if worker.alive and not self._stopping:
            self._give(worker)

    def _give(self, worker: WorkerProc) -> None:
        for entry in list(self._waiters):
            future, wants = entry
            if future.done():
                self._waiters.remove(entry)
            elif wants is None or wants == worker.pool:
                self._waiters.remove(entry)
                future.set_result(worker)
                return
        self._free.append(worker)

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
