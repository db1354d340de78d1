"""The shards of one sharded load: where each runs, its plan, its Dask actor, whether it is
lost, when it started and its last answer. The load (load.py), its drains (pump.py) and its
carry-ons (losses.py) read and grow this one list; none of them holds a copy."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentsession_core.engine.shards.split import ShardPlan
from agentsession_core.engine.shards.stream import ShardStream
from agentsession_core.errors import AgentsessionError

# lose(k, why, silent=...): shard k is lost (`silent`: it stopped answering, may still run)
Lose = Callable[..., Awaitable[None]]


@dataclass
class ShardFleet:
    stream: ShardStream = field(default_factory=lambda: ShardStream(0))
    plans: list[ShardPlan] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)  # shard -> the Dask worker it runs on
    known_workers: set[str] = field(default_factory=set)  # the cluster's when the run started
    actors: list[Any] = field(default_factory=list)  # shard -> its ShardActor handle
    futures: list[Any] = field(default_factory=list)
    info: list[dict[str, Any]] = field(default_factory=list)  # shard -> pid, host (open)
    lost: dict[int, str] = field(default_factory=dict)  # shard -> why
    finals: dict[int, dict[str, Any]] = field(default_factory=dict)  # shard -> last answer
    start_unix: dict[int, int] = field(default_factory=dict)  # shard -> its start second
    t0_ns: int | None = None  # the common t0, on this process's monotonic clock
    # Set when shards got their start, or were lost: a carry-on waits on it.
    started: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def count(self) -> int:
        return self.stream.count

    @property
    def live(self) -> list[int]:
        return [k for k in range(len(self.actors)) if k not in self.lost]

    @property
    def live_workers(self) -> list[str]:
        """The distinct workers some live shard runs on (a worker is one generator host)."""
        return sorted({self.workers[k] for k in self.live})

    @property
    def first_split(self) -> list[ShardPlan]:
        return [plan for plan in self.plans if plan.adopted_from is None]

    def is_lost(self, k: int) -> bool:
        """Dask's own word: the actor's task is no longer held by a live worker."""
        return self.futures[k].status not in ("finished", "pending")

    async def each(
        self, lose: Lose, method: str, *args: Any, shards: list[int] | None = None
    ) -> None:
        """`method` on every live shard (or on `shards`) at once. A shard lost meanwhile is
        `lose`'s (the load's stop reason, or its carry-on, says so); a shard's own error (a
        refused preflight) is raised."""

        async def one(k: int) -> None:
            try:
                await getattr(self.actors[k], method)(*args)
            except AgentsessionError:
                raise
            except Exception as exc:
                if k not in self.lost and not self.is_lost(k):
                    raise AgentsessionError(f"shard {k}: {method}: {exc}") from exc
                await lose(k, f"{type(exc).__name__}: {exc}")

        live = self.live
        await asyncio.gather(*(one(k) for k in (live if shards is None else shards) if k in live))

    async def on_live(self, method: str, *args: Any) -> None:
        """`method` on every live shard at once, whatever each answers (a change by hand, a
        substrate back): a shard that fails it is the drains' to lose."""
        await asyncio.gather(
            *(getattr(self.actors[k], method)(*args) for k in self.live), return_exceptions=True
        )


__all__ = ["Lose", "ShardFleet"]
