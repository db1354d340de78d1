"""FakeSubstrate through the Substrate interface: lifecycle (docs/SPEC.md §2.1), implicit wake
(§2.2), glutton answers (§2.3), faults, and errors that classify (§3.4) as the local
substrate's own answers do."""

from __future__ import annotations

import asyncio
import hashlib
import random
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest

from agentsession_core.engine import ops
from agentsession_core.engine.ledger import ActorLedger
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.session import RunContext, Session, now_ns
from agentsession_core.measure.recorder import Recorder
from agentsession_core.script import load_script
from agentsession_core.substrate import FakeSubstrate, Substrate, SubstrateError, Template
from agentsession_core.substrate.errors import FailureClass, error_from_answer
from agentsession_core.substrate.router_wire import router_answer
from local_substrate.protocol import WireError

NS, NAME = "benchmark-workloads", "glutton"
A = "space"


async def make(*names: str, sub: FakeSubstrate | None = None) -> FakeSubstrate:
    """A fake with the atespace A and these actors in it."""
    sub = sub or FakeSubstrate()
    await sub.ensure_atespace(A)
    for name in names:
        await sub.create_actor(A, name, NS, NAME)
    return sub


async def status(sub: Substrate, name: str) -> str:
    return (await sub.get_actor(A, name)).status


async def refused(call: Awaitable[Any]) -> SubstrateError:
    with pytest.raises(SubstrateError) as caught:
        await call
    return caught.value


def local_answer(code: str, message: str, *, router: bool, control: bool) -> SubstrateError:
    """What a client makes of the local substrate's own error answer (its protocol.py)."""
    response = WireError(code, message, router=router).response()
    assert isinstance(response.body, bytes)
    if control:
        return error_from_answer(response.status, response.body, from_router=True)
    with pytest.raises(SubstrateError) as caught:
        router_answer(
            response.status, response.body, {k.lower(): v for k, v in response.headers.items()}
        )
    return caught.value


def answer(error: SubstrateError) -> tuple[str, int, bool, FailureClass]:
    return error.code, error.status, error.from_router, error.failure_class


# ------------------------------------------------------------------------- the package
def test_fake_implements_every_call_of_the_interface() -> None:
    calls = [n for n, v in vars(Substrate).items() if callable(v) and not n.startswith("_")]
    assert len(calls) == 12  # list_workers too
    for name in calls:
        assert getattr(FakeSubstrate, name) is not getattr(Substrate, name), name


