"""Which worker pool each actor runs on (docs/SPEC.md §2.6).

A micro-VM snapshot records the CPU it was taken on and cannot be restored on another CPU
model, so an actor keeps one pool for its whole life. Its pool is a function of the run seed
and the actor's name alone: drawn from the seeded stream of that name, so the same name gets
the same pool whenever it is created again (after a failed resume, in another shard, after a
restart, with the pools listed in another order), and a replacement, which has a new name and
no snapshot yet, draws afresh. Over many names the shares follow the weights.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from itertools import accumulate

from agentsession_core.engine.pacing import derive_seed
from agentsession_core.measure.stats import TIME_TO_WAKE_ROW, RowKey, breakdown
from agentsession_core.substrate.protocol import POOL_LABEL


class PoolDraw:
    """The pools of `target.worker_pools` ({name: positive integer weight})."""

    __slots__ = ("_bounds", "_names", "seed")

    def __init__(self, seed: int, weights: Mapping[str, int]) -> None:
        if not weights or min(weights.values()) < 1:
            raise ValueError("worker pools need at least one pool, every weight at least 1")
        self.seed = seed
        # In name order: the same pools and weights draw the same, however they were listed.
        self._names = sorted(weights)
        self._bounds = list(accumulate(weights[name] for name in self._names))

    @classmethod
    def of(cls, seed: int, weights: Mapping[str, int] | None) -> PoolDraw | None:
        """None without pools: then no actor gets a selector of its own."""
        return cls(seed, weights) if weights else None

    def pool_of(self, actor: str) -> str:
        point = derive_seed(self.seed, "worker-pool", actor) % self._bounds[-1]
        return self._names[bisect_right(self._bounds, point)]

    def selector(self, actor: str) -> dict[str, str]:
        """The actor's worker_selector.match_labels."""
        return {POOL_LABEL: self.pool_of(actor)}

    def wake_row(self, actor: str) -> RowKey:
        """The per-pool TimeToWake row the actor's wakes are booked on as well."""
        return breakdown(TIME_TO_WAKE_ROW, POOL_LABEL, self.pool_of(actor))


def split_workers(workers: int, weights: Mapping[str, int]) -> dict[str, int]:
    """`workers` shared among the pools by weight (largest remainder, at least one each): the
    embedded local substrate's pools for a run with `target.worker_pools`."""
    if workers < len(weights):
        raise ValueError(f"{workers} workers cannot make {len(weights)} pools")
    spare = workers - len(weights)
    total = sum(weights.values())
    exact = {name: spare * w / total for name, w in weights.items()}
    counts = {name: 1 + int(share) for name, share in exact.items()}
    left = workers - sum(counts.values())
    by_remainder = sorted(weights, key=lambda n: (-(exact[n] - int(exact[n])), n))
    for name in by_remainder[:left]:
        counts[name] += 1
    return counts
