"""The local substrate over loopback: state survives every hibernation mode, implicit wake,
router verdicts vs glutton answers, and clear errors on bad input."""

from __future__ import annotations

import asyncio
import hashlib
import json

import httpx
import orjson
import pytest

from agentsession_core.substrate.errors import FailureClass, SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import SHARED_WORKERS, TOKEN


@pytest.fixture
def client(json_client: HttpSubstrate) -> HttpSubstrate:
    """This module's subject is the JSON wire (its bodies are JSON): its client, whatever
    the integration fixtures speak by default (conftest.py: ate)."""
    return json_client


GLUTTON = ("benchmark-workloads", "glutton")


async def make_actor(
    client: HttpSubstrate, atespace: str, name: str, template: tuple[str, str] = GLUTTON
) -> None:
    info = await client.create_actor(atespace, name, *template)
    assert info.status == "SUSPENDED"


async def fill(client: HttpSubstrate, a: str, n: str) -> None:
    await client.request(
        a, n, "writeram", json={"key": "ctx", "size": 3 << 20, "mode": "overwrite"}
    )
    await client.request(
        a, n, "writeram", json={"key": "ctx", "size": 1 << 20, "mode": "overwrite_rotate"}
    )
    await client.request(a, n, "writeram", json={"key": "ws", "size": 70_001, "mode": "truncate"})
    await client.request(
        a, n, "writedisk", json={"key": "build", "size": 1 << 20, "mode": "truncate"}
    )
    await client.request(a, n, "ingest", body=b"patch-bytes" * 1000, params={"key": "patch"})


async def state(client: HttpSubstrate, a: str, n: str) -> dict[str, object]:
    """Every array's page checksum and sha256, every file's size and sha256."""
    out: dict[str, object] = {}
    for key in ("ctx", "ws"):
        r = await client.request(a, n, "readram", json={"key": key, "digest": True})
        out[f"ram:{key}"] = orjson.loads(r.body)
    for key in ("build", "patch"):
        r = await client.request(a, n, "readdisk", json={"key": key, "mode": "digest"})
        out[f"file:{key}"] = orjson.loads(r.body)
    return out


async def test_state_survives_suspend(client: HttpSubstrate, atespace: str) -> None:
    await make_actor(client, atespace, "a1")
    await fill(client, atespace, "a1")
    before = await state(client, atespace, "a1")
    assert before["file:patch"]["sha256"] == hashlib.sha256(b"patch-bytes" * 1000).hexdigest()
    await client.suspend_actor(atespace, "a1")
    info = await client.get_actor(atespace, "a1")
    assert (info.status, info.worker) == ("SUSPENDED", None)
    resumed = await client.resume_actor(atespace, "a1")
    assert resumed.status == "RUNNING"
    assert await state(client, atespace, "a1") == before


async def test_state_survives_suspend_async_and_implicit_wake(
    client: HttpSubstrate, atespace: str
) -> None:
    await make_actor(client, atespace, "a1")
    await fill(client, atespace, "a1")
    before = await state(client, atespace, "a1")
    await client.suspend_actor(atespace, "a1", wait=False)
    deadline = asyncio.get_running_loop().time() + 60  # only a hang takes this long
    while (status := (await client.get_actor(atespace, "a1")).status) != "SUSPENDED":
        assert asyncio.get_running_loop().time() < deadline, status
        await asyncio.sleep(0.02)
    # The first router request wakes it.
    assert await state(client, atespace, "a1") == before
    assert (await client.get_actor(atespace, "a1")).status == "RUNNING"
    # A request sent right behind an async suspend queues behind it and still sees the state.
    await client.suspend_actor(atespace, "a1", wait=False)
    assert await state(client, atespace, "a1") == before


