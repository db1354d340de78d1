"""The local substrate against a client built from the newest layout (ateapi_sep.proto's stubs,
not the ones it serves from): the lifecycle, the worker listing with capacity and allocation,
assignments, drain, RevertActor of a crashed actor, an August client's `boot` flag, and
UNIMPLEMENTED for what it does not serve. Real processes and sockets; the old-layout client
(ControlClient, ateapi.proto) is test_local_substrate_ate.py's."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from agentsession_core.substrate.ate.proto import ateapi_sep_pb2 as sep
from agentsession_core.substrate.ate.proto import ateapi_sep_pb2_grpc as sep_grpc
from agentsession_core.substrate.ate.substrate import AteSubstrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.test_ate_newest import leftovers

TOKEN = "newest-layout-token"
AUTH = (("authorization", f"Bearer {TOKEN}"),)
TEMPLATE = sep.ObjectRef(atespace="benchmark-workloads", name="glutton")
WORKERS, CAPACITY = 2, 2


@pytest.fixture(scope="module")
def sub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    root = tmp_path_factory.mktemp("ate-newest")
    launcher = LocalSubstrateProcess(
        workers=WORKERS,
        worker_capacity=CAPACITY,
        store=root / "store",
        park_timeout=1.0,
        token=TOKEN,
        log_path=root / "log",
    )
    with launcher as proc:
        yield proc


@pytest.fixture
async def channel(sub: LocalSubstrateProcess) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(sub.grpc_url.removeprefix("grpc://")) as opened:
        yield opened


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> sep_grpc.ControlStub:
    return sep_grpc.ControlStub(channel)


async def call(stub: sep_grpc.ControlStub, method: str, request: Message) -> Any:
    """One call from the newest stubs; the answer must hold nothing the newest layout lacks."""
    answer = await getattr(stub, method)(request, metadata=AUTH, timeout=30)
    assert leftovers(answer) == 0, (method, answer)
    return answer


@pytest.fixture
async def space(stub: sep_grpc.ControlStub, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    name = request.node.name.replace("_", "-")[:50].strip("-")
    await call(
        stub,
        "CreateAtespace",
        sep.CreateAtespaceRequest(atespace=sep.Atespace(metadata=sep.ResourceMetadata(name=name))),
    )
    yield name
    listed = await call(stub, "ListActors", sep.ListActorsRequest(atespace=name))
    for actor in listed.actors:
        ref = sep.ObjectRef(atespace=name, name=actor.metadata.name)
        await call(stub, "DeleteActor", sep.DeleteActorRequest(actor=ref, any_state=True))


async def create(stub: sep_grpc.ControlStub, space: str, name: str) -> sep.Actor:
    actor = sep.Actor(metadata=sep.ResourceMetadata(atespace=space, name=name))
    actor.actor_template.CopyFrom(TEMPLATE)
    created: sep.Actor = await call(stub, "CreateActor", sep.CreateActorRequest(actor=actor))
    return created


async def resume(stub: sep_grpc.ControlStub, space: str, name: str) -> sep.ResumeActorResponse:
    ref = sep.ObjectRef(atespace=space, name=name)
    answer: sep.ResumeActorResponse = await call(
        stub, "ResumeActor", sep.ResumeActorRequest(actor=ref)
    )
    return answer


async def workers(stub: sep_grpc.ControlStub) -> dict[str, sep.Worker]:
    listed = await call(stub, "ListWorkers", sep.ListWorkersRequest())
    assert listed.next_page_token == ""
    return {w.metadata.name: w for w in listed.workers}


async def test_the_worker_listing_shows_capacity_allocation_and_assignments(
    stub: sep_grpc.ControlStub, sub: LocalSubstrateProcess, space: str
) -> None:
    created = await create(stub, space, "one")
    resumed = await resume(stub, space, "one")
    assert resumed.resumed and resumed.actor.status.state == sep.ACTOR_STATE_RUNNING
    host = resumed.actor.status.worker_assignment.worker.name
    listed = await workers(stub)
    assert len(listed) == WORKERS and host in listed
    for name, worker in listed.items():
        assert worker.status.state == sep.WORKER_STATE_ACTIVE
        assert worker.status.capacity.actors == CAPACITY
        assert worker.status.allocated.actors == (1 if name == host else 0)
        assert worker.worker_pod == name and worker.ip == "127.0.0.1"
    assert (
        await call(stub, "GetWorker", sep.GetWorkerRequest(worker=sep.ObjectRef(name=host)))
        == listed[host]
    )
    ref = sep.ObjectRef(name=host)
    assigned = await call(
        stub, "ListWorkerActorAssignments", sep.ListWorkerActorAssignmentsRequest(worker=ref)
    )
    (only,) = assigned.actor_assignments
    assert (only.actor.atespace, only.actor.name) == (space, "one")
    assert only.actor_uid == only.metadata.name == created.metadata.uid
    assert only.actor_template_ref == TEMPLATE
    # The engine's own client reads the same listing into WorkerInfo.
    client = AteSubstrate(sub.grpc_url, sub.url, token=TOKEN, control_timeout=30)
    try:
        infos = {w.name: w for w in await client.list_workers()}
    finally:
        await client.aclose()
    assert infos[host].actors == (f"{space}/one",)
    assert (infos[host].capacity, infos[host].allocated, infos[host].state) == (
        CAPACITY,
        1,
        "active",
    )
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await call(stub, "GetWorker", sep.GetWorkerRequest(worker=sep.ObjectRef(name="no-such")))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


async def test_an_august_clients_boot_flag_is_accepted_and_ignored(
    channel: grpc.aio.Channel, stub: sep_grpc.ControlStub, space: str
) -> None:
    """ResumeActorRequest{actor 1, boot 2 = true}, as the August layout sent it, by hand."""
    await create(stub, space, "old")
    ref = sep.ObjectRef(atespace=space, name="old").SerializeToString()
    body = b"\x0a" + bytes([len(ref)]) + ref + b"\x10\x01"
    resume_old = channel.unary_unary(
        "/ateapi.Control/ResumeActor",
        request_serializer=lambda raw: raw,
        response_deserializer=sep.ResumeActorResponse.FromString,
    )
    answer = await resume_old(body, metadata=AUTH, timeout=30)
    assert answer.resumed and answer.actor.status.state == sep.ACTOR_STATE_RUNNING


async def test_revert_takes_a_crashed_actor_back_to_its_snapshot(
    stub: sep_grpc.ControlStub, sub: LocalSubstrateProcess, space: str
) -> None:
    ref = sep.ObjectRef(atespace=space, name="victim")
    await create(stub, space, "victim")
    with pytest.raises(grpc.aio.AioRpcError) as suspended:
        await call(stub, "RevertActor", sep.RevertActorRequest(actor=ref))
    assert suspended.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    host = (await resume(stub, space, "victim")).actor.status.worker_assignment.worker.name
    with pytest.raises(grpc.aio.AioRpcError) as running:
        await call(stub, "RevertActor", sep.RevertActorRequest(actor=ref))
    assert running.value.code() == grpc.StatusCode.UNIMPLEMENTED
    pid = next(w["pid"] for w in sub.debug_workers()["workers"] if w["name"] == host)
    os.kill(pid, signal.SIGKILL)
    deadline = asyncio.get_running_loop().time() + 60  # only a hang takes this long
    while (got := await call(stub, "GetActor", sep.GetActorRequest(actor=ref))).status.state != (
        sep.ACTOR_STATE_CRASHED
    ):
        assert asyncio.get_running_loop().time() < deadline, got.status
        await asyncio.sleep(0.02)
    reverted = await call(stub, "RevertActor", sep.RevertActorRequest(actor=ref))
    assert reverted.actor.status.state == sep.ACTOR_STATE_SUSPENDED
    assert not reverted.actor.status.HasField("worker_assignment")
    assert reverted.actor.metadata.version > got.metadata.version
    again = await resume(stub, space, "victim")
    assert again.resumed and again.actor.status.state == sep.ACTOR_STATE_RUNNING
    await whole_again(sub, pid)  # the next test, whichever it is, finds every worker up


async def whole_again(sub: LocalSubstrateProcess, killed: int) -> None:
    """Until the pool has replaced the worker killed as `killed` (the cap only catches a
    hang)."""
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        listed = (await asyncio.to_thread(sub.debug_workers))["workers"]
        alive = [w["pid"] for w in listed if w["alive"]]
        if len(alive) == WORKERS and killed not in alive:
            return
        assert asyncio.get_running_loop().time() < deadline, listed
        await asyncio.sleep(0.02)


async def test_what_it_does_not_serve_is_unimplemented(
    channel: grpc.aio.Channel, stub: sep_grpc.ControlStub
) -> None:
    tag = sep.Tag(metadata=sep.ResourceMetadata(atespace="a", name="t"))
    worker_service = sep_grpc.WorkerServiceStub(channel)
    refused = [
        stub.CreateTag(sep.CreateTagRequest(tag=tag), metadata=AUTH, timeout=30),
        stub.ListTags(sep.ListTagsRequest(atespace="a"), metadata=AUTH, timeout=30),
        stub.CreateWorker(sep.CreateWorkerRequest(), metadata=AUTH, timeout=30),
        worker_service.RequestActorSuspend(
            sep.RequestActorSuspendRequest(), metadata=AUTH, timeout=30
        ),
    ]
    for pending in refused:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await pending
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_drain_marks_a_worker_draining(tmp_path: Path) -> None:
    """On a substrate of its own: a drained worker stays drained, and the module's tests run
    in any order."""
    with LocalSubstrateProcess(workers=1, token=TOKEN, log_path=tmp_path / "log") as own:
        async with grpc.aio.insecure_channel(own.grpc_url.removeprefix("grpc://")) as opened:
            stub = sep_grpc.ControlStub(opened)
            (name,) = await workers(stub)
            ref = sep.ObjectRef(name=name)
            drained = await call(stub, "DrainWorker", sep.DrainWorkerRequest(worker=ref))
            assert drained.status.state == sep.WORKER_STATE_DRAINING
            assert (await workers(stub))[name].status.state == sep.WORKER_STATE_DRAINING
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                nobody = sep.ObjectRef(name="no-such")
                await call(stub, "DrainWorker", sep.DrainWorkerRequest(worker=nobody))
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
