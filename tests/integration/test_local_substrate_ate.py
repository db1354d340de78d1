"""The local substrate on the ate wire (docs/SPEC.md §2, §2.4): ateapi.Control over gRPC with the
generated client (ControlClient), protobuf glutton bodies through the router, both wires over
the same actors, the router's denials in a real router's form, the elapsed trailer and the
bearer token. Real processes and sockets throughout; TLS and mTLS are in
test_local_substrate_ate_tls.py."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import orjson
import pytest

from agentsession_core.substrate.ate import control_codec as cc
from agentsession_core.substrate.ate import glutton_codec as gc
from agentsession_core.substrate.ate.control import ControlClient
from agentsession_core.substrate.ate.proto import ateapi_pb2 as pb
from agentsession_core.substrate.ate.proto import ateapi_pb2_grpc as pb_grpc
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.protocol import (
    ELAPSED_HEADER,
    HOSTED_ACTOR_HEADER,
    PROTOBUF_CONTENT_TYPE,
    ROUTER_ACTOR_GONE,
    ROUTER_HEADER,
    STALE_ASSIGNMENT_HEADER,
    TARGET_HEADER,
    TOKEN_ENV,
    WORKER_SECRET_ENV,
    WORKER_SECRET_HEADER,
    router_says_actor_gone,
)
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import SHARED_WORKERS
from tests.integration.conftest import TOKEN as SHARED_TOKEN

TOKEN = "ate-wire-token"
GLUTTON = ("benchmark-workloads", "glutton")
WORKERS = 2
WORKER_SECRET = "worker-secret-of-this-module"


@pytest.fixture(scope="module")
def sub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    root = tmp_path_factory.mktemp("ate-local")
    launcher = LocalSubstrateProcess(
        workers=WORKERS,
        store=root / "store",
        park_timeout=1.0,
        token=TOKEN,
        extra_args=["--max-op-size", "8Mi", "--max-burn-millis", "2000"],
        log_path=root / "log",
    )
    launcher.env[WORKER_SECRET_ENV] = WORKER_SECRET  # to ask a worker directly
    with launcher as proc:
        yield proc


@pytest.fixture
async def control(sub: LocalSubstrateProcess) -> AsyncIterator[ControlClient]:
    client = ControlClient(sub.grpc_url, token=TOKEN, timeout=30)
    yield client
    await client.aclose()


@pytest.fixture
async def json_api(sub: LocalSubstrateProcess) -> AsyncIterator[HttpSubstrate]:
    client = HttpSubstrate(sub.url, token=TOKEN, control_timeout=30, router_timeout=30)
    yield client
    await client.aclose()


@pytest.fixture
async def router(sub: LocalSubstrateProcess) -> AsyncIterator[Router]:
    async with httpx.AsyncClient(base_url=sub.url, timeout=30) as http:
        yield Router(http)


@pytest.fixture
async def space(control: ControlClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh atespace per test; its actors are deleted after, so every test starts with all
    workers free."""
    name = request.node.name.replace("_", "-")[:50].strip("-")
    await control.create_atespace(name)
    yield name
    page = await control.list_actors(name)
    for actor in page.message.actors:
        await control.delete_actor(name, actor.metadata.name)


@dataclass
class Router:
    """Protobuf glutton calls through the local router, as an ate client makes them."""

    http: httpx.AsyncClient

    async def post(
        self, space: str, actor: str, route: str, body: bytes, *, token: str | None = TOKEN
    ) -> httpx.Response:
        headers = {TARGET_HEADER: f"{space}/{actor}", "content-type": PROTOBUF_CONTENT_TYPE}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        return await self.http.post(f"/{route}", content=body, headers=headers)

    async def call(self, space: str, actor: str, route: str, body: bytes) -> gc.GluttonResult:
        answer = await self.post(space, actor, route, body)
        assert answer.status_code == 200, (answer.status_code, answer.text)
        assert ELAPSED_HEADER in answer.headers
        return gc.decode_answer(route, answer.content, content_type=answer.headers["content-type"])


def state_of(actor: pb.Actor) -> str:
    return cc.actor_status(actor.status.state)