async def test_state_survives_pause_on_same_and_other_worker(
    client: HttpSubstrate, atespace: str
) -> None:
    await make_actor(client, atespace, "p")
    await fill(client, atespace, "p")
    before = await state(client, atespace, "p")
    home = (await client.get_actor(atespace, "p")).worker
    await client.pause_actor(atespace, "p")
    paused = await client.get_actor(atespace, "p")
    assert (paused.status, paused.worker) == ("PAUSED", home)
    # Free home worker: the resume swaps back in place.
    assert (await client.resume_actor(atespace, "p")).worker == home
    assert await state(client, atespace, "p") == before

    # Pause again, then fill every worker so the resume has to migrate.
    await client.pause_actor(atespace, "p")
    others = [f"o{i}" for i in range(SHARED_WORKERS)]
    for name in others:
        await make_actor(client, atespace, name)
    hosts = {n: (await client.resume_actor(atespace, n)).worker for n in others}
    assert home in hosts.values()
    for name, host in hosts.items():
        if host != home:
            await client.suspend_actor(atespace, name)
    moved = await client.resume_actor(atespace, "p")
    assert moved.worker != home
    assert await state(client, atespace, "p") == before
    for name in [*others, "p"]:
        await client.delete_actor(atespace, name)


async def test_router_404_is_marked_glutton_404_is_not(
    client: HttpSubstrate, atespace: str
) -> None:
    with pytest.raises(SubstrateError) as gone:
        await client.request(atespace, "nobody", "ping", json={"message": "x"})
    assert (gone.value.code, gone.value.status, gone.value.from_router) == (
        "ACTOR_NOT_FOUND",
        404,
        True,
    )
    assert gone.value.failure_class is FailureClass.REPLACE

    await make_actor(client, atespace, "g")
    with pytest.raises(SubstrateError) as missing:
        await client.request(atespace, "g", "readdisk", json={"key": "nofile", "mode": "digest"})
    assert (missing.value.status, missing.value.from_router) == (404, False)
    assert missing.value.failure_class is FailureClass.COUNT
    with pytest.raises(SubstrateError) as rotate:
        await client.request(
            atespace, "g", "writeram", json={"key": "none", "size": 10, "mode": "overwrite_rotate"}
        )
    assert (rotate.value.status, rotate.value.from_router) == (404, False)


async def test_every_answer_carries_elapsed_header(
    substrate: LocalSubstrateProcess, client: HttpSubstrate, atespace: str
) -> None:
    """The header is the server's handling time in µs: an op that burns 50 ms of wall time
    inside the actor cannot be answered in less; the control API, a 404 and a refused
    router request (an error answer) carry it too, as a whole number."""
    await make_actor(client, atespace, "e")
    answer = await client.request(atespace, "e", "ping", json={"message": "hello"})
    assert orjson.loads(answer.body) == {"message": "hello"}
    assert answer.server_elapsed_us is not None
    burn = await client.request(atespace, "e", "burncpu", json={"millis": 50, "parallel": 1})
    # 1 ms of slack: the burn's deadline and the header are read from two clocks' floats.
    assert burn.server_elapsed_us is not None and burn.server_elapsed_us >= 49_000
    async with httpx.AsyncClient(base_url=substrate.url) as raw:
        for method, path in [
            ("GET", "/openapi.json"),
            ("GET", "/v1/templates/x/y"),
            ("POST", "/ping"),
        ]:
            r = await raw.request(method, path)
            assert r.headers["x-server-elapsed-us"].isdigit(), (path, r.headers)


