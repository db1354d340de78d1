"""The ateapi.Control messages the engine sends, and what it reads out of the answers, in the
terms of the Substrate interface (docs/SPEC.md §2, agentsession_core/substrate/interface.py).

Requests are built here once so the gRPC client, the tests and any fake server agree on
their exact shape; answers become `Template`, `ActorInfo` and `WorkerInfo`. An answer that
cannot be read (a memory limit that is not a byte quantity, a message written to another
schema) raises a SubstrateError with code BAD_BODY.

Answers are read by presence, never by layout version: a sub-message is looked into only when
HasField says the server set it (an older server sets no worker status, a newer one fields we
do not model), and enum numbers newer than ours keep a name of their own (UNKNOWN_<n>).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from agentsession_core.script.quantity import QuantityError, parse_quantity
from agentsession_core.substrate.ate.proto import ateapi_pb2 as pb
from agentsession_core.substrate.ate.wire_check import mismatched_field
from agentsession_core.substrate.errors import BAD_BODY, SubstrateError
from agentsession_core.substrate.interface import ActorInfo, Template, WorkerInfo
from agentsession_core.substrate.protocol import actor_target

# The server caps a ListActors page at 1000 (the ate wire notes): asking for the cap keeps
# cleanup of a 100k-actor run to 100 round trips.
LIST_PAGE_SIZE = 1000

MEMORY_LIMIT = "memory"

# ActorState → ActorInfo.status. The first seven are the engine's own statuses
# (protocol.ACTOR_STATUSES); DELETING, REVERTING and UNSPECIFIED have no engine meaning and
# keep their own names, so nothing that compares statuses mistakes them for a known one.
STATUS_NAMES: dict[int, str] = {
    pb.ACTOR_STATE_RESUMING: "RESUMING",
    pb.ACTOR_STATE_RUNNING: "RUNNING",
    pb.ACTOR_STATE_SUSPENDING: "SUSPENDING",
    pb.ACTOR_STATE_SUSPENDED: "SUSPENDED",
    pb.ACTOR_STATE_PAUSING: "PAUSING",
    pb.ACTOR_STATE_PAUSED: "PAUSED",
    pb.ACTOR_STATE_CRASHED: "CRASHED",
    pb.ACTOR_STATE_DELETING: "DELETING",
    pb.ACTOR_STATE_REVERTING: "REVERTING",
    pb.ACTOR_STATE_UNSPECIFIED: "UNSPECIFIED",
}

# WorkerState → WorkerInfo.state; UNSPECIFIED and newer numbers keep names of their own.
WORKER_STATES: dict[int, str] = {
    pb.WORKER_STATE_ACTIVE: "active",
    pb.WORKER_STATE_DRAINING: "draining",
    pb.WORKER_STATE_UNSPECIFIED: "unspecified",
}

M = TypeVar("M", bound=Message)


# ---------------------------------------------------------------------------------------------
# requests


def object_ref(atespace: str, name: str) -> pb.ObjectRef:
    return pb.ObjectRef(atespace=atespace, name=name)


def get_actor_template_request(namespace: str, name: str) -> pb.GetActorTemplateRequest:
    """Templates live in an atespace too; the engine calls that its namespace."""
    return pb.GetActorTemplateRequest(actor_template=object_ref(namespace, name))


def create_atespace_request(atespace: str) -> pb.CreateAtespaceRequest:
    # An atespace names itself in metadata.name; metadata.atespace stays empty.
    return pb.CreateAtespaceRequest(
        atespace=pb.Atespace(metadata=pb.ResourceMetadata(name=atespace))
    )


def create_actor_request(
    atespace: str,
    name: str,
    template_namespace: str,
    template_name: str,
    worker_selector: Mapping[str, str] | None = None,
) -> pb.CreateActorRequest:
    """Actor.worker_selector carries the actor's own selector ({pool: NAME}, docs/SPEC.md
    §2.6); left unset without one, so the template's selector alone decides."""
    actor = pb.Actor(
        metadata=pb.ResourceMetadata(atespace=atespace, name=name),
        actor_template=object_ref(template_namespace, template_name),
    )
    if worker_selector:
        actor.worker_selector.match_labels.update(worker_selector)
    return pb.CreateActorRequest(actor=actor)


