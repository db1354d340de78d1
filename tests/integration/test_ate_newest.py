"""AteSubstrate against a control server built from the newest layout (ateapi_sep.proto, whole),
over a real socket: a grpc.aio server implementing the newest Control with the newest stubs,
which answers with fields and enum values our own ateapi.proto does not know and checks that
every request parses under the newest layout with nothing left over (a field the newest
layout removed, such as ResumeActorRequest.boot, would be). Then a server without the worker
listing: UNIMPLEMENTED, as the Substrate interface says."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from agentsession_core.substrate.ate.proto import ateapi_sep_pb2 as sep
from agentsession_core.substrate.ate.proto import ateapi_sep_pb2_grpc as sep_grpc
from agentsession_core.substrate.ate.substrate import AteSubstrate
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.interface import ActorInfo, WorkerInfo

# Workers this server holds: name → (capacity, actors on it)
WORKERS = {"w-a": (4, ["bench/one", "bench/two"]), "w-b": (4, [])}


def leftovers(message: Message) -> int:
    """Bytes of `message` (and everything inside it) its schema does not declare."""
    bare = type(message)()
    bare.CopyFrom(message)
    bare.DiscardUnknownFields()
    return message.ByteSize() - bare.ByteSize()


@dataclass
class NewestControl(sep_grpc.ControlServicer):
    """Just enough of a newest-layout server for the engine's calls, answering with what the
    newest layout has beyond ours: snapshot facts, volumes, labels, a REVERTING state."""

    seen: list[tuple[str, int]] = field(default_factory=list)  # (method, leftover bytes)
    actors: dict[tuple[str, str], sep.Actor] = field(default_factory=dict)
    page_size: int = 1  # small pages, so the client must follow the tokens

    def _saw(self, method: str, request: Message) -> None:
        self.seen.append((method, leftovers(request)))

    def _actor(self, ref: Any, state: int) -> sep.Actor:
        actor = self.actors[(ref.atespace, ref.name)]
        actor.metadata.version += 1
        actor.status.state = state  # type: ignore[assignment]
        actor.status.ClearField("worker_assignment")
        if state == sep.ACTOR_STATE_RUNNING:
            where = actor.status.worker_assignment
            where.worker.name, where.worker_pool = "w-a", "gpu"
            where.worker_pod_ip, where.node_name = "10.0.0.5", "node-1"
        actor.status.external_snapshot.snapshot_uri = (
            f"gs://snaps/{ref.name}/v{actor.metadata.version}"
        )
        actor.status.external_snapshot.content_scope = sep.SNAPSHOT_CONTENT_SCOPE_FULL
        actor.status.actor_volumes.add(volume_name="data", status=sep.ExternalVolume.STATUS_CREATED)
        return actor

    async def GetActorTemplate(self, request: Any, context: Any) -> sep.ActorTemplate:
        self._saw("GetActorTemplate", request)
        template = sep.ActorTemplate()
        template.metadata.atespace = request.actor_template.atespace
        template.metadata.name = request.actor_template.name
        template.containers.add(name="main", image="glutton@sha256:00", args=["--mode", "http"])
        template.sandbox_config.sandbox_class = sep.SANDBOX_CLASS_GVISOR
        template.snapshot_config.on_resume.from_data = sep.RESUME_SOURCE_GOLDEN
        template.resources.limits.add(name="memory", quantity="512Mi")
        return template

    async def CreateAtespace(self, request: Any, context: Any) -> sep.Atespace:
        self._saw("CreateAtespace", request)
        answer: sep.Atespace = request.atespace
        return answer

    async def CreateActor(self, request: Any, context: Any) -> sep.Actor:
        self._saw("CreateActor", request)
        actor = sep.Actor()
        actor.CopyFrom(request.actor)
        actor.metadata.uid = "uid-" + actor.metadata.name
        actor.status.state = sep.ACTOR_STATE_SUSPENDED
        self.actors[(actor.metadata.atespace, actor.metadata.name)] = actor
        return actor

    async def GetActor(self, request: Any, context: Any) -> sep.Actor:
        self._saw("GetActor", request)
        return self._actor(request.actor, sep.ACTOR_STATE_REVERTING)

    async def ResumeActor(self, request: Any, context: Any) -> sep.ResumeActorResponse:
        self._saw("ResumeActor", request)
        actor = self._actor(request.actor, sep.ACTOR_STATE_RUNNING)
        return sep.ResumeActorResponse(actor=actor, resumed=True)

    async def SuspendActor(self, request: Any, context: Any) -> sep.SuspendActorResponse:
        self._saw("SuspendActor", request)
        return sep.SuspendActorResponse(actor=self._actor(request.actor, sep.ACTOR_STATE_SUSPENDED))

    async def DeleteActor(self, request: Any, context: Any) -> sep.Actor:
        self._saw("DeleteActor", request)
        actor = self._actor(request.actor, sep.ACTOR_STATE_DELETING)
        del self.actors[(request.actor.atespace, request.actor.name)]
        return actor

    async def ListWorkers(self, request: Any, context: Any) -> sep.ListWorkersResponse:
        self._saw("ListWorkers", request)
        names = [n for n in sorted(WORKERS) if n > request.page_token][: self.page_size]
        answer = sep.ListWorkersResponse()
        for name in names:
            capacity, actors = WORKERS[name]
            worker = answer.workers.add(worker_pool="gpu", worker_pod=f"pod-{name}", ip="10.0.0.5")
            worker.metadata.name = name
            worker.sandbox_class = "gvisor"
            worker.labels["zone"] = "b"
            worker.status.state = sep.WORKER_STATE_ACTIVE
            worker.status.capacity.actors = capacity
            worker.status.capacity.resources.limits.add(name="memory", quantity="8Gi")
            worker.status.allocated.actors = len(actors)
        more = names and names[-1] != max(WORKERS)
        answer.next_page_token = names[-1] if more else ""
        return answer

    async def ListWorkerActorAssignments(
        self, request: Any, context: Any
    ) -> sep.ListWorkerActorAssignmentsResponse:
        self._saw("ListWorkerActorAssignments", request)
        if request.worker.name not in WORKERS:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"worker {request.worker.name}")
        keys = [k for k in WORKERS[request.worker.name][1] if k > request.page_token]
        answer = sep.ListWorkerActorAssignmentsResponse()
        for key in keys[: self.page_size]:
            atespace, name = key.split("/")
            assignment = answer.actor_assignments.add(actor_uid=f"uid-{name}")
            assignment.actor.atespace, assignment.actor.name = atespace, name
            assignment.metadata.name = f"uid-{name}"
            assignment.resources.limits.add(name="memory", quantity="512Mi")
        answer.next_page_token = keys[self.page_size - 1] if len(keys) > self.page_size else ""
        return answer


@dataclass
class Serving:
    service: Any
    url: str


async def serve(service: Any) -> tuple[grpc.aio.Server, Serving]:
    server = grpc.aio.server()
    sep_grpc.add_ControlServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, Serving(service, f"grpc://127.0.0.1:{port}")


@pytest.fixture
async def newest() -> AsyncIterator[Serving]:
    server, serving = await serve(NewestControl())
    yield serving
    await server.stop(None)


@pytest.fixture
async def sub(newest: Serving) -> AsyncIterator[AteSubstrate]:
    # The router is never asked here: only the control API is under test.
    client = AteSubstrate(newest.url, "http://127.0.0.1:9", control_timeout=10)
    yield client
    await client.aclose()


async def test_the_client_drives_a_newest_server_and_sends_nothing_it_removed(
    sub: AteSubstrate, newest: Serving
) -> None:
    template = await sub.get_template("tmpl", "glutton")
    assert template.memory_limit_bytes == 512 * 2**20
    await sub.ensure_atespace("bench")
    created = await sub.create_actor(
        "bench", "one", "tmpl", "glutton", worker_selector={"pool": "gpu"}
    )
    assert created == ActorInfo("bench", "one", "SUSPENDED", None, 0)
    resumed = await sub.resume_actor("bench", "one")
    assert resumed == ActorInfo("bench", "one", "RUNNING", "w-a", 1, pool="gpu", resumed=True)
    # A state our engine has no meaning for keeps its own name, not a known one's.
    assert (await sub.get_actor("bench", "one")).status == "REVERTING"
    await sub.suspend_actor("bench", "one")
    await sub.delete_actor("bench", "one")
    methods = [m for m, _ in newest.service.seen]
    assert methods == [
        "GetActorTemplate",
        "CreateAtespace",
        "CreateActor",
        "ResumeActor",
        "GetActor",
        "SuspendActor",
        "DeleteActor",
    ]
    assert all(extra == 0 for _, extra in newest.service.seen), newest.service.seen


async def test_list_workers_follows_both_listings_pages(sub: AteSubstrate, newest: Serving) -> None:
    workers = await sub.list_workers()
    assert workers == [
        WorkerInfo("w-a", "gpu", 4, 2, "active", ("bench/one", "bench/two"), 8 * 2**30),
        WorkerInfo("w-b", "gpu", 4, 0, "active", (), 8 * 2**30),
    ]
    seen = newest.service.seen
    # two pages of workers, two of w-a's assignments, one of w-b's
    assert sorted(m for m, _ in seen) == ["ListWorkerActorAssignments"] * 3 + ["ListWorkers"] * 2
    assert all(extra == 0 for _, extra in seen)


async def test_a_server_without_the_worker_listing_is_unimplemented() -> None:
    """A server whose Control has no worker methods (grpc answers UNIMPLEMENTED for a method
    it was not given, as one from before multi-actor workers does)."""
    server, serving = await serve(sep_grpc.ControlServicer())
    client = AteSubstrate(serving.url, "http://127.0.0.1:9", control_timeout=10)
    try:
        with pytest.raises(SubstrateError) as caught:
            await client.list_workers()
        assert caught.value.code == "UNIMPLEMENTED"
        assert "no worker listing" in caught.value.message
    finally:
        await client.aclose()
        await server.stop(None)
