"""The local substrate's control API on the ate wire: the gRPC service `ateapi.Control`
(docs/SPEC.md §2, §2.4; the ate wire notes §2, §3, §7), served beside the JSON control API
(control.py) over the same actors, in the same process and event loop.

A thin adapter, as control.py is for JSON: every operation is ControlPlane's
(control_plane.py) and every state change ActorLifecycle's (actors.py), so an actor created
over gRPC is driven by the router and by the JSON API exactly like one created over JSON,
and the other way round; here only the messages are decoded and encoded. Answers:
- status codes as docs/SPEC.md §2.1 names them (NOT_FOUND, ALREADY_EXISTS,
  FAILED_PRECONDITION, ABORTED "... crashed" for a crashed actor, RESOURCE_EXHAUSTED when no
  worker frees up within the park timeout, INVALID_ARGUMENT, UNAUTHENTICATED); any other
  exception is INTERNAL, as on a real server;
- every answer, error or not, carries the `x-server-elapsed-us` trailer (handler µs);
- with a bearer token configured, every call must carry `authorization: Bearer <token>`
  metadata (UNAUTHENTICATED otherwise). TLS and mTLS are the transport's (`start`);
- `control:` fault rules act on every call, wake and create rules through ActorLifecycle
  (faults.py).

Decisions where the notes are silent:
- CreateAtespace of an existing atespace is ALREADY_EXISTS, as a resource store's create is
  (upstream tests call it and ignore the error before CreateActor); clients that want
  "ensure" treat ALREADY_EXISTS as success.
- DeleteActor without any_state deletes only a SUSPENDED or CRASHED actor
  (FAILED_PRECONDITION otherwise); DeleteOptions version/uid that do not match are ABORTED
  (ControlPlane.delete). The answer is the actor in state DELETING.
- A paused actor keeps its worker_assignment: its state is held on that worker, as the JSON
  API's `worker` field says too. worker_pod_ip is 127.0.0.1: workers listen on loopback.

Both layouts (docs/SPEC.md §2.5). Servicer and messages are ateapi.proto's, a subset of the
newest layout with the same numbers, so a client built from either is served alike:
- the workers (ListWorkers, GetWorker, DrainWorker, ListWorkerActorAssignments) answer from
  the lifecycle's WorkerFacts (ate_workers.py encodes them), as the JSON wire does;
- RevertActor takes a CRASHED actor back to SUSPENDED at its last snapshot
  (ActorLifecycle.revert);
- an old (August 2026) client's ResumeActorRequest.boot arrives as an unknown field and is
  ignored: a wake always restores the latest snapshot, no client of ours ever asked for a
  cold boot, and the newest layout dropped the flag;
- not served, so UNIMPLEMENTED (grpc's answer for a method it was not given): the tag
  methods and the August snapshot-tag methods they replaced (the store keeps one snapshot
  per actor and nothing that could seed an actor from a copy), worker create, update and
  delete (the pool owns its workers), egress policies, token minting, the other atespace and
  template methods, and the WorkerService (no atelet calls in; the workers are ours).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from agentsession_core.errors import UsageError
from agentsession_core.script.quantity import format_quantity
from agentsession_core.substrate.ate.control_codec import MEMORY_LIMIT
from agentsession_core.substrate.ate.proto import ateapi_pb2 as pb
from agentsession_core.substrate.ate.proto import ateapi_pb2_grpc as pb_grpc
from agentsession_core.substrate.op_limits import OP_LIMITS_TRAILER
from agentsession_core.substrate.protocol import ACTOR_STATUSES, ELAPSED_HEADER
from local_substrate import ate_workers
from local_substrate.actors import Actor
from local_substrate.ate_workers import WORKER_IP, WORKER_POOL
from local_substrate.control_plane import ControlPlane
from local_substrate.protocol import WireError, selector_labels

log = logging.getLogger("agentsession.substrate")

# The local statuses are the first seven ActorStates by name (docs/SPEC.md §2.1).
STATE_OF = {name: pb.ActorState.Value(f"ACTOR_STATE_{name}") for name in ACTOR_STATUSES}
LIST_DEFAULT_PAGE = ate_workers.DEFAULT_PAGE

R = TypeVar("R", bound=Message)
Rpc = Callable[[Any, Any, Any], Awaitable[R]]


def _status(code: str) -> grpc.StatusCode:
    """The gRPC status for a WireError code (the router's ACTOR_NOT_FOUND is NOT_FOUND here)."""
    if code == "ACTOR_NOT_FOUND":
        return grpc.StatusCode.NOT_FOUND
    return getattr(grpc.StatusCode, code, grpc.StatusCode.INTERNAL)


def rpc(method: Rpc[R]) -> Rpc[R]:
    """A Control method with the checks and answer every call shares: the bearer token, the
    WireError → status mapping, INTERNAL for anything else, and the elapsed trailer."""

    @functools.wraps(method)
    async def call(self: AteControl, request: Any, context: Any) -> R:
        start = time.perf_counter_ns()
        failure: tuple[grpc.StatusCode, str] | None = None
        try:
            self.authenticate(context)
            # Faults on demand (docs/SPEC.md §2.4), in the status a gRPC client would see.
            faults = self.lifecycle.faults
            await faults.enact_grpc(faults.control())
            answer = await method(self, request, context)
        except WireError as exc:
            failure = (_status(exc.code), exc.message)
        except Exception as exc:  # a bug: a status like a real server's, and keep serving
            log.exception("ate control %s", method.__name__)
            failure = (grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        elapsed = (
            (ELAPSED_HEADER, str((time.perf_counter_ns() - start) // 1000)),
            *(self.trailers.get(method.__name__, ()) if failure is None else ()),
        )
        self.lifecycle.metrics.request("ate", "control", failure is None)  # /metrics
        if failure is not None:
            await context.abort(*failure, trailing_metadata=elapsed)
        context.set_trailing_metadata(elapsed)
        return answer

    return call


class AteControl(pb_grpc.ControlServicer):
    """ateapi.Control over the local substrate's actors."""

    def __init__(self, plane: ControlPlane, token: str | None) -> None:
        self.plane = plane
        self.lifecycle = plane.lifecycle
        # Trailers one call adds to its answer: GetActorTemplate states the per-op caps in
        # one, so the ActorTemplate message stays the ate wire's own (docs/SPEC.md §2.5).
        self.trailers: dict[str, tuple[tuple[str, str], ...]] = {}
        if plane.op_limits is not None:
            self.trailers["GetActorTemplate"] = ((OP_LIMITS_TRAILER, plane.op_limits.to_text()),)
        self._expected = f"Bearer {token}".encode() if token else None
        self._changes: set[asyncio.Task[Any]] = set()

    def authenticate(self, context: Any) -> None:
        if self._expected is None:
            return
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and isinstance(value, str):
                # Constant time: the comparison must not tell a prober how much it got right.
                if hmac.compare_digest(value.encode(), self._expected):
                    return
        raise WireError("UNAUTHENTICATED", "missing or wrong bearer token")

    async def finish(self, change: Coroutine[Any, Any, Any]) -> Any:
        """Await a lifecycle change that runs to its end even if the call is cancelled (a
        client deadline cancels the handler): cut in half, it would leave the actor RESUMING
        or SUSPENDING for good."""
        task = asyncio.ensure_future(change)
        self._changes.add(task)
        task.add_done_callback(self._settled)
        return await asyncio.shield(task)

    def _settled(self, task: asyncio.Task[Any]) -> None:
        self._changes.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved here, since the caller may have gone away

    def stop(self) -> None:
        for task in list(self._changes):
            task.cancel()

    # ---- lookups -----------------------------------------------------------------------------

    def actor(self, ref: pb.ObjectRef) -> Actor:
        return self.plane.actor(ref.atespace, ref.name)

    # ---- the calls ---------------------------------------------------------------------------

    @rpc
    async def GetActorTemplate(self, request: Any, context: Any) -> pb.ActorTemplate:
        ref = request.actor_template
        limit = self.plane.template_limit(ref.atespace, ref.name)
        template = pb.ActorTemplate(
            metadata=pb.ResourceMetadata(atespace=ref.atespace, name=ref.name)
        )
        if limit is not None:
            template.resources.limits.append(
                pb.Limits(name=MEMORY_LIMIT, quantity=format_quantity(limit))
            )
        return template

    @rpc
    async def CreateAtespace(self, request: Any, context: Any) -> pb.Atespace:
        name = self.plane.create_atespace(request.atespace.metadata.name)
        return pb.Atespace(metadata=pb.ResourceMetadata(name=name))

    @rpc
    async def CreateActor(self, request: Any, context: Any) -> pb.Actor:
        meta = request.actor.metadata
        given = request.actor.actor_template
        labels = selector_labels(
            dict(request.actor.worker_selector.match_labels), "actor worker_selector"
        )
        ref = (given.atespace, given.name) if given.name else None
        actor = await self.plane.create_actor(meta.atespace, meta.name, ref, labels)
        return actor_message(actor)

    @rpc
    async def GetActor(self, request: Any, context: Any) -> pb.Actor:
        return actor_message(self.actor(request.actor))

    @rpc
    async def ListActors(self, request: Any, context: Any) -> pb.ListActorsResponse:
        page, token = self.plane.list_actors(
            request.atespace, request.page_size or LIST_DEFAULT_PAGE, request.page_token
        )
        return pb.ListActorsResponse(actors=[actor_message(a) for a in page], next_page_token=token)

    @rpc
    async def ResumeActor(self, request: Any, context: Any) -> pb.ResumeActorResponse:
        actor = self.actor(request.actor)
        resumed = await self.finish(self.plane.resume(actor))
        return pb.ResumeActorResponse(actor=actor_message(actor), resumed=resumed)

    @rpc
    async def SuspendActor(self, request: Any, context: Any) -> pb.SuspendActorResponse:
        actor = self.actor(request.actor)
        await self.finish(self.plane.suspend(actor))
        return pb.SuspendActorResponse(actor=actor_message(actor))

    @rpc
    async def PauseActor(self, request: Any, context: Any) -> pb.PauseActorResponse:
        actor = self.actor(request.actor)
        await self.finish(self.plane.pause(actor))
        return pb.PauseActorResponse(actor=actor_message(actor))

    @rpc
    async def RevertActor(self, request: Any, context: Any) -> pb.RevertActorResponse:
        actor = self.actor(request.actor)
        await self.finish(self.plane.revert(actor))
        return pb.RevertActorResponse(actor=actor_message(actor))

    # ---- workers (ate_workers.py) ------------------------------------------------------------

    @rpc
    async def ListWorkers(self, request: Any, context: Any) -> pb.ListWorkersResponse:
        chosen, token = ate_workers.page(
            self.plane.workers(), _name_of, request.page_size, request.page_token
        )
        return pb.ListWorkersResponse(
            workers=[ate_workers.worker_message(f) for f in chosen], next_page_token=token
        )

    @rpc
    async def GetWorker(self, request: Any, context: Any) -> pb.Worker:
        facts = ate_workers.find(self.plane.workers(), request.worker)
        return ate_workers.worker_message(facts)

    @rpc
    async def DrainWorker(self, request: Any, context: Any) -> pb.Worker:
        return ate_workers.worker_message(self.plane.drain_worker(request.worker.name))

    @rpc
    async def ListWorkerActorAssignments(
        self, request: Any, context: Any
    ) -> pb.ListWorkerActorAssignmentsResponse:
        facts = ate_workers.find(self.plane.workers(), request.worker)
        keys, token = ate_workers.page(facts.actors, str, request.page_size, request.page_token)
        actors = self.lifecycle.actors
        return pb.ListWorkerActorAssignmentsResponse(
            actor_assignments=[
                ate_workers.assignment_message(k, actors.get(_actor_ref(k))) for k in keys
            ],
            next_page_token=token,
        )

    @rpc
    async def DeleteActor(self, request: Any, context: Any) -> pb.Actor:
        actor = self.actor(request.actor)
        options = request.options
        await self.finish(
            self.plane.delete(
                actor, any_state=request.any_state, uid=options.uid, version=options.version
            )
        )
        gone = actor_message(actor)
        gone.status.state = pb.ACTOR_STATE_DELETING
        return gone


def actor_message(actor: Actor) -> pb.Actor:
    created = Timestamp()
    created.FromNanoseconds(actor.created_ns)
    message = pb.Actor(
        metadata=pb.ResourceMetadata(
            atespace=actor.atespace,
            name=actor.name,
            uid=actor.uid,
            version=actor.version,
            create_time=created,
        ),
        actor_template=pb.ObjectRef(atespace=actor.template[0], name=actor.template[1]),
        status=pb.ActorStatus(state=STATE_OF.get(actor.status, pb.ACTOR_STATE_UNSPECIFIED)),
    )
    message.worker_selector.match_labels.update(actor.selector)
    where = actor.worker or actor.paused_on
    if where is not None:
        message.status.worker_assignment.CopyFrom(
            pb.WorkerAssignment(
                worker_pool=where.pool or WORKER_POOL,
                worker_pod=where.name,
                worker_pod_ip=WORKER_IP,
                worker=pb.ObjectRef(name=where.name),
            )
        )
    return message


def _name_of(facts: Any) -> str:
    return str(facts.name)


def _actor_ref(key: str) -> tuple[str, str]:
    atespace, _, name = key.partition("/")
    return atespace, name


@dataclass(frozen=True)
class GrpcTls:
    """PEM bytes for the gRPC port: its certificate chain and key, and the CA that client
    certificates must chain to (None: no client certificate asked for)."""

    cert_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None


async def start(
    servicer: AteControl, host: str, port: int, tls: GrpcTls | None
) -> tuple[grpc.aio.Server, str]:
    """Serve `servicer` on host:port (0: a free port) in the running event loop; the server
    and its URL, grpc://host:port, or grpcs:// with TLS."""
    server = grpc.aio.server()
    pb_grpc.add_ControlServicer_to_server(servicer, server)
    shown = f"[{host}]" if ":" in host else host
    address = f"{shown}:{port}"
    try:
        if tls is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, _credentials(tls))
    except RuntimeError:  # grpc's "failed to bind"
        raise UsageError(f"--grpc-port: cannot listen on {address} (in use?)") from None
    await server.start()
    return server, f"{'grpcs' if tls else 'grpc'}://{shown}:{bound}"


def _credentials(tls: GrpcTls) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials(
        [(tls.private_key, tls.cert_chain)],
        root_certificates=tls.client_ca,
        # With a client CA, a client without a certificate it signed is refused in the
        # handshake: mTLS, as the real API server's pod-identity option (the notes §7).
        require_client_auth=tls.client_ca is not None,
    )
