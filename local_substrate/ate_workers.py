"""The local substrate's workers on the ate wire: WorkerFacts (worker_facts.py, which the JSON
wire answers from too) as the newest control API's Worker and ActorAssignment messages, and
the paging of both listings (docs/SPEC.md §2.5, §2.7).

What each field says here:
- Worker.metadata.name and worker_pod: the worker's name, the one its actors'
  worker_assignment carries; ip 127.0.0.1 (workers listen on loopback); node_name the host's
  name; worker_pool the pool's name ("local" without pools), as in WorkerAssignment.
- status.capacity.actors: how many actors the worker may hold at once; capacity.resources its
  memory limit, when it has one. status.allocated.actors: the slots taken now (its running
  actors); allocated.resources the memory counted against the limit (each running actor's
  template limit plus each paused state's bytes, placement.py), as the platform sums its
  actors' resources there. The assignment listing names paused actors too: their state is in
  the worker's memory.
- ActorAssignment: the actor's ref, uid (also metadata.name, as the platform names an
  assignment) and template.

Pages are in name order; a page token is the last name of the previous page, as ListActors'
(ate_control.py), so a worker replaced between pages moves no other across a boundary.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import TypeVar

from agentsession_core.script.quantity import format_quantity
from agentsession_core.substrate.ate.control_codec import MEMORY_LIMIT
from agentsession_core.substrate.ate.proto import ateapi_pb2 as pb
from local_substrate.actors import Actor
from local_substrate.protocol import WireError
from local_substrate.worker_facts import WorkerFacts, WorkerState

WORKER_POOL = "local"  # the worker_pool of a substrate without pools
WORKER_IP = "127.0.0.1"
DEFAULT_PAGE = 100
MAX_PAGE = 1000  # the cap a real server applies (the notes §3)
NODE_NAME = socket.gethostname()

STATE_OF = {
    WorkerState.ACTIVE: pb.WORKER_STATE_ACTIVE,
    WorkerState.DRAINING: pb.WORKER_STATE_DRAINING,
}

T = TypeVar("T")


def worker_message(facts: WorkerFacts) -> pb.Worker:
    capacity = pb.WorkerResources(actors=facts.capacity)
    if facts.memory_limit_bytes:
        capacity.resources.limits.append(_memory(facts.memory_limit_bytes))
    allocated = pb.WorkerResources(actors=facts.allocated)
    if facts.memory_used_bytes:
        allocated.resources.limits.append(_memory(facts.memory_used_bytes))
    return pb.Worker(
        metadata=pb.ResourceMetadata(name=facts.name),
        worker_pool=facts.pool or WORKER_POOL,
        worker_pod=facts.name,
        node_name=NODE_NAME,
        ip=WORKER_IP,
        status=pb.WorkerStatus(
            state=STATE_OF.get(facts.state, pb.WORKER_STATE_UNSPECIFIED),
            capacity=capacity,
            allocated=allocated,
        ),
    )


def assignment_message(key: str, actor: Actor | None) -> pb.ActorAssignment:
    """`key` is "atespace/name"; `actor` the live actor of that name (None: it went away
    between the worker's facts and this answer, so only its ref is known)."""
    atespace, _, name = key.partition("/")
    message = pb.ActorAssignment(actor=pb.ObjectRef(atespace=atespace, name=name))
    if actor is not None:
        message.actor_uid = actor.uid
        message.metadata.name = actor.uid
        message.actor_template_ref.CopyFrom(
            pb.ObjectRef(atespace=actor.template[0], name=actor.template[1])
        )
    return message


def find(workers: Sequence[WorkerFacts], ref: pb.ObjectRef) -> WorkerFacts:
    for facts in workers:
        if facts.name == ref.name:
            return facts
    raise WireError("NOT_FOUND", f"worker {ref.name!r} not found")


def page(
    items: Sequence[T], key: Callable[[T], str], page_size: int, page_token: str
) -> tuple[list[T], str]:
    """One page of `items` in `key` order after `page_token`, and the next page's token."""
    if page_size < 0:
        raise WireError("INVALID_ARGUMENT", f"page_size {page_size} is negative")
    size = min(page_size or DEFAULT_PAGE, MAX_PAGE)
    after = sorted((i for i in items if key(i) > page_token), key=key)
    chosen = after[:size]
    return chosen, key(chosen[-1]) if len(after) > size else ""


def _memory(size: int) -> pb.Limits:
    return pb.Limits(name=MEMORY_LIMIT, quantity=format_quantity(size))
