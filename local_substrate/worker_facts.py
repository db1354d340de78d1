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


class WorkerState(StrEnum):
    ACTIVE = "active"
    DRAINING = "draining"  # takes no new placements; its actors stay until they park


@dataclass(frozen=True)
class WorkerFacts:
    name: str  # the worker's name, as its actors' `worker` field says it
    pool: str  # its pool's name ("" without pools)
    state: WorkerState
    capacity: int  # actors it may hold at once
    allocated: int  # actors it holds now (running or paused in its memory)
    memory_limit_bytes: int  # 0: no limit
    memory_used_bytes: int  # the bytes its actors hold now
    actors: tuple[str, ...]  # "atespace/name" of each actor assigned to it, sorted