async def test_glutton_routes_do_real_work(client: HttpSubstrate, atespace: str) -> None:
    await make_actor(client, atespace, "w")
    data = b"\x00\x01binary" * 5000
    ingest = orjson.loads(
        (await client.request(atespace, "w", "ingest", body=data, params={"key": "blob"})).body
    )
    assert ingest == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    raw = await client.request(atespace, "w", "readdisk", json={"key": "blob", "mode": "data"})
    assert raw.body == data and raw.content_type == "application/octet-stream"
    wrote = orjson.loads(
        (
            await client.request(
                atespace, "w", "writedisk", json={"key": "f", "size": 5000, "mode": "truncate"}
            )
        ).body
    )
    grown = orjson.loads(
        (
            await client.request(
                atespace, "w", "writedisk", json={"key": "f", "size": 100, "mode": "overwrite"}
            )
        ).body
    )
    assert wrote["size"] == grown["size"] == 5000 and wrote["sha256"] != grown["sha256"]
    await client.request(
        atespace, "w", "writeram", json={"key": "r", "size": 40960, "mode": "overwrite"}
    )
    first = orjson.loads(
        (await client.request(atespace, "w", "readram", json={"key": "r", "digest": True})).body
    )
    await client.request(
        atespace, "w", "writeram", json={"key": "r", "size": 4096, "mode": "overwrite_rotate"}
    )
    second = orjson.loads(
        (await client.request(atespace, "w", "readram", json={"key": "r", "digest": True})).body
    )
    assert first["size"] == second["size"] == 40960 and first["sha256"] != second["sha256"]
    burn = orjson.loads(
        (await client.request(atespace, "w", "burncpu", json={"millis": 100, "parallel": 2})).body
    )
    assert burn["iterations"] > 0


async def test_bad_input_gets_clear_errors_and_server_keeps_serving(
    substrate: LocalSubstrateProcess, client: HttpSubstrate, atespace: str
) -> None:
    await make_actor(client, atespace, "b")
    await make_actor(client, atespace, "tiny", ("test", "small"))

    async def fails(coro, code: str, status: int, router: bool, words: str) -> None:
        with pytest.raises(SubstrateError) as caught:
            await coro
        err = caught.value
        assert (err.code, err.status, err.from_router) == (code, status, router), err
        assert words in err.message, err.message

    await fails(
        client.request(
            atespace, "b", "writeram", json={"key": "../etc", "size": 10, "mode": "truncate"}
        ),
        "INVALID_ARGUMENT",
        400,
        False,
        "does not match",
    )
    await fails(
        client.request(atespace, "b", "ingest", body=b"x", params={"key": "a b"}),
        "INVALID_ARGUMENT",
        400,
        False,
        "does not match",
    )
    await fails(
        client.request(
            atespace, "b", "writedisk", json={"key": "big", "size": 9 << 20, "mode": "truncate"}
        ),
        "INVALID_ARGUMENT",
        400,
        False,
        "per-op cap",
    )
    await fails(
        client.request(atespace, "b", "burncpu", json={"millis": 10, "parallel": 99}),
        "INVALID_ARGUMENT",
        400,
        False,
        "parallel",
    )
    await fails(
        client.request(atespace, "b", "writeram", json={"key": "k", "mode": "truncate"}),
        "INVALID_ARGUMENT",
        400,
        False,
        "'size' is required",
    )
    await fails(
        client.request(
            atespace, "tiny", "writeram", json={"key": "k", "size": 2_000_000, "mode": "truncate"}
        ),
        "RESOURCE_EXHAUSTED",
        429,
        False,
        "memory limit",
    )
    await client.request(
        atespace, "tiny", "writeram", json={"key": "k", "size": 800_000, "mode": "truncate"}
    )
    await fails(
        client.request(
            atespace, "tiny", "writedisk", json={"key": "f", "size": 300_000, "mode": "truncate"}
        ),
        "RESOURCE_EXHAUSTED",
        429,
        False,
        "memory limit",
    )
    await fails(
        client.request(atespace, "b", "nosuchroute", json={}), "NOT_FOUND", 404, False, "no route"
    )
    await fails(client.create_actor(atespace, "b", *GLUTTON), "ALREADY_EXISTS", 409, True, "b")
    await fails(
        client.create_actor(atespace, "c", "no", "such"), "NOT_FOUND", 404, True, "template"
    )
    await fails(client.get_actor(atespace, "ghost"), "NOT_FOUND", 404, True, "ghost")

    async with httpx.AsyncClient(base_url=substrate.url) as raw:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        target = {"ate-target-actor": f"{atespace}/b"}
        cases = [
            ("POST", "/ping", {**auth, **target}, b"{not json", 400, "INVALID_ARGUMENT", None),
            (
                "POST",
                f"/v1/atespaces/{atespace}/actors",
                auth,
                b"[1,2",
                400,
                "INVALID_ARGUMENT",
                None,
            ),
            ("POST", "/ping", auth, b"{}", 400, "INVALID_ARGUMENT", "1"),
            (
                "POST",
                "/ping",
                {"Authorization": "Bearer wrong", **target},
                b"{}",
                401,
                "UNAUTHENTICATED",
                "1",
            ),
            (
                "GET",
                "/v1/templates/benchmark-workloads/glutton",
                {},
                b"",
                401,
                "UNAUTHENTICATED",
                None,
            ),
            ("GET", "/v1/nothing/here", auth, b"", 404, "NOT_FOUND", None),
            ("PUT", "/v1/atespaces/bad..name!", auth, b"", 400, "INVALID_ARGUMENT", None),
        ]
        for method, path, headers, body, status, code, router_mark in cases:
            r = await raw.request(method, path, headers=headers, content=body)
            assert r.status_code == status, (path, r.text)
            assert r.json()["error"]["code"] == code, (path, r.text)
            assert r.headers.get("x-ate-router") == router_mark, (path, r.headers)
    # Still serving, and the actor's state is untouched by all of that.
    assert orjson.loads(
        (await client.request(atespace, "b", "ping", json={"message": "ok"})).body
    ) == {"message": "ok"}