async def ram_and_disk(router: Router, space: str, actor: str) -> tuple[object, ...]:
    ram = await router.call(space, actor, "readram", gc.read_ram("ctx"))
    disk = await router.call(space, actor, "readdisk", gc.read_disk("build", "digest"))
    patch = await router.call(space, actor, "readdisk", gc.read_disk("patch", "data"))
    return ram, disk, patch


# ---- the lifecycle on the ate wire ------------------------------------------------------------


async def test_lifecycle_over_grpc_with_protobuf_ops_through_the_router(
    control: ControlClient, router: Router, space: str
) -> None:
    template = await control.get_actor_template(*GLUTTON)
    assert cc.template_info(template.message, *GLUTTON).memory_limit_bytes == 1 << 30
    assert [(x.name, x.quantity) for x in template.message.resources.limits] == [("memory", "1Gi")]
    created = await control.create_actor(space, "a1", *GLUTTON)
    assert state_of(created.message) == "SUSPENDED"
    assert created.message.metadata.uid and created.server_elapsed_us is not None
    resumed = await control.resume_actor(space, "a1")
    assert resumed.message.resumed and state_of(resumed.message.actor) == "RUNNING"
    assert cc.worker_pod_ip(resumed.message.actor) == "127.0.0.1"
    again = await control.resume_actor(space, "a1")
    assert not again.message.resumed  # already RUNNING

    # Real effects: RAM, disk, ingest, CPU, ping.
    await router.call(space, "a1", "writeram", gc.write_ram("ctx", 3 << 20, "truncate"))
    ram = await router.call(space, "a1", "readram", gc.read_ram("ctx"))
    assert isinstance(ram, gc.ReadRamResult) and ram.size == 3 << 20
    part = await router.call(space, "a1", "readram", gc.read_ram("ctx", 4096))
    assert isinstance(part, gc.ReadRamResult) and part.size == 4096
    written = await router.call(
        space, "a1", "writedisk", gc.write_disk("build", 1 << 20, "truncate")
    )
    assert isinstance(written, gc.WriteDiskResult) and written.size == 1 << 20
    digest = await router.call(space, "a1", "readdisk", gc.read_disk("build", "digest"))
    data = await router.call(space, "a1", "readdisk", gc.read_disk("build", "data"))
    assert isinstance(digest, gc.ReadDiskResult) and isinstance(data, gc.ReadDiskResult)
    assert digest.sha256 == written.sha256 == hashlib.sha256(data.data).digest()
    payload = b"patch-bytes" * 3000
    ingested = await router.call(space, "a1", "ingest", gc.ingest("patch", payload))
    assert ingested == gc.IngestResult(len(payload), hashlib.sha256(payload).digest())
    started = time.monotonic()
    burned = await router.call(space, "a1", "burncpu", gc.burn_cpu(200, 2))
    assert isinstance(burned, gc.BurnCpuResult) and burned.iterations > 0
    assert time.monotonic() - started >= 0.2
    assert await router.call(space, "a1", "ping", gc.ping("hi")) == gc.PingResult("hi")
    before = await ram_and_disk(router, space, "a1")

    # Suspend, then wake implicitly through the router: the state is intact.
    suspended = await control.suspend_actor(space, "a1")
    assert state_of(suspended.message.actor) == "SUSPENDED"
    assert cc.worker_name(suspended.message.actor) is None
    assert await ram_and_disk(router, space, "a1") == before
    assert state_of((await control.get_actor(space, "a1")).message) == "RUNNING"

    # Pause keeps the state on its worker; the router wakes it again.
    paused = await control.pause_actor(space, "a1")
    assert state_of(paused.message.actor) == "PAUSED"
    assert await ram_and_disk(router, space, "a1") == before

    deleted = await control.delete_actor(space, "a1")
    assert state_of(deleted.message) == "DELETING"
    with pytest.raises(SubstrateError) as gone:
        await control.get_actor(space, "a1")
    assert gone.value.code == "NOT_FOUND"
    answer = await router.post(space, "a1", "ping", gc.ping())
    assert (answer.status_code, answer.text) == (
        404,
        ROUTER_ACTOR_GONE.format(target=f"{space}/a1"),
    )


