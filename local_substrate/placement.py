"""Where a waking actor goes: the choice of a worker with room (docs/SPEC.md §2.7), and the
pool an actor may run on (§2.6). Pure decisions over the workers' bookkeeping: pool.py acts on
them, actors.py turns their refusals into the wire's errors.

Room on a worker is two things:
- a **slot**: a worker runs at most `capacity` actors at once (a paused actor's state stays
  in the worker's memory but takes no slot, as today: its worker is free for others);
- **memory**: with a memory limit, the worker's reservations, each running actor's template
  memory limit (what it may grow to: the glutton refuses it more, glutton.py) plus each
  paused state's held bytes, may not pass the limit. Reserving the limit rather than counting
  today's bytes makes the refusal certain at placement time, never a surprise halfway through
  an actor's fill, and makes the frontier predictable from the templates' sizes, as a
  platform's scheduler reserves an actor's resource request. An actor whose template has no
  memory limit reserves nothing.

The choice, among the workers of the actor's pool that are alive, not draining, with a free
slot and the memory: the worker holding the actor's paused state first (its resume is a local
swap), then the most free slots (spread), then the fewest paused bytes, then the one that has
had room longest. With capacity 1 this is exactly the choice of one actor per worker. When
no worker has a free slot, or some have a slot and none the memory, the caller waits for
room (pool.py), bounded by the park timeout, as the platform parks a wake while its pool is
saturated: memory is freed as surely as slots are, by the park in flight beside the wake (a
turnover swap at the memory's frontier needs both reservations for the moment the one parks
while the other wakes; refused at once, such wakes held a density search at 4 of the 6
residents the memory predicts: issue 38). Only an actor that no worker of its pool could hold
even empty is refused at once (`NoMemory`: RESOURCE_EXHAUSTED); a wait that times out says
which it lacked (`shortage`).

Which pool (`pool_for`): the actor's selector picks it, and once it has run on a pool it is
bound there (docs/SPEC.md §2.6).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agentsession_core.substrate.protocol import NO_POOL_MATCH
from local_substrate.protocol import WireError

if TYPE_CHECKING:
    from local_substrate.actor import Actor
    from local_substrate.pool import Pool


class Placeable(Protocol):
    """What the choice reads of a worker (pool.WorkerProc has it)."""

    @property
    def name(self) -> str: ...

    pool: str
    alive: bool
    draining: bool
    capacity: int
    memory: int | None  # bytes; None: no limit
    running: dict[str, int]  # actor → bytes reserved
    paused: dict[str, int]  # actor → paused bytes held
    freed_seq: int  # when it last had a slot come free: smaller is longer ago


@dataclass(frozen=True)
class Need:
    """One placement: the actor's key, the bytes it reserves, the pool it must run on (None:
    any) and the worker holding its paused state (None: none)."""

    actor: str
    reserve: int
    pool: str | None = None
    prefer: Placeable | None = None


class NoMemory(Exception):
    """No worker of the actor's pool has the memory for it: now (`shortage`, said when a wait
    times out) or ever (`choose` refuses at once)."""

    def __init__(self, need: Need, nearest: Placeable, *, ever: bool = False) -> None:
        self.need = need
        if ever:
            said = (
                f"no worker can hold actor {need.actor} (it reserves {need.reserve} bytes, its "
                f"template's memory limit); the largest worker of its pool has "
                f"{nearest.memory} bytes (worker {nearest.name})"
            )
        else:
            said = (
                f"no worker has memory for actor {need.actor} (it reserves {need.reserve} "
                f"bytes, its template's memory limit); the most any worker with a free slot "
                f"has free is {free_memory(nearest, need.actor)} bytes (worker {nearest.name}, "
                f"memory {nearest.memory} bytes)"
            )
        super().__init__(said)


def reserved(worker: Placeable) -> int:
    """Bytes counted against the worker's memory: running actors' reservations and paused
    states."""
    return sum(worker.running.values()) + sum(worker.paused.values())


def free_slots(worker: Placeable) -> int:
    return max(0, worker.capacity - len(worker.running))


def free_memory(worker: Placeable, actor: str) -> int | None:
    """The bytes `actor` could reserve there (its own paused state there counts as free: it
    turns into the reservation); None without a limit."""
    if worker.memory is None:
        return None
    return worker.memory - reserved(worker) + worker.paused.get(actor, 0)


def takes_placements(worker: Placeable, pool: str | None) -> bool:
    return worker.alive and not worker.draining and (pool is None or worker.pool == pool)


def fits(worker: Placeable, need: Need) -> bool:
    free = free_memory(worker, need.actor)
    return free is None or need.reserve <= free


def choose(workers: Iterable[Placeable], need: Need) -> Placeable | None:
    """The worker to place `need` on; None when none of its pool has room now (wait for a
    slot or the memory); NoMemory when none could hold it even empty."""
    candidates = [w for w in workers if takes_placements(w, need.pool)]
    if candidates and all(w.memory is not None and need.reserve > w.memory for w in candidates):
        raise NoMemory(need, max(candidates, key=lambda w: w.memory or 0), ever=True)
    fitting = [w for w in candidates if free_slots(w) > 0 and fits(w, need)]
    if not fitting:
        return None
    if need.prefer is not None and need.prefer in fitting:
        return need.prefer
    return min(fitting, key=lambda w: (-free_slots(w), sum(w.paused.values()), w.freed_seq))


def shortage(workers: Iterable[Placeable], need: Need) -> NoMemory | None:
    """Why `need` still has no room after its wait: NoMemory when some worker of its pool has
    a free slot and none the memory; None when every slot is taken."""
    open_ = [w for w in workers if takes_placements(w, need.pool) and free_slots(w) > 0]
    if not open_ or any(fits(w, need) for w in open_):
        return None
    return NoMemory(need, max(open_, key=lambda w: free_memory(w, need.actor) or 0))


def pool_for(actor: Actor, pool: Pool, *, router: bool) -> str | None:
    """The pool the actor may run on (None: any worker); FAILED_PRECONDITION when its
    selector matches no pool's workers (docs/SPEC.md §2.6)."""
    have = ", ".join(pool.pools) or "none"
    if actor.pool is not None:
        if actor.pool in pool.pools:
            return actor.pool
        # A store reused by a substrate with other pools: the snapshot cannot move.
        raise WireError(
            "FAILED_PRECONDITION",
            f"{NO_POOL_MATCH}: actor {actor.key}'s snapshot belongs to pool "
            f"{actor.pool}, this substrate's pools: {have}",
            router=router,
        )
    try:
        return pool.pool_matching(actor.selector)
    except KeyError:
        raise WireError(
            "FAILED_PRECONDITION",
            f"{NO_POOL_MATCH}: actor {actor.key} selects {actor.selector}, "
            f"this substrate's pools: {have}",
            router=router,
        ) from None
