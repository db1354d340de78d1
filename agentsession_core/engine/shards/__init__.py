"""Scale-out: one run's load over K generator processes (shards) on Dask (issue #12).

`generator.shards: 1` (the default) is today's single process, with no Dask at all;
`shards: K > 1` or `auto` (one per core) splits the population exactly (split.py) over K
shards, each a long-lived Engine on a Dask worker (shard.py) — a local cluster of worker
processes, or an existing scheduler given as `generator.cluster` (cluster.py). The
coordinator, `ShardedLoad` (load.py), is a load like this process's own (engine/load.py): a
Run, a campaign and the flow drive it unchanged. It merges the shards' per-second intervals
into one recorder (stream.py) that windows, abort rules and drift read as they read a single
process's; its drains (pump.py) and the carry-on of a lost shard's sessions (losses.py) are
parts it owns, over the one list of shards (fleet.py).

Nothing here is imported unless a run is sharded: Dask loads only then.
"""