async def test_json_and_ate_actors_are_the_same_actors(
    control: ControlClient, json_api: HttpSubstrate, router: Router, space: str
) -> None:
    # The atespace made over gRPC exists for the JSON API; making it again is ALREADY_EXISTS.
    await json_api.ensure_atespace(space)
    with pytest.raises(SubstrateError) as exists:
        await control.create_atespace(space)
    assert exists.value.code == "ALREADY_EXISTS"

    await json_api.create_actor(space, "by-json", *GLUTTON)
    await control.create_actor(space, "by-ate", *GLUTTON)
    listed = await control.list_actors(space)
    assert [a.metadata.name for a in listed.message.actors] == ["by-ate", "by-json"]
    assert [a.name for a in await json_api.list_actors(space)] == ["by-ate", "by-json"]

    # Resumed over gRPC, seen RUNNING over JSON on the same worker, and the other way round.
    resumed = await control.resume_actor(space, "by-json")
    info = await json_api.get_actor(space, "by-json")
    assert (info.status, info.worker) == ("RUNNING", cc.worker_name(resumed.message.actor))
    await json_api.resume_actor(space, "by-ate")
    assert state_of((await control.get_actor(space, "by-ate")).message) == "RUNNING"

    # A protobuf write read back over JSON: one array, one page checksum, either wire.
    await router.call(space, "by-json", "writeram", gc.write_ram("m", 300_000, "truncate"))
    ram = await router.call(space, "by-json", "readram", gc.read_ram("m"))
    over_json = orjson.loads(
        (await json_api.request(space, "by-json", "readram", json={"key": "m"})).body
    )
    assert isinstance(ram, gc.ReadRamResult)
    assert (over_json["size"], over_json["checksum"]) == (ram.size, ram.checksum)

    with pytest.raises(SubstrateError) as running:
        await control.delete_actor(space, "by-json", any_state=False)
    assert running.value.code == "FAILED_PRECONDITION"
    await json_api.delete_actor(space, "by-ate")
    with pytest.raises(SubstrateError) as gone:
        await control.get_actor(space, "by-ate")
    assert gone.value.code == "NOT_FOUND"


async def test_list_pages_and_argument_errors(control: ControlClient, space: str) -> None:
    for n in range(5):
        await control.create_actor(space, f"agent-{n}", *GLUTTON)
    names, token = [], ""
    for _ in range(5):
        page = await control.list_actors(space, token, page_size=2)
        names += [a.metadata.name for a in page.message.actors]
        token = page.message.next_page_token
        if not token:
            break
    assert names == [f"agent-{n}" for n in range(5)]
    with pytest.raises(SubstrateError) as dup:
        await control.create_actor(space, "agent-0", *GLUTTON)
    assert dup.value.code == "ALREADY_EXISTS"
    with pytest.raises(SubstrateError) as bad:
        await control.create_actor(space, "no/slashes", *GLUTTON)
    assert bad.value.code == "INVALID_ARGUMENT"
    with pytest.raises(SubstrateError) as template:
        await control.get_actor_template("nope", "nope")
    assert template.value.code == "NOT_FOUND"
    with pytest.raises(SubstrateError) as atespace:
        await control.create_actor("no-such-space", "x", *GLUTTON)
    assert atespace.value.code == "NOT_FOUND"


# ---- denials: full pool, crash, glutton errors, token ------------------------------------------


async def test_full_pool_is_resource_exhausted_and_router_503(
    control: ControlClient, router: Router, space: str
) -> None:
    for n in range(WORKERS):
        await control.create_actor(space, f"busy-{n}", *GLUTTON)
        await control.resume_actor(space, f"busy-{n}")
    await control.create_actor(space, "waiting", *GLUTTON)
    with pytest.raises(SubstrateError) as exhausted:
        await control.resume_actor(space, "waiting")
    assert exhausted.value.code == "RESOURCE_EXHAUSTED"
    answer = await router.post(space, "waiting", "ping", gc.ping())
    assert answer.status_code == 503
    assert answer.headers["content-type"].startswith("text/plain")
    assert ROUTER_HEADER not in answer.headers
    assert state_of((await control.get_actor(space, "waiting")).message) == "SUSPENDED"