def test_importing_the_package_stays_light() -> None:
    code = (
        "import sys, agentsession_core.substrate as s\n"
        "heavy = [m for m in sys.modules if m in ('aiohttp', 'aiohttp.web', 'httpx')\n"
        "         or m.startswith('local_substrate')]\n"
        "assert not heavy, heavy\n"
        "assert s.HttpSubstrate.__name__ == 'HttpSubstrate'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_fault_shares_are_checked() -> None:
    with pytest.raises(ValueError, match="shares"):
        FakeSubstrate(fail_wakes=0.7, crash_wakes=0.4)
    with pytest.raises(ValueError, match="shares"):
        FakeSubstrate(fail_wakes=-0.1)


# ------------------------------------------------------------------------- control API
async def test_templates_and_atespaces() -> None:
    sub = FakeSubstrate({(NS, NAME): 1 << 20, ("t", "unlimited"): None})
    assert await sub.get_template(NS, NAME) == Template(NS, NAME, 1 << 20)
    assert (await sub.get_template("t", "unlimited")).memory_limit_bytes is None
    assert (await refused(sub.get_template("t", "nope"))).code == "NOT_FOUND"
    missing = await refused(sub.create_actor(A, "a", NS, NAME))
    assert (missing.code, missing.status) == ("NOT_FOUND", 404)
    bad = await refused(sub.ensure_atespace("no/slash"))
    assert bad.failure_class is FailureClass.MISCONFIGURED
    await sub.ensure_atespace(A)
    await sub.ensure_atespace(A)  # idempotent
    assert (await refused(sub.create_actor(A, "a", "t", "nope"))).code == "NOT_FOUND"
    assert (await refused(sub.create_actor(A, "-bad", NS, NAME))).code == "INVALID_ARGUMENT"


async def test_lifecycle_states_versions_and_no_ops() -> None:
    sub = await make()
    info = await sub.create_actor(A, "a", NS, NAME)
    assert (info.status, info.worker, info.version) == ("SUSPENDED", None, 0)
    assert (await refused(sub.create_actor(A, "a", NS, NAME))).code == "ALREADY_EXISTS"
    await sub.pause_actor(A, "a")  # nothing to pause
    await sub.suspend_actor(A, "a")  # already there
    assert (await sub.get_actor(A, "a")).version == 0
    running = await sub.resume_actor(A, "a")
    assert (running.status, running.worker, running.version) == ("RUNNING", "fake", 1)
    assert (await sub.resume_actor(A, "a")).version == 1  # no-op
    await sub.pause_actor(A, "a")
    paused = await sub.get_actor(A, "a")
    assert (paused.status, paused.worker, paused.version) == ("PAUSED", "fake", 2)
    await sub.resume_actor(A, "a")
    await sub.suspend_actor(A, "a")
    assert (await sub.get_actor(A, "a")).version == 4
    await sub.resume_actor(A, "a")
    await sub.pause_actor(A, "a")
    await sub.suspend_actor(A, "a")  # a paused state moves to the store
    assert await status(sub, "a") == "SUSPENDED"
    assert sub.wakes == 3


async def test_list_and_delete() -> None:
    sub = await make("b", "a", "c")
    await sub.ensure_atespace("other")
    await sub.create_actor("other", "z", NS, NAME)
    assert [a.name for a in await sub.list_actors(A)] == ["a", "b", "c"]
    await sub.resume_actor(A, "b")
    await sub.delete_actor(A, "b")  # any state
    assert [a.name for a in await sub.list_actors(A)] == ["a", "c"]
    for call in (sub.get_actor(A, "b"), sub.delete_actor(A, "b"), sub.resume_actor(A, "b")):
        gone = await refused(call)
        assert (gone.code, gone.status, gone.failure_class) == (
            "NOT_FOUND",
            404,
            FailureClass.REPLACE,
        )
    gone = await refused(sub.request(A, "b", "ping", json={}))
    assert (gone.code, gone.status, gone.from_router) == ("ACTOR_NOT_FOUND", 404, True)
    assert (await refused(sub.list_actors("nowhere"))).code == "NOT_FOUND"


# ------------------------------------------------------------------------- router
async def test_a_request_wakes_a_suspended_or_paused_actor() -> None:
    sub = await make("a")
    answer = await sub.request(A, "a", "ping", json={"message": "hi"})
    assert orjson.loads(answer.body) == {"message": "hi"}
    assert answer.status == 200 and answer.content_type == "application/json"
    assert answer.server_elapsed_us is not None and answer.server_elapsed_us >= 0
    assert await status(sub, "a") == "RUNNING" and sub.wakes == 1
    await sub.request(A, "a", "/ping", json={})  # already running: no wake
    await sub.pause_actor(A, "a")
    await sub.request(A, "a", "ping")
    assert await status(sub, "a") == "RUNNING" and sub.wakes == 2


async def test_async_suspend_answers_at_once_and_a_later_request_queues_behind_it() -> None:
    sub = await make("a")
    await sub.resume_actor(A, "a")
    await sub.suspend_actor(A, "a", wait=False)
    assert await status(sub, "a") == "SUSPENDING"
    await sub.request(A, "a", "ping", json={})  # waits for the suspend, then wakes
    info = await sub.get_actor(A, "a")
    assert (info.status, info.version) == ("RUNNING", 3)
    await sub.suspend_actor(A, "a", wait=False)
    await sub.aclose()
    assert await status(sub, "a") == "SUSPENDED"


async def test_a_suspend_waits_for_the_request_in_flight() -> None:
    sub = await make("a")
    await sub.resume_actor(A, "a")
    burn = asyncio.create_task(sub.request(A, "a", "burncpu", json={"millis": 30, "parallel": 2}))
    await asyncio.sleep(0)  # one turn of the loop: the burn is inside the actor, sleeping
    assert not burn.done() and await status(sub, "a") == "RUNNING"
    await sub.suspend_actor(A, "a")
    assert burn.done()
    answer = await burn
    assert orjson.loads(answer.body)["iterations"] > 0
    assert answer.server_elapsed_us is not None and answer.server_elapsed_us >= 29_000


def ram(key: str, size: int, mode: str) -> dict[str, Any]:
    return {"json": {"key": key, "size": size, "mode": mode}}


async def test_glutton_answers() -> None:
    sub = await make("a")

    async def call(route: str, **kwargs: Any) -> Any:
        answer = await sub.request(A, "a", route, **kwargs)
        return orjson.loads(answer.body) if answer.content_type == "application/json" else answer

    assert await call("writeram", **ram("k", 10_000, "overwrite")) == {"size": 10_000}
    assert await call("writeram", **ram("k", 4, "overwrite")) == {"size": 10_000}
    assert await call("writeram", **ram("k", 3000, "overwrite_rotate")) == {"size": 10_000}
    walked = await call("readram", json={"key": "k", "digest": True})
    assert walked["size"] == 10_000 and isinstance(walked["checksum"], int)
    assert walked["sha256"] == hashlib.sha256(bytes(10_000)).hexdigest()
    written = await call("writedisk", **ram("f", 500, "truncate"))
    assert written == {"size": 500, "sha256": hashlib.sha256(bytes(500)).hexdigest()}
    data = random.Random(1).randbytes(2000)
    ingested = await call("ingest", body=data, params={"key": "up"})
    assert ingested == {"size": 2000, "sha256": hashlib.sha256(data).hexdigest()}
    assert await call("readdisk", json={"key": "up", "mode": "digest"}) == ingested
    raw = await call("readdisk", json={"key": "up", "mode": "data"})
    assert (raw.body, raw.content_type) == (data, "application/octet-stream")
    kept = await call("writedisk", **ram("up", 100, "overwrite"))  # keeps the tail
    assert kept["sha256"] == hashlib.sha256(bytes(100) + data[100:]).hexdigest()


@pytest.mark.parametrize(
    ("route", "kwargs", "code", "status"),
    [
        ("writeram", ram("x", 1, "overwrite_rotate"), "NOT_FOUND", 404),
        ("readram", {"json": {"key": "x"}}, "NOT_FOUND", 404),
        ("readdisk", {"json": {"key": "x", "mode": "digest"}}, "NOT_FOUND", 404),
        ("writeram", ram("a b", 1, "truncate"), "INVALID_ARGUMENT", 400),
        ("writeram", ram("x", 0, "truncate"), "INVALID_ARGUMENT", 400),
        ("writedisk", ram("x", 1, "rotate"), "INVALID_ARGUMENT", 400),
        ("burncpu", {"body": b"{not json"}, "INVALID_ARGUMENT", 400),
        ("ingest", {"body": b"abc"}, "INVALID_ARGUMENT", 400),  # no key
        ("readyz", {}, "INVALID_ARGUMENT", 405),  # GET only
        ("nope", {}, "NOT_FOUND", 404),
        ("writeram", ram("x", 2 << 20, "truncate"), "RESOURCE_EXHAUSTED", 429),  # > limit
    ],
)
async def test_glutton_errors_are_the_actors_own(
    route: str, kwargs: dict[str, Any], code: str, status: int
) -> None:
    sub = await make("a", sub=FakeSubstrate({(NS, NAME): 1 << 20}))
    error = await refused(sub.request(A, "a", route, **kwargs))
    assert (error.code, error.status, error.from_router) == (code, status, False)
    # Never "replace": the actor is fine. A request it can never serve is the run's fault
    # (misconfigured: not counted toward a replacement either); anything else is counted.
    bad_request = code == "INVALID_ARGUMENT"
    expected = FailureClass.MISCONFIGURED if bad_request else FailureClass.COUNT
    assert error.failure_class is expected


async def test_memory_limit_covers_arrays_and_files() -> None:
    sub = await make("a", sub=FakeSubstrate({(NS, NAME): 1000}))
    await sub.request(A, "a", "writeram", **ram("r", 600, "truncate"))
    await sub.request(A, "a", "ingest", body=b"x" * 400, params={"key": "f"})
    full = await refused(sub.request(A, "a", "ingest", body=b"x" * 401, params={"key": "f"}))
    assert full.code == "RESOURCE_EXHAUSTED" and "memory limit 1000" in full.message
    await sub.request(A, "a", "writeram", **ram("r", 100, "truncate"))
    await sub.request(A, "a", "ingest", body=b"x" * 900, params={"key": "f"})


async def test_the_engines_ops_and_session_run_on_the_fake() -> None:
    sub = await make("a")
    script = load_script("smoke")
    rng = random.Random(3)
    sizes: dict[str, list[int]] = {}
    for step in script.steps:
        for op in step.ops:
            size = await ops.perform(sub, A, "a", op, rng, timeout=5.0)
            sizes.setdefault(op.kind, []).append(size)
    # perform gives the answer's size in bytes: the file itself for read_disk_data (16Ki,
    # as write_disk wrote it), nothing for a dwell, a JSON answer for every other op.
    assert sizes.pop("read_disk_data") == [16 * 1024]
    assert sizes.pop("dwell") == [0]
    assert all(size > 0 for each in sizes.values() for size in each), sizes
    params = RunParams(script="smoke", think_scale=0.0, seed=7)
    ctx = RunContext(sub, Recorder(), script, params, A, ActorLedger(A))
    session = Session(ctx, 0)
    await session.start(0)
    for _ in range(len(script.steps)):
        assert await session.turn(now_ns())
        assert await session.hibernate()
    assert session.cursor == 0 and await status(sub, session.actor) == "SUSPENDED"


async def test_timeout() -> None:
    sub = await make("a")
    slow = sub.request(A, "a", "burncpu", json={"millis": 500}, timeout=0.01)
    error = await refused(slow)
    assert (error.code, error.failure_class) == ("TIMEOUT", FailureClass.COUNT)


# ------------------------------------------------------------------------- faults
async def test_fail_wakes_keeps_the_actor_parked_and_is_retried_later() -> None:
    sub = await make("a", sub=FakeSubstrate(fail_wakes=1.0))
    verdict = await refused(sub.request(A, "a", "ping", json={}))
    assert (verdict.code, verdict.status, verdict.from_router) == ("RESOURCE_EXHAUSTED", 503, True)
    assert verdict.failure_class is FailureClass.RETRY_LATER
    control = await refused(sub.resume_actor(A, "a"))
    assert (control.status, control.failure_class) == (429, FailureClass.RETRY_LATER)
    assert await status(sub, "a") == "SUSPENDED" and sub.wakes == 0


async def test_crashed_actors_answer_aborted_until_deleted() -> None:
    sub = await make("a", "b", sub=FakeSubstrate(crash_wakes=1.0))
    crash = await refused(sub.request(A, "a", "ping", json={}))
    assert (crash.code, crash.from_router, crash.crashed) == ("ABORTED", True, True)
    assert crash.failure_class is FailureClass.REPLACE
    info = await sub.get_actor(A, "a")
    assert (info.status, info.worker) == ("CRASHED", None)
    for call in (sub.resume_actor(A, "a"), sub.suspend_actor(A, "a"), sub.pause_actor(A, "a")):
        assert (await refused(call)).crashed
    assert (await refused(sub.suspend_actor(A, "a", wait=False))).crashed
    await sub.delete_actor(A, "a")
    assert (await refused(sub.resume_actor(A, "b"))).crashed  # every wake crashes


async def test_crash_on_demand_hits_only_actors_a_worker_holds() -> None:
    sub = await make("up", "parked")
    await sub.resume_actor(A, "up")
    assert not sub.crash(A, "parked") and not sub.crash(A, "nobody")
    assert sub.crash(A, "up")
    assert (await refused(sub.request(A, "up", "ping"))).crashed
    assert await status(sub, "parked") == "SUSPENDED"


async def test_a_crash_mid_request_aborts_it_and_the_suspend_waiting_for_it() -> None:
    sub = await make("a")
    await sub.resume_actor(A, "a")
    burn = asyncio.create_task(sub.request(A, "a", "burncpu", json={"millis": 30}))
    await asyncio.sleep(0)  # one turn: the burn is inside the actor
    suspend = asyncio.create_task(sub.suspend_actor(A, "a"))
    await asyncio.sleep(0)  # one more: the suspend waits for it. No timer ran in between:
    # the burn's 30 ms can only end on a later turn, however long these took.
    assert not burn.done() and await status(sub, "a") == "SUSPENDING"
    assert sub.crash(A, "a")
    error = await refused(burn)
    assert (error.code, error.crashed, error.from_router) == ("ABORTED", True, True)
    assert (await refused(suspend)).crashed
    assert await status(sub, "a") == "CRASHED"


async def test_faults_are_seeded() -> None:
    async def outcomes(seed: int) -> list[bool]:
        sub = await make("a", sub=FakeSubstrate(fail_wakes=0.5, seed=seed))
        seen = []
        for _ in range(32):
            try:
                await sub.request(A, "a", "ping", json={})
                await sub.suspend_actor(A, "a")
                seen.append(True)
            except SubstrateError:
                seen.append(False)
        return seen

    first = await outcomes(11)
    assert first == await outcomes(11)
    assert first != await outcomes(12)
    assert 4 < sum(first) < 28


# ------------------------------------------------------------------------- same answers
Scenario = Callable[[FakeSubstrate], Awaitable[Any]]


async def _gone(sub: FakeSubstrate) -> Any:
    return await sub.request(A, "nobody", "ping", json={})


async def _deleted_control(sub: FakeSubstrate) -> Any:
    return await sub.get_actor(A, "nobody")


async def _crashed(sub: FakeSubstrate) -> Any:
    await sub.resume_actor(A, "a")
    sub.crash(A, "a")
    return await sub.request(A, "a", "ping", json={})


async def _crashed_control(sub: FakeSubstrate) -> Any:
    await sub.resume_actor(A, "a")
    sub.crash(A, "a")
    return await sub.resume_actor(A, "a")


async def _no_room(sub: FakeSubstrate) -> Any:
    sub.fail_wakes = 1.0
    return await sub.request(A, "a", "ping", json={})


async def _no_room_control(sub: FakeSubstrate) -> Any:
    sub.fail_wakes = 1.0
    return await sub.resume_actor(A, "a")


async def _missing_file(sub: FakeSubstrate) -> Any:
    return await sub.request(A, "a", "readdisk", json={"key": "x", "mode": "digest"})


async def _bad_argument(sub: FakeSubstrate) -> Any:
    return await sub.request(A, "a", "burncpu", json={"millis": -1})


@pytest.mark.parametrize(
    ("scenario", "code", "router", "control"),
    [
        (_gone, "ACTOR_NOT_FOUND", True, False),
        (_deleted_control, "NOT_FOUND", False, True),
        (_crashed, "ABORTED", True, False),
        (_crashed_control, "ABORTED", False, True),
        (_no_room, "RESOURCE_EXHAUSTED", True, False),
        (_no_room_control, "RESOURCE_EXHAUSTED", False, True),
        (_missing_file, "NOT_FOUND", False, False),
        (_bad_argument, "INVALID_ARGUMENT", False, False),
    ],
)
async def test_errors_classify_as_the_local_substrates(
    scenario: Scenario, code: str, router: bool, control: bool
) -> None:
    sub = await make("a")
    fake = await refused(scenario(sub))
    # A crash is told by its message (§3.4): these are local_substrate/actors.py's words.
    message = "actor space/a crashed (its worker died); delete it" if code == "ABORTED" else "no"
    assert answer(fake) == answer(local_answer(code, message, router=router, control=control))