def get_actor_request(atespace: str, name: str) -> pb.GetActorRequest:
    return pb.GetActorRequest(actor=object_ref(atespace, name))


def list_actors_request(
    atespace: str, page_token: str = "", page_size: int = LIST_PAGE_SIZE
) -> pb.ListActorsRequest:
    return pb.ListActorsRequest(atespace=atespace, page_size=page_size, page_token=page_token)


def resume_actor_request(atespace: str, name: str) -> pb.ResumeActorRequest:
    return pb.ResumeActorRequest(actor=object_ref(atespace, name))


def suspend_actor_request(atespace: str, name: str) -> pb.SuspendActorRequest:
    return pb.SuspendActorRequest(actor=object_ref(atespace, name))


def pause_actor_request(atespace: str, name: str) -> pb.PauseActorRequest:
    return pb.PauseActorRequest(actor=object_ref(atespace, name))


def list_workers_request(
    page_token: str = "", page_size: int = LIST_PAGE_SIZE
) -> pb.ListWorkersRequest:
    return pb.ListWorkersRequest(page_size=page_size, page_token=page_token)


def list_worker_actor_assignments_request(
    worker: str, page_token: str = "", page_size: int = LIST_PAGE_SIZE
) -> pb.ListWorkerActorAssignmentsRequest:
    # Workers are global: their refs leave atespace empty.
    return pb.ListWorkerActorAssignmentsRequest(
        worker=pb.ObjectRef(name=worker), page_size=page_size, page_token=page_token
    )


def delete_actor_request(
    atespace: str, name: str, *, any_state: bool = True, version: int = 0, uid: str = ""
) -> pb.DeleteActorRequest:
    """any_state by default: cleanup deletes actors in whatever state a run left them
    (docs/SPEC.md §2.1 "any state", §3.5). The options are sent only when they check
    something, so the default request is exactly {actor, any_state}."""
    request = pb.DeleteActorRequest(actor=object_ref(atespace, name), any_state=any_state)
    if version or uid:
        request.options.CopyFrom(pb.DeleteOptions(version=version, uid=uid))
    return request


# ---------------------------------------------------------------------------------------------
# answers


def parse(message_type: type[M], body: bytes) -> M:
    """A control message from raw bytes, refused with BAD_BODY when it does not decode or was
    written to another schema (see wire_check)."""
    message = message_type()
    try:
        message.ParseFromString(body)
    except (DecodeError, TypeError, ValueError) as exc:
        raise _bad(f"not a {message_type.__name__}: {exc}") from None
    return checked(message)


def checked(message: M) -> M:
    """`message` itself, or BAD_BODY when a declared field arrived with the wrong wire type."""
    mismatch = mismatched_field(message)
    if mismatch is not None:
        raise _bad(f"{type(message).__name__} written to another schema: {mismatch}")
    return message


def actor_status(state: int) -> str:
    """The ActorInfo status for an ActorState; a number newer than the ate wire notes becomes
    UNKNOWN_<n> rather than an error, so one new state cannot break a whole listing."""
    return STATUS_NAMES.get(state, f"UNKNOWN_{state}")


def worker_pod_ip(actor: pb.Actor) -> str | None:
    """The address the router forwards to; None while no worker holds the actor."""
    status = actor.status
    if not status.HasField("worker_assignment"):
        return None
    return status.worker_assignment.worker_pod_ip or None


