"""AteSubstrate over real sockets: a grpc.aio `ateapi.Control` server (test_ate_control's
FakeControl) and an aiohttp router + glutton stand-in that answers protobuf and denies like a
real router (ate_router_standin.py). Every failure is checked against docs/SPEC.md §3.4's
class, and every denial against the rule that a POST is resent only on a stale assignment.
Then whole runs over the ate wire: server time booked, a refused credential ends the run."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from agentsession_core.engine import watchdog
from agentsession_core.engine.engine import Engine, PreflightError
from agentsession_core.engine.params import RunParams
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.stats import CONTROL_KIND, ROUTER_KIND
from agentsession_core.run.run import Run
from agentsession_core.script import load_script
from agentsession_core.substrate.ate import control_codec as cc
from agentsession_core.substrate.ate import glutton_codec as gc
from agentsession_core.substrate.ate.proto import ateapi_pb2 as pb
from agentsession_core.substrate.ate.substrate import STALE_RESENDS, AteSubstrate
from agentsession_core.substrate.errors import FailureClass, SubstrateError
from agentsession_core.substrate.interface import (
    ActorInfo,
    Template,
    reset_server_time,
    server_time_us,
)
from agentsession_core.substrate.protocol import PROTOBUF_CONTENT_TYPE
from tests.integration.ate_router_standin import ELAPSED_US as ROUTER_US
from tests.integration.ate_router_standin import RouterStandIn
from tests.integration.test_ate_control import ELAPSED_US as CONTROL_US
from tests.integration.test_ate_control import FakeControl, Running, start

RETRY, REPLACE, LOUD, COUNT = (
    FailureClass.RETRY_LATER,
    FailureClass.REPLACE,
    FailureClass.MISCONFIGURED,
    FailureClass.COUNT,
)
TOKEN = "secret"


@pytest.fixture
async def control() -> AsyncIterator[Running]:
    server, running = await start(FakeControl())
    yield running
    await server.stop(None)


@pytest.fixture
async def router() -> AsyncIterator[RouterStandIn]:
    standin = await RouterStandIn().start()
    yield standin
    await standin.stop()


@pytest.fixture
async def sub(control: Running, router: RouterStandIn) -> AsyncIterator[AteSubstrate]:
    client = AteSubstrate(
        f"grpc://127.0.0.1:{control.port}", router.url, token=TOKEN, router_timeout=10
    )
    yield client
    await client.aclose()


def calls(control: Running) -> list[str]:
    return [s.method for s in control.service.seen]


# ---------------------------------------------------------------------------------- control


async def test_control_calls_through_the_interface(sub: AteSubstrate, control: Running) -> None:
    assert await sub.get_template("tmpl", "coder") == Template("tmpl", "coder", 2 * 2**30)
    await sub.ensure_atespace("bench")
    control.service.faults["CreateAtespace"] = [(grpc.StatusCode.ALREADY_EXISTS, "exists")]
    await sub.ensure_atespace("bench")  # an existing atespace is what we asked for
    assert await sub.create_actor("bench", "a", "tmpl", "coder") == ActorInfo(
        "bench", "a", "SUSPENDED", None, 1
    )
    assert (await sub.resume_actor("bench", "a")).status == "RUNNING"
    assert await sub.get_actor("bench", "a") == ActorInfo("bench", "a", "RUNNING", "worker-1", 2)
    await sub.pause_actor("bench", "a")
    await sub.suspend_actor("bench", "a")
    assert (await sub.get_actor("bench", "a")).status == "SUSPENDED"
    await sub.delete_actor("bench", "a")
    assert control.service.actors == {}
    assert calls(control) == [
        "GetActorTemplate",
        "CreateAtespace",
        "CreateAtespace",
        "CreateActor",
        "ResumeActor",
        "GetActor",
        "PauseActor",
        "SuspendActor",
        "GetActor",
        "DeleteActor",
    ]
    delete = control.service.seen[-1].request
    assert delete == cc.delete_actor_request("bench", "a", any_state=True).SerializeToString()
    assert {s.authorization for s in control.service.seen} == {f"Bearer {TOKEN}"}
    with pytest.raises(SubstrateError) as caught:
        await sub.get_actor("bench", "a")
    assert (caught.value.code, caught.value.failure_class) == ("NOT_FOUND", REPLACE)


async def test_control_answers_note_their_server_time(sub: AteSubstrate) -> None:
    reset_server_time()
    await sub.get_template("tmpl", "coder")
    assert server_time_us() == int(CONTROL_US)
    reset_server_time()
    await sub.ensure_atespace("bench")
    await sub.create_actor("bench", "a", "tmpl", "coder")
    assert server_time_us() == 2 * int(CONTROL_US)  # summed until the next reset


async def test_list_actors_follows_every_page(sub: AteSubstrate, control: Running) -> None:
    for n in range(cc.LIST_PAGE_SIZE + 5):
        meta = pb.ResourceMetadata(atespace="bench", name=f"agent-{n:05d}", version=1)
        control.service.actors[("bench", meta.name)] = pb.Actor(metadata=meta)
    control.service.actors[("other", "x")] = pb.Actor(metadata=pb.ResourceMetadata(name="x"))
    reset_server_time()
    listed = await sub.list_actors("bench")
    assert [a.name for a in listed] == [f"agent-{n:05d}" for n in range(cc.LIST_PAGE_SIZE + 5)]
    assert {a.atespace for a in listed} == {"bench"}
    assert calls(control) == ["ListActors", "ListActors"]
    assert server_time_us() == 2 * int(CONTROL_US)  # both pages' answers


async def test_there_is_no_async_suspend_on_the_ate_wire(
    sub: AteSubstrate, control: Running
) -> None:
    with pytest.raises(SubstrateError) as caught:
        await sub.suspend_actor("bench", "a", wait=False)
    assert caught.value.code == "INVALID_ARGUMENT"
    assert caught.value.failure_class is LOUD
    assert calls(control) == []  # refused before anything was sent


@pytest.mark.parametrize(
    ("status", "expected", "credential"),
    [
        (grpc.StatusCode.UNAUTHENTICATED, LOUD, True),
        (grpc.StatusCode.PERMISSION_DENIED, LOUD, True),
        (grpc.StatusCode.UNAVAILABLE, RETRY, False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, RETRY, False),
        (grpc.StatusCode.FAILED_PRECONDITION, REPLACE, False),
        (grpc.StatusCode.INTERNAL, COUNT, False),
    ],
)
async def test_control_failures_keep_their_status_name(
    sub: AteSubstrate, control: Running, status: grpc.StatusCode, expected, credential: bool
) -> None:
    control.service.faults["ResumeActor"] = [(status, "refused")]
    with pytest.raises(SubstrateError) as caught:
        await sub.resume_actor("bench", "a")
    assert caught.value.code == status.name
    assert caught.value.failure_class is expected
    assert caught.value.credential_refused is credential


# ---------------------------------------------------------------------------------- router

SUCCESSES: list[tuple[str, dict[str, Any], Any]] = [
    ("ping", {"message": "wake"}, gc.PingResult("wake")),
    ("writeram", {"key": "k", "size": "64Ki", "mode": "overwrite"}, gc.WriteRamResult()),
    ("readram", {"key": "k"}, gc.ReadRamResult(4096, 7)),
    (
        "writedisk",
        {"key": "f", "size": 1024, "mode": "truncate"},
        gc.WriteDiskResult(1024, hashlib.sha256(bytes(1024)).digest()),
    ),
    (
        "readdisk",
        {"key": "f", "mode": "data"},
        gc.ReadDiskResult(16, hashlib.sha256(bytes(16)).digest(), bytes(16)),
    ),
    ("burncpu", {"millis": 20, "parallel": 2}, gc.BurnCpuResult(200)),
]


@pytest.mark.parametrize(("route", "args", "result"), SUCCESSES)
async def test_each_op_goes_as_protobuf_and_comes_back_decoded(
    sub: AteSubstrate, router: RouterStandIn, route: str, args: dict[str, Any], result: Any
) -> None:
    reset_server_time()
    response = await sub.request("bench", "agent-1", route, json=args)
    assert response.result == result
    assert response.content_type == PROTOBUF_CONTENT_TYPE
    assert response.server_elapsed_us == ROUTER_US
    assert server_time_us() == ROUTER_US
    [seen] = router.seen
    assert (seen.route, seen.target, seen.content_type) == (
        route,
        "bench/agent-1",
        PROTOBUF_CONTENT_TYPE,
    )
    assert seen.body == gc.encode_request(route, json=args)
    assert seen.authorization == f"Bearer {TOKEN}"


async def test_ingest_sends_the_payload_inside_the_message(
    sub: AteSubstrate, router: RouterStandIn
) -> None:
    payload = bytes(range(256)) * 512
    response = await sub.request(
        "bench", "agent-1", "ingest", body=payload, params={"key": "upload"}
    )
    assert response.result == gc.IngestResult(len(payload), hashlib.sha256(payload).digest())
    [seen] = router.seen
    assert seen.body == gc.ingest("upload", payload)


@pytest.mark.parametrize(
    ("actor", "code", "expected"),
    [
        ("busy", "HTTP_503", RETRY),
        ("slow", "HTTP_504", RETRY),
        ("limited", "HTTP_429", RETRY),
        ("gone", "ACTOR_NOT_FOUND", REPLACE),
        ("missing", "HTTP_404", COUNT),
        ("unauth", "HTTP_401", LOUD),
        ("denied", "HTTP_403", LOUD),
        ("crashed", "ABORTED", REPLACE),
        ("garbage", "BAD_BODY", COUNT),
        ("json", "BAD_BODY", COUNT),
    ],
)
async def test_denials_are_classified_and_never_resent(
    sub: AteSubstrate, router: RouterStandIn, actor: str, code: str, expected: FailureClass
) -> None:
    with pytest.raises(SubstrateError) as caught:
        await sub.request(
            "bench", actor, "writeram", json={"key": "k", "size": 1, "mode": "truncate"}
        )
    assert (caught.value.code, caught.value.failure_class) == (code, expected)
    assert caught.value.credential_refused is (actor in ("unauth", "denied"))
    assert router.count(actor) == 1  # one POST, one answer: nothing resent
    # The keep-alive connection is still good for the next request.
    assert (await sub.request("bench", "agent-1", "ping", json={})).result == gc.PingResult("")


@pytest.mark.parametrize("stale", [1, STALE_RESENDS])
async def test_a_stale_assignment_is_resent_at_once(
    sub: AteSubstrate, router: RouterStandIn, stale: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded(delay: float, *args: Any, **kwargs: Any) -> Any:
        if delay > 0:
            waits.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    monkeypatch.setattr(asyncio, "sleep", recorded)
    response = await sub.request("bench", f"stale-{stale}", "ping", json={"message": "m"})
    monkeypatch.undo()
    assert response.result == gc.PingResult("m")
    assert router.count(f"stale-{stale}") == stale + 1
    assert len({s.body for s in router.seen}) == 1  # the same encoded request each time
    assert waits == []  # no backoff: the router re-resolves, the resend goes at once


async def test_a_stale_assignment_that_persists_is_retry_later(
    sub: AteSubstrate, router: RouterStandIn
) -> None:
    with pytest.raises(SubstrateError) as caught:
        await sub.request("bench", "stale-9", "ping", json={})
    assert (caught.value.code, caught.value.status) == ("ASSIGNMENT_STALE", 421)
    assert caught.value.failure_class is RETRY
    assert router.count("stale-9") == 1 + STALE_RESENDS


async def test_arguments_the_glutton_cannot_carry_are_refused_before_sending(
    sub: AteSubstrate, router: RouterStandIn
) -> None:
    with pytest.raises(SubstrateError) as caught:
        await sub.request(
            "bench", "a", "writedisk", json={"key": "f", "size": 2**31, "mode": "truncate"}
        )
    assert (caught.value.code, caught.value.failure_class) == ("INVALID_ARGUMENT", LOUD)
    assert router.seen == []


async def test_nothing_listening_is_a_transport_failure(control: Running) -> None:
    standin = await RouterStandIn().start()
    await standin.stop()  # the port is closed now
    sub = AteSubstrate(f"grpc://127.0.0.1:{control.port}", standin.url, router_timeout=5)
    try:
        with pytest.raises(SubstrateError) as caught:
            await sub.request("bench", "a", "ping", json={})
        assert (caught.value.code, caught.value.failure_class) == ("TRANSPORT", COUNT)
    finally:
        await sub.aclose()


# ---------------------------------------------------------------------------------- runs


def run_params(control: Running, router: RouterStandIn, out: Path, **population: Any) -> RunParams:
    return RunParams(
        out=str(out),
        script="smoke",
        think_scale=0.05,
        target={
            "substrate": f"grpc://127.0.0.1:{control.port}",
            "router": router.url,
            "token": TOKEN,
            "template": "tmpl/coder",
        },
        population={"sessions": 2, "spawn_rate": 50.0, **population},
        cleanup={"stop_grace_seconds": 2.0},
    )


async def test_preflight_refuses_a_refused_credential_in_one_line(
    sub: AteSubstrate, control: Running
) -> None:
    control.service.faults["GetActorTemplate"] = [(grpc.StatusCode.UNAUTHENTICATED, "no token")]
    params = RunParams(target={"substrate": "grpc://x:1", "router": "http://x"}, script="smoke")
    engine = Engine(params, sub, load_script("smoke"), Recorder(), atespace="bench")
    with pytest.raises(PreflightError) as caught:
        await engine.preflight()
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith("credentials refused by the control API: ")
    assert "GetTemplate benchmark-workloads/glutton" in line and "UNAUTHENTICATED" in line
    assert calls(control) == ["GetActorTemplate"]  # nothing after it, no actor


async def test_a_run_over_the_ate_wire_books_client_and_server_time(
    control: Running, router: RouterStandIn, tmp_path: Path
) -> None:
    run = Run(run_params(control, router, tmp_path), handle_signals=False)

    def enough() -> str | None:
        """Held until the steady loop has parked and stepped (a count, not a time)."""
        totals = run.recorder.totals()
        parked = totals.row(CONTROL_KIND, "SuspendActor").count
        stepped = totals.row(ROUTER_KIND, "Step_02_upload").count
        return "enough" if parked > 2 and stepped > 0 else None

    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(60.0, should_stop=enough)
        assert reason == "enough", reason
        run.finish("completed")
    assert run.result is not None and run.result.status == "completed", run.result
    totals = run.recorder.totals()
    for name in ("CreateActor", "SuspendActor"):
        row = totals.row(CONTROL_KIND, name)
        assert row.count > 0 and row.failures == 0, name
        assert row.server.count == row.count  # every control answer had the trailer
    step = totals.row(ROUTER_KIND, "Step_01_start")
    assert step.count > 0 and step.failures == 0
    # Two ops (fill_ram, ping), each answered in ROUTER_US on the server.
    assert step.server.quantile(0.5) == pytest.approx(2 * ROUTER_US / 1000, rel=0.01)
    assert {s.content_type for s in router.seen} == {PROTOBUF_CONTENT_TYPE}
    assert control.service.actors == {}  # cleanup deleted every actor


async def test_a_router_credential_refusal_ends_the_run_at_once(
    control: Running, router: RouterStandIn, tmp_path: Path
) -> None:
    router.mode = "denied"
    run = Run(run_params(control, router, tmp_path), handle_signals=False)
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(60.0)
        assert reason is not None  # the refusal ended the hold: it did not run its length
        run.finish("failed", reason)
    assert run.result is not None and run.result.status == "failed"
    reason = run.result.reason or ""
    assert reason.startswith("credentials refused by the router (HTTP 403): ")
    assert "\n" not in reason
    assert run.load.engine is not None and "HTTP_403" in run.load.engine.ctx.misconfigured
    # Each session touched its actor once at most: the refusal was not retried.
    assert len(router.seen) <= 2
    assert control.service.actors == {}


async def test_the_watchdog_notices_a_dead_control_api(
    router: RouterStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watchdog, "EVERY_S", 0.05)
    server, running = await start(FakeControl())
    sub = AteSubstrate(f"grpc://127.0.0.1:{running.port}", router.url, control_timeout=2)
    params = RunParams(target={"substrate": "grpc://x:1", "router": "http://x"}, script="smoke")
    dog = watchdog.Watchdog(sub, params)
    task = asyncio.create_task(dog.run())
    try:
        deadline = asyncio.get_running_loop().time() + 60  # only a hang takes this long
        while calls(running).count("GetActorTemplate") < 3:  # three probes answered
            assert asyncio.get_running_loop().time() < deadline and not task.done()
            await asyncio.sleep(0.01)
        assert dog.failure is None  # answering: alive
        await server.stop(None)  # gRPC now says UNAVAILABLE: no answer, not a verdict
        await asyncio.wait_for(task, 60)
        assert dog.failure is not None and "UNAVAILABLE" in dog.failure
    finally:
        task.cancel()
        await sub.aclose()
