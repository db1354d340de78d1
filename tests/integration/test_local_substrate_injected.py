"""Faults on demand (docs/SPEC.md §2.4) against the real local substrate, seen through the real
clients: HttpSubstrate (the JSON wire), ControlClient (ateapi.Control over gRPC) and protobuf
bodies through the router (the ate wire's denials). One substrate for the module; each test
sets its rules while it runs (PUT /v1/debug/faults) and turns them off after. Shares are
checked on a fixed seed (every test starts on SEED, whatever ran before it) with generous
bounds; the server's own counts say what it drew. Latencies are checked from below only: the
server's elapsed header must hold at least the delay the rule drew (the test draws the same
seeded stream with the substrate's own Faults), which no load can make false."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from agentsession_core.substrate.ate import glutton_codec as gc
from agentsession_core.substrate.ate.control import ControlClient
from agentsession_core.substrate.errors import FailureClass, SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.protocol import (
    DEBUG_FAULTS_PATH,
    PROTOBUF_CONTENT_TYPE,
    ROUTER_HEADER,
    TARGET_HEADER,
)
from local_substrate.fault_rules import parse_rules
from local_substrate.faults import Faults
from local_substrate.launcher import LocalSubstrateProcess

TOKEN = "fault-token"
SEED = 11
GLUTTON = ("benchmark-workloads", "glutton")
SERVE = (sys.executable, "-m", "agentsession_core", "substrate", "serve")


@pytest.fixture(scope="module")
def sub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    root = tmp_path_factory.mktemp("injected")
    with LocalSubstrateProcess(
        workers=3,
        store=root / "store",
        park_timeout=30,  # a replacement worker may be slow to start on a busy machine
        token=TOKEN,
        fault_seed=SEED,
        extra_args=["--max-op-size", "1Mi"],
        log_path=root / "log",
    ) as proc:
        yield proc


@pytest.fixture
async def json_api(sub: LocalSubstrateProcess) -> AsyncIterator[HttpSubstrate]:
    client = HttpSubstrate(sub.url, token=TOKEN, control_timeout=20, router_timeout=20)
    yield client
    await client.aclose()


@pytest.fixture
async def grpc_api(sub: LocalSubstrateProcess) -> AsyncIterator[ControlClient]:
    client = ControlClient(sub.grpc_url, token=TOKEN, timeout=20)
    yield client
    await client.aclose()


@pytest.fixture
async def space(
    sub: LocalSubstrateProcess, json_api: HttpSubstrate, request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    """A fresh atespace; afterwards the faults are off (on SEED again) and its actors
    deleted."""
    name = request.node.name.replace("_", "-")[5:45].strip("-")
    await json_api.ensure_atespace(name)
    yield name
    sub.set_faults([], seed=SEED)
    for actor in await json_api.list_actors(name):
        await json_api.delete_actor(name, actor.name)


async def ate_post(
    sub: LocalSubstrateProcess, target: str, route: str, body: bytes
) -> httpx.Response:
    headers = {
        TARGET_HEADER: target,
        "content-type": PROTOBUF_CONTENT_TYPE,
        "authorization": f"Bearer {TOKEN}",
    }
    async with httpx.AsyncClient(base_url=sub.url, timeout=20) as http:
        return await http.post(f"/{route}", content=body, headers=headers)


def counts(sub: LocalSubstrateProcess) -> dict[str, tuple[int, int]]:
    return {r["rule"]: (r["seen"], r["fired"]) for r in sub.faults()["rules"]}


async def test_wake_refuse_on_every_wire(
    sub: LocalSubstrateProcess, json_api: HttpSubstrate, grpc_api: ControlClient, space: str
) -> None:
    for name in ("a", "b"):
        await json_api.create_actor(space, name, *GLUTTON)
    sub.set_faults(["wake:refuse:1"])
    with pytest.raises(SubstrateError) as control:
        await json_api.resume_actor(space, "a")
    assert (control.value.code, control.value.status) == ("RESOURCE_EXHAUSTED", 429)
    assert control.value.failure_class is FailureClass.RETRY_LATER
    with pytest.raises(SubstrateError) as over_grpc:
        await grpc_api.resume_actor(space, "a")
    assert over_grpc.value.code == "RESOURCE_EXHAUSTED"
    with pytest.raises(SubstrateError) as routed:
        await json_api.request(space, "a", "ping", json={})
    assert (routed.value.code, routed.value.status, routed.value.from_router) == (
        "RESOURCE_EXHAUSTED",
        503,
        True,
    )
    ate = await ate_post(sub, f"{space}/a", "ping", gc.ping())
    assert ate.status_code == 503 and ate.headers["content-type"].startswith("text/plain")
    assert ROUTER_HEADER not in ate.headers and "injected" in ate.text
    assert (await json_api.get_actor(space, "a")).status == "SUSPENDED"

    # A share: 60 wakes, about a quarter refused; the others really wake.
    sub.set_faults(["wake:refuse:0.25"])
    refused = 0
    for _ in range(60):
        try:
            await json_api.request(space, "b", "ping", json={})
        except SubstrateError as exc:
            assert exc.code == "RESOURCE_EXHAUSTED"
            refused += 1
        else:
            await json_api.suspend_actor(space, "b")
    assert 6 <= refused <= 27
    assert counts(sub) == {"wake:refuse:0.25": (60, refused)}


async def test_wake_crash_kills_the_worker_on_every_wire(
    sub: LocalSubstrateProcess, json_api: HttpSubstrate, grpc_api: ControlClient, space: str
) -> None:
    crashes = sub.debug_workers()["crashes"]
    for name in ("j", "g", "r", "p"):
        await json_api.create_actor(space, name, *GLUTTON)
    sub.set_faults(["wake:crash:1"])
    with pytest.raises(SubstrateError) as control:
        await json_api.resume_actor(space, "j")
    assert control.value.crashed and control.value.failure_class is FailureClass.REPLACE
    assert (await json_api.get_actor(space, "j")).status == "CRASHED"
    with pytest.raises(SubstrateError) as over_grpc:
        await grpc_api.resume_actor(space, "g")
    assert over_grpc.value.code == "ABORTED" and over_grpc.value.crashed
    with pytest.raises(SubstrateError) as routed:
        await json_api.request(space, "r", "ping", json={})
    assert routed.value.crashed and routed.value.from_router
    ate = await ate_post(sub, f"{space}/p", "ping", gc.ping())
    assert ate.status_code == 503 and "crashed" in ate.text
    # Real deaths: the pool counted each one and replaces the workers.
    assert sub.debug_workers()["crashes"] == crashes + 4

    sub.set_faults(["wake:crash:0.3"])
    crashed = 0
    for i in range(10):
        name = f"s{i}"
        await json_api.create_actor(space, name, *GLUTTON)
        try:
            await json_api.resume_actor(space, name)
        except SubstrateError as exc:
            assert exc.crashed
            crashed += 1
        await json_api.delete_actor(space, name)
    assert 1 <= crashed <= 6
    assert counts(sub) == {"wake:crash:0.3": (10, crashed)}


async def test_create_quota_and_refused_creates(
    sub: LocalSubstrateProcess, json_api: HttpSubstrate, grpc_api: ControlClient, space: str
) -> None:
    live = len(await json_api.list_actors(space))
    assert live == 0
    sub.set_faults(["create:quota:2"])
    await json_api.create_actor(space, "q1", *GLUTTON)
    await grpc_api.create_actor(space, "q2", *GLUTTON)
    with pytest.raises(SubstrateError) as over_json:
        await json_api.create_actor(space, "q3", *GLUTTON)
    assert (over_json.value.code, over_json.value.status) == ("RESOURCE_EXHAUSTED", 429)
    assert "quota of 2" in over_json.value.message
    with pytest.raises(SubstrateError) as over_grpc:
        await grpc_api.create_actor(space, "q3", *GLUTTON)
    assert over_grpc.value.code == "RESOURCE_EXHAUSTED"
    await json_api.delete_actor(space, "q1")  # a live actor less: room for one more
    await json_api.create_actor(space, "q3", *GLUTTON)

    sub.set_faults(["create:refuse:0.5"])
    refused = 0
    for i in range(30):
        try:
            await json_api.create_actor(space, f"c{i}", *GLUTTON)
        except SubstrateError as exc:
            assert exc.code == "RESOURCE_EXHAUSTED"
            refused += 1
    assert 7 <= refused <= 23


async def test_op_fail_is_the_gluttons_500_on_that_route_only(
    sub: LocalSubstrateProcess, json_api: HttpSubstrate, space: str
) -> None:
    await json_api.create_actor(space, "w", *GLUTTON)
    sub.set_faults(["op:/writeram:fail:0.2"])
    failed = 0
    for _ in range(50):
        try:
            await json_api.request(
                space, "w", "writeram", json={"key": "k", "size": 4096, "mode": "overwrite"}
            )
        except SubstrateError as exc:
            # The glutton's own answer, not a router verdict: counted, not retried (§3.4).
            assert (exc.code, exc.status, exc.from_router) == ("INTERNAL", 500, False)
            assert exc.failure_class is FailureClass.COUNT
            failed += 1
        await json_api.request(space, "w", "ping", json={})  # other routes are untouched
    assert 3 <= failed <= 20
    assert counts(sub) == {"op:/writeram:fail:0.2": (50, failed)}
    sub.set_faults(["op:/writeram:fail:1"])
    ate = await ate_post(sub, f"{space}/w", "writeram", gc.write_ram("k", 4096, "overwrite"))
    assert ate.status_code == 500 and ate.headers["content-type"].startswith("text/plain")
    ok = await ate_post(sub, f"{space}/w", "ping", gc.ping("x"))
    assert ok.status_code == 200 and gc.decode_answer("ping", ok.content) == gc.PingResult("x")


async def timed(coro: object) -> float:
    start = time.perf_counter()
    await coro  # type: ignore[misc]
    return time.perf_counter() - start


def drawn(rules: list[str], scope: str, times: int, route: str = "/ping") -> list[float]:
    """The delays the substrate draws for `times` calls in `scope` under `rules` on SEED: its
    own Faults, run here on the same seeded streams (each rule's stream is its own)."""
    model = Faults(parse_rules(rules), SEED)
    ask = {"router": lambda: model.router_arrival(route), "wake": model.wake}.get(
        scope, model.control
    )
    return [ask().delay for _ in range(times)]


US = 1_000_000
SLACK_US = 1_000  # the sleep and the header are read from two clocks' floats


async def test_latency_distributions_on_router_control_and_wake(
    sub: LocalSubstrateProcess, json_api: HttpSubstrate, grpc_api: ControlClient, space: str
) -> None:
    await json_api.create_actor(space, "l", *GLUTTON)
    await json_api.resume_actor(space, "l")
    rule = "router:latency:exp:40ms"
    sub.set_faults([rule], seed=SEED)
    expected = drawn([rule], "router", 40)
    # An exponential of mean 40 ms: its draws on SEED spread widely around that mean.
    assert 0.02 < sum(expected) / len(expected) < 0.08 and max(expected) > 5 * min(expected)
    for delay in expected:
        answer = await json_api.request(space, "l", "ping", json={})
        assert answer.server_elapsed_us is not None
        assert answer.server_elapsed_us >= delay * US - SLACK_US, (delay, answer)
    assert counts(sub) == {rule: (40, 40)}

    rules = ["control:latency:fixed:150ms", "wake:latency:uniform:200ms:300ms"]
    sub.set_faults(rules, seed=SEED)
    assert await timed(json_api.get_actor(space, "l")) >= 0.15
    over_grpc = await grpc_api.get_actor(space, "l")
    assert over_grpc.server_elapsed_us is not None
    assert over_grpc.server_elapsed_us >= 150_000 - SLACK_US
    await json_api.suspend_actor(space, "l")
    (wake,) = drawn(rules, "wake", 1)
    assert 0.2 <= wake <= 0.3
    woke = await json_api.request(space, "l", "ping", json={})  # wakes it: not a control call
    assert woke.server_elapsed_us is not None
    assert woke.server_elapsed_us >= wake * US - SLACK_US
    # Three control calls took the control latency; the router's wake took only its own.
    assert counts(sub) == {rules[0]: (3, 3), rules[1]: (1, 1)}


async def test_hang_holds_the_answer_until_the_client_gives_up(
    sub: LocalSubstrateProcess, json_api: HttpSubstrate, space: str
) -> None:
    await json_api.create_actor(space, "h", *GLUTTON)
    await json_api.resume_actor(space, "h")
    sub.set_faults(["router:hang:1"])
    for _ in range(2):
        started = time.perf_counter()
        with pytest.raises(SubstrateError) as hung:
            await json_api.request(space, "h", "ping", json={}, timeout=0.4)
        assert hung.value.code == "TIMEOUT" and time.perf_counter() - started >= 0.4
    assert counts(sub) == {"router:hang:1": (2, 2)}
    sub.set_faults([])
    await json_api.request(space, "h", "ping", json={})  # served again once the rule is off
    sub.set_faults(["control:hang:1"])
    grpc_api = ControlClient(sub.grpc_url, token=TOKEN, timeout=0.5)
    try:
        with pytest.raises(SubstrateError) as over_grpc:
            await grpc_api.get_actor(space, "h")
        assert over_grpc.value.code == "DEADLINE_EXCEEDED"
    finally:
        await grpc_api.aclose()
    impatient = HttpSubstrate(sub.url, token=TOKEN, control_timeout=0.5)
    try:
        with pytest.raises(SubstrateError) as over_json:
            await impatient.get_actor(space, "h")
        assert over_json.value.code == "TIMEOUT"
    finally:
        await impatient.aclose()


async def test_reset_closes_the_connection_without_an_answer(
    sub: LocalSubstrateProcess, json_api: HttpSubstrate, grpc_api: ControlClient, space: str
) -> None:
    await json_api.create_actor(space, "x", *GLUTTON)
    await json_api.resume_actor(space, "x")
    sub.set_faults(["control:reset:0.3"])
    reset = 0
    for _ in range(40):
        try:
            await json_api.get_actor(space, "x")
        except SubstrateError as exc:
            assert exc.code == "TRANSPORT"
            reset += 1
    assert 5 <= reset <= 20
    sub.set_faults(["control:reset:1"])
    with pytest.raises(SubstrateError) as over_grpc:
        await grpc_api.get_actor(space, "x")
    assert over_grpc.value.code == "UNAVAILABLE"  # what gRPC reports for a reset connection
    sub.set_faults(["router:reset:1"])
    with pytest.raises(SubstrateError) as routed:
        await json_api.request(space, "x", "ping", json={})
    assert routed.value.code == "TRANSPORT"
    with pytest.raises(httpx.TransportError):
        await ate_post(sub, f"{space}/x", "ping", gc.ping())


async def test_unavailable_is_the_routers_own_503_before_any_wake(
    sub: LocalSubstrateProcess, json_api: HttpSubstrate, space: str
) -> None:
    await json_api.create_actor(space, "u", *GLUTTON)  # SUSPENDED: a request would wake it
    sub.set_faults(["router:unavailable:1"])
    with pytest.raises(SubstrateError) as routed:
        await json_api.request(space, "u", "ping", json={})
    # A router verdict (x-ate-router), so the session retries later and counts nothing (§3.4).
    assert (routed.value.code, routed.value.status, routed.value.from_router) == (
        "UNAVAILABLE",
        503,
        True,
    )
    assert routed.value.failure_class is FailureClass.RETRY_LATER
    ate = await ate_post(sub, f"{space}/u", "ping", gc.ping())
    assert ate.status_code == 503 and ate.headers["content-type"].startswith("text/plain")
    assert ROUTER_HEADER not in ate.headers and "crashed" not in ate.text
    assert (await json_api.get_actor(space, "u")).status == "SUSPENDED"  # nothing was woken
    await json_api.resume_actor(space, "u")  # the control API is untouched
    sub.set_faults(["op:/writeram:unavailable:1"])
    await json_api.request(space, "u", "ping", json={})
    with pytest.raises(SubstrateError) as one_route:
        await json_api.request(
            space, "u", "writeram", json={"key": "k", "size": 4096, "mode": "overwrite"}
        )
    assert one_route.value.code == "UNAVAILABLE"
    assert counts(sub) == {"op:/writeram:unavailable:1": (1, 1)}


async def test_rules_change_while_running_and_a_bad_rule_changes_nothing(
    sub: LocalSubstrateProcess, json_api: HttpSubstrate, space: str
) -> None:
    await json_api.create_actor(space, "c", *GLUTTON)
    await json_api.resume_actor(space, "c")
    sub.set_faults(["op:/ping:fail:1"], seed=5)
    with pytest.raises(SubstrateError):
        await json_api.request(space, "c", "ping", json={})
    async with httpx.AsyncClient(base_url=sub.url, timeout=10) as http:
        bad = await http.put(
            DEBUG_FAULTS_PATH,
            json=["router:latency:5ms", "wake:crush:0.1"],
            headers={"authorization": f"Bearer {TOKEN}"},
        )
        assert bad.status_code == 400
        message = bad.json()["error"]["message"]
        assert message.startswith("fault rule 'wake:crush:0.1'") and "'crush'" in message
        assert (await http.get(DEBUG_FAULTS_PATH)).status_code == 401  # the token guards it
    assert sub.faults() == {
        "seed": 5,
        "rules": [{"rule": "op:/ping:fail:1", "seen": 1, "fired": 1}],
    }
    sub.set_faults([])
    await json_api.request(space, "c", "ping", json={})
    assert sub.faults()["rules"] == []


def test_serve_refuses_a_bad_rule_in_one_line_with_exit_2() -> None:
    done = subprocess.run(
        [*SERVE, "--fault", "wake:refuse:0.2", "--fault", "router:latency:exp:fast"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "'router:latency:exp:fast'" in lines[0] and "fast" in lines[0]
