"""Scale-out: one run over K generator processes (shards) on Dask (issue #12).

`generator.shards: 1` (the default) is today's single process, with no Dask at all;
`shards: K > 1` or `auto` (one per core) splits the population exactly (split.py) over K
shards, each a long-lived Engine on a Dask worker (shard.py) — a local cluster of worker
processes, or an existing scheduler given as `generator.cluster` (cluster.py). The
coordinator, `ShardedRun` (coordinator.py), is a Run: the campaign and the flow drive it
unchanged, and it merges the shards' per-second intervals into one recorder (stream.py)
that windows, abort rules and drift read as they read a single process's.

Only `open_run` is imported eagerly; Dask and the coordinator load when a run is sharded.
"""

from __future__ import annotations

from typing import Any

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.run import Run


def is_sharded(params: RunParams) -> bool:
    """Whether `params` asks for more than this one process (or for a Dask cluster)."""
    generator = params.generator
    if generator.cluster is not None:
        return True
    if generator.shards == "auto":
        from agentsession_core.engine.shards.split import shard_count

        return shard_count(generator, params.population.sessions) > 1
    return generator.shards > 1


def open_run(params: RunParams, **kwargs: Any) -> Run:
    """A Run for `params`: the single-process Run, or a ShardedRun when it is sharded.
    Keyword arguments are Run's (substrate, live, handle_signals)."""
    if not is_sharded(params):
        return Run(params, **kwargs)
    from agentsession_core.engine.shards.coordinator import ShardedRun

    return ShardedRun(params, **kwargs)


__all__ = ["is_sharded", "open_run"]