async def test_control_api_basics(
    substrate: LocalSubstrateProcess, client: HttpSubstrate, atespace: str
) -> None:
    template = await client.get_template(*GLUTTON)
    assert template.memory_limit_bytes == 1 << 30
    assert (await client.get_template("test", "small")).memory_limit_bytes == 1 << 20
    await client.ensure_atespace(atespace)  # idempotent
    for i in range(5):
        await make_actor(client, atespace, f"l{i}")
    async with httpx.AsyncClient(
        base_url=substrate.url, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as raw:
        page = (await raw.get(f"/v1/atespaces/{atespace}/actors?page_size=2")).json()
        assert len(page["actors"]) == 2 and page["next_page_token"]
        spec = (await raw.get("/openapi.json")).json()
        assert "/v1/atespaces/{atespace}/actors/{actor}:resume" in spec["paths"]
        assert "/burncpu" in spec["paths"]
        assert "ACTOR_NOT_FOUND" in json.dumps(spec["components"]["schemas"]["Error"])
    names = sorted(a.name for a in await client.list_actors(atespace))
    assert names == [f"l{i}" for i in range(5)]
    await client.resume_actor(atespace, "l0")
    await client.delete_actor(atespace, "l0")
    await client.delete_actor(atespace, "l1")
    with pytest.raises(SubstrateError) as gone:
        await client.request(atespace, "l0", "ping", json={})
    assert gone.value.code == "ACTOR_NOT_FOUND"
    assert len(await client.list_actors(atespace)) == 3


def test_a_substrate_that_does_not_start_in_time_says_it_timed_out() -> None:
    # 0.3 s: the child is still importing, so no line has come; the launcher must still end
    # it at the deadline and name the setting that gives it longer.
    proc = LocalSubstrateProcess(workers=1, start_timeout=0.3)
    with pytest.raises(RuntimeError) as raised:
        proc.start()
    message = str(raised.value)
    assert message.startswith("local substrate did not start in 0.3 s (timed out"), message
    assert "target.local_start_timeout_seconds" in message and "serving on" in message
    assert proc.process is not None and proc.process.poll() is not None  # not left running
