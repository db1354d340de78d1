"""The FakeSubstrate's workers (fake.py), when it is asked to model them: N workers of
`capacity` actors and `memory` bytes each (None: no limit), as the platform's multi-actor
workers (docs/SPEC.md §2.7). An actor is placed when it wakes on the worker with the most
free slots (the first of them on a tie), reserving its template's memory limit, and leaves
when it parks, crashes or is deleted; a placement no worker has room for — no free slot, or
not the memory — is refused, as a worker over its memory refuses one (RESOURCE_EXHAUSTED,
said by the caller). A draining worker takes no placement and keeps its actors.

In memory, no clock, no I/O: the listing is what `Substrate.list_workers` answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentsession_core.substrate.interface import WorkerInfo


@dataclass(eq=False)
class FakeWorker:
    name: str
    capacity: int
    memory: int | None
    reserved: dict[str, int] = field(default_factory=dict)  # actor → bytes it reserves here
    draining: bool = False

    def room_for(self, reserve: int) -> bool:
        if self.draining or len(self.reserved) >= self.capacity:
            return False
        return self.memory is None or sum(self.reserved.values()) + reserve <= self.memory

    def info(self) -> WorkerInfo:
        return WorkerInfo(
            name=self.name,
            pool=None,
            capacity=self.capacity,
            allocated=len(self.reserved),
            state="draining" if self.draining else "active",
            actors=tuple(sorted(self.reserved)),
            memory_limit_bytes=self.memory,
        )


class NoRoom(Exception):
    """No worker has a free slot with the memory for the actor."""


class FakeWorkers:
    def __init__(self, count: int, capacity: int, memory: int | None) -> None:
        if count < 1 or capacity < 1:
            raise ValueError("workers and worker_capacity: at least 1")
        self.workers = [FakeWorker(f"fake-{i}", capacity, memory) for i in range(count)]
        self._where: dict[str, FakeWorker] = {}

    def place(self, actor: str, reserve: int | None) -> str:
        """The worker `actor` now runs on (where it already is, if placed); NoRoom."""
        if (held := self._where.get(actor)) is not None:
            return held.name
        need = reserve or 0
        fits = [w for w in self.workers if w.room_for(need)]
        if not fits:
            w = self.workers[0]
            memory = f" and {w.memory} bytes" if w.memory is not None else ""
            raise NoRoom(
                f"no worker has room for actor {actor} ({len(self.workers)} workers of "
                f"{w.capacity} actors{memory}; its template reserves {need} bytes)"
            )
        best = min(fits, key=lambda w: len(w.reserved) - w.capacity)  # the first of the roomiest
        best.reserved[actor] = need
        self._where[actor] = best
        return best.name

    def release(self, actor: str) -> None:
        held = self._where.pop(actor, None)
        if held is not None:
            held.reserved.pop(actor, None)

    def clear(self) -> None:
        """Every worker died: none holds anything."""
        for w in self.workers:
            w.reserved.clear()
        self._where.clear()

    def drain(self, name: str) -> None:
        for w in self.workers:
            if w.name == name:
                w.draining = True
                return
        raise KeyError(name)

    def listing(self) -> list[WorkerInfo]:
        return [w.info() for w in self.workers]


__all__ = ["FakeWorker", "FakeWorkers", "NoRoom"]