def worker_name(actor: pb.Actor) -> str | None:
    """The worker holding the actor, as a person would look it up: the Worker resource's name,
    else its pod, else the pod's IP; None while no worker holds the actor."""
    status = actor.status
    if not status.HasField("worker_assignment"):
        return None
    where = status.worker_assignment
    return where.worker.name or where.worker_pod or where.worker_pod_ip or None


def actor_info(actor: pb.Actor, *, atespace: str = "", name: str = "") -> ActorInfo:
    """The engine's view of an Actor. `atespace` and `name` stand in for a metadata the server
    left empty (the caller knows which actor it asked about)."""
    meta = actor.metadata
    ref_atespace, ref_name = meta.atespace or atespace, meta.name or name
    if not ref_atespace or not ref_name:
        raise _bad(f"an Actor without atespace/name: {actor!r:.200}")
    return ActorInfo(
        atespace=ref_atespace,
        name=ref_name,
        status=actor_status(actor.status.state),
        worker=worker_name(actor),
        version=meta.version,
        pool=actor.status.worker_assignment.worker_pool or None,
    )


def memory_limit_bytes(template: pb.ActorTemplate) -> int | None:
    """The template's memory limit in bytes (a Kubernetes quantity in resources.limits);
    None when it sets none. Two different memory limits are refused, not guessed between."""
    return _memory(template.resources, f"template {_ref(template)}")


def _memory(resources: pb.Resources, where: str) -> int | None:
    found: set[int] = set()
    for limit in resources.limits:
        if limit.name != MEMORY_LIMIT:
            continue
        try:
            found.add(parse_quantity(limit.quantity))
        except QuantityError as exc:
            raise _bad(f"{where}: memory limit: {exc}") from None
    if len(found) > 1:
        raise _bad(f"{where}: several memory limits {sorted(found)}")
    return found.pop() if found else None


def template_info(template: pb.ActorTemplate, namespace: str, name: str) -> Template:
    """The engine's view of an ActorTemplate asked for as `namespace`/`name`."""
    meta = template.metadata
    return Template(
        namespace=meta.atespace or namespace,
        name=meta.name or name,
        memory_limit_bytes=memory_limit_bytes(template),
    )


def worker_key(worker: pb.Worker) -> str:
    """The name to ask ListWorkerActorAssignments about: the Worker resource's own."""
    return worker.metadata.name


def worker_info(worker: pb.Worker, assignments: list[pb.ActorAssignment]) -> WorkerInfo:
    """The engine's view of one Worker and the actors assigned to it.

    capacity: the actor count the worker states (status.capacity.actors); 0 when it states
    none. allocated: status.allocated.actors when the server sets it, else the assignments
    counted. memory_limit_bytes: the memory in the worker's capacity, when stated."""
    name = worker.metadata.name or worker.worker_pod or worker.ip
    if not name:
        raise _bad(f"a Worker without a name: {worker!r:.200}")
    status = worker.status if worker.HasField("status") else None
    capacity = status.capacity if status is not None and status.HasField("capacity") else None
    allocated = status.allocated if status is not None and status.HasField("allocated") else None
    actors = sorted(
        actor_target(a.actor.atespace, a.actor.name) for a in assignments if a.HasField("actor")
    )
    memory = None
    if capacity is not None and capacity.HasField("resources"):
        memory = _memory(capacity.resources, f"worker {name} capacity")
    state = status.state if status is not None else pb.WORKER_STATE_UNSPECIFIED
    return WorkerInfo(
        name=name,
        pool=worker.worker_pool or None,
        capacity=capacity.actors if capacity is not None else 0,
        allocated=allocated.actors if allocated is not None else len(actors),
        state=WORKER_STATES.get(state, f"unknown_{state}"),
        actors=tuple(actors),
        memory_limit_bytes=memory,
    )


def _ref(template: pb.ActorTemplate) -> str:
    return f"{template.metadata.atespace}/{template.metadata.name}"


def _bad(why: str) -> SubstrateError:
    return SubstrateError(BAD_BODY, f"control answer: {why}")