async def test_a_client_that_gives_up_does_not_cut_a_resume_in_half(
    substrate: LocalSubstrateProcess, client: HttpSubstrate, atespace: str
) -> None:
    """A ResumeActor whose caller goes away while it waits for a worker runs to its own end:
    the actor ends RUNNING on the worker that freed up, not RESUMING for good. On the shared
    substrate (a 30 s park), so the resume is still waiting when the client gives up and
    when a worker frees, on any machine."""
    holders = [f"h{i}" for i in range(SHARED_WORKERS)]
    for name in [*holders, "waiting"]:
        await client.create_actor(atespace, name, *GLUTTON)
    for name in holders:
        await client.resume_actor(atespace, name)
    control = ControlClient(substrate.grpc_url, token=SHARED_TOKEN, timeout=60)
    try:
        impatient = asyncio.create_task(control.resume_actor(atespace, "waiting"))
        # RESUMING is set as the resume starts to wait for a worker (actors.py).
        await until(lambda: status(client, atespace, "waiting"), "RESUMING")
        impatient.cancel()  # the caller gives up while the resume waits
        with pytest.raises(asyncio.CancelledError):
            await impatient
        # Asked on the same channel, behind the cancel: the resume waits on, its caller gone.
        still = await control.get_actor(atespace, "waiting")
        assert state_of(still.message) == "RESUMING"
    finally:
        await control.aclose()
    await client.suspend_actor(atespace, holders[0])  # a worker frees up
    await until(lambda: status(client, atespace, "waiting"), "RUNNING")
    assert (await client.get_actor(atespace, "waiting")).worker is not None


async def status(client: HttpSubstrate, atespace: str, name: str) -> str:
    return (await client.get_actor(atespace, name)).status


