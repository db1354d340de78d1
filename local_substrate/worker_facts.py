"""What the local substrate says about its workers, on either wire.

The platform's workers hold many actors: a worker's status carries its `capacity` (how many
actors it may hold) and `allocated` (how many it holds now), and the control API lists each
worker with the actors assigned to it (docs/SPEC.md §2.7). Both wires (JSON/HTTP in
control.py, ateapi.Control over gRPC in ate_control.py) answer from these facts, so the two
never disagree: the lifecycle builds them, the wires only encode them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from local_substrate.pool import WorkerProc


class WorkerState(StrEnum):
    ACTIVE = "active"
    DRAINING = "draining"  # takes no new placements; its actors stay until they park


@dataclass(frozen=True)
class WorkerFacts:
    name: str  # the worker's name, as its actors' `worker` field says it
    pool: str  # its pool's name ("" without pools)
    state: WorkerState
    capacity: int  # actors it may hold at once
    allocated: int  # running actors it holds now: the slots taken (a paused one takes none)
    memory_limit_bytes: int  # 0: no limit
    # The bytes counted against the limit (local_substrate/placement.py): each running
    # actor's template memory limit, reserved while it runs, plus each paused state's bytes.
    memory_used_bytes: int
    actors: tuple[str, ...]  # "atespace/name" of each actor assigned to it, sorted
    paused: tuple[str, ...] = ()  # those of `actors` paused here (their state in its memory)
    pid: int = 0  # its OS process


def facts_of(worker: WorkerProc) -> WorkerFacts:
    """One worker's facts from the pool's bookkeeping (pool.py), as both wires list them."""
    from local_substrate import placement  # the pool's own module; kept out of the import

    return WorkerFacts(
        name=worker.name,
        pool=worker.pool,
        state=WorkerState.DRAINING if worker.draining else WorkerState.ACTIVE,
        capacity=worker.capacity,
        allocated=len(worker.running),
        memory_limit_bytes=worker.memory or 0,
        memory_used_bytes=placement.reserved(worker),
        actors=tuple(sorted({*worker.running, *worker.paused})),
        paused=tuple(sorted(worker.paused)),
        pid=worker.pid,
    )
