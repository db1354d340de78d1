"""A Dask cluster of worker processes on this machine, for the sharded tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def local_scheduler(workers: int) -> Iterator[str]:
    """`workers` one-thread worker processes (no memory limit, no dashboard); yields the
    scheduler's address for `generator.cluster`."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        memory_limit=0,
        dashboard_address=None,
    ) as cluster:
        yield cluster.scheduler_address