async def until(read: Callable[[], Awaitable[str]], wanted: str, cap: float = 60.0) -> None:
    """Poll until `read()` gives `wanted`; the cap only catches a hang."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + cap
    while (seen := await read()) != wanted:
        assert loop.time() < deadline, f"still {seen}, never {wanted}"
        await asyncio.sleep(0.02)


async def test_glutton_404_is_not_the_routers_actor_gone(
    router: Router, control: ControlClient, space: str
) -> None:
    await control.create_actor(space, "g", *GLUTTON)
    missing = await router.post(space, "g", "readdisk", gc.read_disk("nofile", "digest"))
    rotate = await router.post(space, "g", "writeram", gc.write_ram("none", 10, "overwrite_rotate"))
    gone = await router.post(space, "nobody", "ping", gc.ping())
    for answer in (missing, rotate, gone):
        assert answer.status_code == 404
        assert answer.headers["content-type"].startswith("text/plain")
        assert ROUTER_HEADER not in answer.headers
    assert "nofile" in missing.text and not router_says_actor_gone(404, missing.text)
    assert "none" in rotate.text and not router_says_actor_gone(404, rotate.text)
    assert router_says_actor_gone(404, gone.text)

    bad = await router.post(space, "g", "writeram", gc.write_ram("k", 1 << 30, "truncate"))
    assert bad.status_code == 400 and "cap" in bad.text  # above --max-op-size
    garbage = await router.post(space, "g", "ping", b"\xff\xff\xff")
    assert garbage.status_code == 400 and garbage.text.startswith("unmarshal")
    unknown = await router.post(space, "g", "nosuchroute", b"")
    assert (unknown.status_code, unknown.text) == (404, "404 page not found")
    # The JSON wire on the same router still marks its verdicts.
    json_gone = await router.http.post(
        "/ping",
        json={},
        headers={TARGET_HEADER: f"{space}/nobody", "authorization": f"Bearer {TOKEN}"},
    )
    assert (json_gone.status_code, json_gone.headers[ROUTER_HEADER]) == (404, "1")


async def test_a_worker_without_the_actor_answers_421_stale(
    sub: LocalSubstrateProcess, control: ControlClient, router: Router, space: str
) -> None:
    """What the router forwards to a worker that no longer hosts the actor (deleted or moved
    while the request was on its way), asked of a worker directly."""
    await control.create_actor(space, "here", *GLUTTON)
    host = cc.worker_name((await control.resume_actor(space, "here")).message.actor)
    worker = next(w for w in sub.debug_workers()["workers"] if w["name"] == host)
    port, secret = worker["port"], WORKER_SECRET
    headers = {
        "content-type": PROTOBUF_CONTENT_TYPE,
        HOSTED_ACTOR_HEADER: f"{space}/elsewhere",
        WORKER_SECRET_HEADER: secret,  # as the router sends it: a worker serves nobody else
    }
    async with httpx.AsyncClient(timeout=10) as http:
        url = f"http://127.0.0.1:{port}/ping"
        stale = await http.post(url, content=gc.ping(), headers=headers)
        headers[HOSTED_ACTOR_HEADER] = f"{space}/here"
        fine = await http.post(url, content=gc.ping("x"), headers=headers)
    assert (stale.status_code, stale.headers[STALE_ASSIGNMENT_HEADER]) == (421, "true")
    assert fine.status_code == 200
    assert gc.decode_answer("ping", fine.content) == gc.PingResult("x")


async def test_crashed_actor_is_aborted_crashed(
    sub: LocalSubstrateProcess, control: ControlClient, router: Router, space: str
) -> None:
    await control.create_actor(space, "victim", *GLUTTON)
    host = cc.worker_name((await control.resume_actor(space, "victim")).message.actor)
    pid = next(w["pid"] for w in sub.debug_workers()["workers"] if w["name"] == host)
    os.kill(pid, signal.SIGKILL)

    async def victim() -> str:
        return state_of((await control.get_actor(space, "victim")).message)

    await until(victim, "CRASHED")
    with pytest.raises(SubstrateError) as crashed:
        await control.resume_actor(space, "victim")
    assert crashed.value.code == "ABORTED" and crashed.value.crashed
    answer = await router.post(space, "victim", "ping", gc.ping())
    assert answer.status_code == 503 and "crashed" in answer.text
    await control.delete_actor(space, "victim")

    async def replaced() -> str:  # the next test, whichever it is, finds both workers up
        listed = (await asyncio.to_thread(sub.debug_workers))["workers"]
        alive = [w["pid"] for w in listed if w["alive"]]
        return "whole" if len(alive) == WORKERS and pid not in alive else "replacing"

    await until(replaced, "whole")


async def test_token_is_required_and_kept_off_the_command_line(
    sub: LocalSubstrateProcess, router: Router, space: str
) -> None:
    for token in (None, "wrong"):
        client = ControlClient(sub.grpc_url, token=token, timeout=10)
        try:
            with pytest.raises(SubstrateError) as refused:
                await client.get_actor_template(*GLUTTON)
            assert refused.value.code == "UNAUTHENTICATED"
        finally:
            await client.aclose()
    answer = await router.post(space, "anyone", "ping", gc.ping(), token=None)
    assert answer.status_code == 401 and ROUTER_HEADER not in answer.headers

    assert sub.process is not None
    cmdline = await asyncio.to_thread(Path(f"/proc/{sub.process.pid}/cmdline").read_bytes)
    assert TOKEN.encode() not in cmdline
    # The server reads it from its environment and does not hand it down to its workers.
    workers = [w["pid"] for w in sub.debug_workers()["workers"] if w["alive"]]
    assert workers
    for pid in workers:
        environ = await asyncio.to_thread(Path(f"/proc/{pid}/environ").read_bytes)
        assert TOKEN_ENV.encode() not in environ


async def test_every_answer_has_the_elapsed_trailer(sub: LocalSubstrateProcess) -> None:
    metadata = (("authorization", f"Bearer {TOKEN}"),)
    async with grpc.aio.insecure_channel(sub.grpc_url.removeprefix("grpc://")) as channel:
        stub = pb_grpc.ControlStub(channel)
        ok = stub.GetActorTemplate(cc.get_actor_template_request(*GLUTTON), metadata=metadata)
        await ok
        failed = stub.GetActor(cc.get_actor_request("nowhere", "nobody"), metadata=metadata)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await failed
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        for trailers in (await ok.trailing_metadata(), caught.value.trailing_metadata()):
            values = [v for k, v in trailers or () if k == ELAPSED_HEADER]
            assert len(values) == 1 and str(values[0]).isdigit()
