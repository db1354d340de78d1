"""The Dask side of a sharded run: a cluster to run on and one ShardActor per shard.

No `cluster` address: a LocalCluster of K worker processes on this machine (one thread each,
no memory limit: the memory is the engine's, not Dask's), closed with the run. An address
(`tcp://host:8786`): an existing scheduler and its workers, left running. Shards are placed
one per worker, round robin when the cluster has fewer workers than shards.

dask.distributed is imported here only, so a one-process run never loads it.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any

from agentsession_core.engine.shards.shard import ShardActor
from agentsession_core.errors import AgentsessionError

log = logging.getLogger("agentsession")

CONNECT_TIMEOUT_S = 30.0
WORKERS_TIMEOUT_S = 120.0


class ClusterError(AgentsessionError):
    """The Dask cluster could not be started or reached."""


class ShardCluster:
    """`async with ShardCluster(address, workers=K) as cluster:` a Dask client (asynchronous,
    on the running loop) and, without an address, the local cluster behind it."""

    def __init__(self, address: str | None, *, workers: int | None) -> None:
        self.address = address
        self.local_workers = workers
        self.cluster: Any = None
        self.client: Any = None

    @property
    def where(self) -> str:
        return self.address or f"local cluster ({self.local_workers} worker processes)"

    async def __aenter__(self) -> ShardCluster:
        from distributed import Client, LocalCluster

        try:
            if self.address is None:
                self.cluster = await LocalCluster(
                    n_workers=self.local_workers,
                    threads_per_worker=1,
                    processes=True,
                    memory_limit=0,
                    dashboard_address=None,
                    asynchronous=True,
                )
                self.client = await Client(self.cluster, asynchronous=True)
            else:
                self.client = await Client(
                    self.address, asynchronous=True, timeout=CONNECT_TIMEOUT_S
                )
            await self.client.wait_for_workers(self.local_workers or 1, timeout=WORKERS_TIMEOUT_S)
        except Exception as exc:
            await self.__aexit__(None, None, None)
            raise ClusterError(f"Dask {self.where}: {type(exc).__name__}: {exc}") from None
        log.info("dask: %s, scheduler %s", self.where, self.client.scheduler.address)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for closing in (self.client, self.cluster):
            if closing is not None:
                with contextlib.suppress(Exception):
                    await closing.close()

    async def workers(self) -> dict[str, int]:
        """Worker address -> threads, as the scheduler sees them now."""
        info = await self.client.scheduler.identity()
        return {addr: int(w.get("nthreads", 1)) for addr, w in sorted(info["workers"].items())}

    async def place(self, count: int) -> list[str]:
        """A worker for each of `count` shards: one per worker, round robin beyond that."""
        workers = list(await self.workers())
        if not workers:
            raise ClusterError(f"Dask {self.where} has no workers")
        if len(workers) < count:
            log.warning(
                "dask: %d shards on %d workers: some workers run more than one shard",
                count,
                len(workers),
            )
        return [workers[k % len(workers)] for k in range(count)]

    async def start_actor(self, index: int, worker: str) -> tuple[Any, Any]:
        """A ShardActor on `worker`: (its future, the actor handle)."""
        future = self.client.submit(
            ShardActor,
            actor=True,
            workers=[worker],
            allow_other_workers=False,
            key=f"agentsession-shard-{index}-{uuid.uuid4().hex[:8]}",
        )
        return future, await future


__all__ = ["ClusterError", "ShardCluster"]
