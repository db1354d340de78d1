"""Op, Step and Script (docs/SPEC.md §1), the op-kind tables, and a script's declared budget.

Durations are whole nanoseconds (`Step.think_ns`); `Step.think_seconds` is the float view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, model_validator

OpKind = Literal[
    "ping",
    "fill_ram",
    "churn_ram",
    "walk_ram",
    "ingest",
    "write_disk",
    "read_disk_digest",
    "read_disk_data",
    "burn_cpu",
    "dwell",
]
# The arguments each kind takes, in the order encode writes them. All are required except
# burn_cpu's parallel (default 1).
OP_ARGS: dict[str, tuple[str, ...]] = {
    "ping": (),
    "fill_ram": ("key", "size"),
    "churn_ram": ("key", "size"),
    "walk_ram": ("key",),
    "ingest": ("key", "size"),
    "write_disk": ("key", "size"),
    "read_disk_digest": ("key",),
    "read_disk_data": ("key",),
    "burn_cpu": ("millis", "parallel"),
    "dwell": ("millis",),
}
OPTIONAL_ARGS = {("burn_cpu", "parallel")}
ARG_NAMES = ("key", "size", "millis", "parallel")
RAM_WRITERS = {"fill_ram"}
RAM_READERS = {"churn_ram", "walk_ram"}
DISK_WRITERS = {"ingest", "write_disk"}
DISK_READERS = {"read_disk_digest", "read_disk_data"}


# Scalars are strict (no "5" → 5); sequences accept lists and are stored as tuples so that
# a script is hashable.
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Op(BaseModel):
    model_config = _FROZEN

    kind: OpKind
    key: StrictStr | None = None
    size: StrictInt | None = None  # bytes
    millis: StrictInt | None = None
    parallel: StrictInt | None = None  # burn_cpu only; 0 and absent both mean 1

    @model_validator(mode="before")
    @classmethod
    def _parallel_defaults_to_one(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("kind") == "burn_cpu":
            if data.get("parallel") in (None, 0):
                data = {**data, "parallel": 1}
        return data


class Step(BaseModel):
    model_config = _FROZEN

    name: StrictStr
    agent: StrictStr
    think_ns: StrictInt
    ops: tuple[Op, ...]

    @property
    def think_seconds(self) -> float:
        return self.think_ns / 1e9


class Script(BaseModel):
    model_config = _FROZEN

    name: StrictStr
    min_actor_memory: StrictInt  # bytes
    steps: tuple[Step, ...]

    @property
    def ops_per_lap(self) -> int:
        return sum(len(step.ops) for step in self.steps)

    @property
    def think_ns_per_lap(self) -> int:
        return sum(step.think_ns for step in self.steps)

    @property
    def think_seconds_per_lap(self) -> float:
        return self.think_ns_per_lap / 1e9


@dataclass(frozen=True)
class Budget:
    """What a script declares it holds in an actor (docs/SPEC.md §1.3)."""

    ram_bytes: int
    disk_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.ram_bytes + self.disk_bytes


def budget(script: Script) -> Budget:
    """RAM: Σ over keys of the largest fill_ram; disk: Σ over keys of the largest
    ingest/write_disk. Other ops add nothing."""
    ram: dict[str, int] = {}
    disk: dict[str, int] = {}
    for step in script.steps:
        for op in step.ops:
            held = ram if op.kind in RAM_WRITERS else disk if op.kind in DISK_WRITERS else None
            if held is not None and op.key is not None and op.size is not None:
                held[op.key] = max(held.get(op.key, 0), op.size)
    return Budget(ram_bytes=sum(ram.values()), disk_bytes=sum(disk.values()))
