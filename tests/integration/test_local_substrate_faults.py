"""Faults against the real local substrate: a worker killed with SIGKILL, a pool with no
room (park timeout), and a clean shutdown that keeps the store."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator

import orjson
import psutil
import pytest

from agentsession_core.substrate.errors import FailureClass, SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import SHARED_WORKERS


@pytest.fixture
def client(json_client: HttpSubstrate) -> HttpSubstrate:
    """This module's subject is the JSON wire (its bodies are JSON): its client, whatever
    the integration fixtures speak by default (conftest.py: ate)."""
    return json_client


GLUTTON = ("benchmark-workloads", "glutton")


@pytest.fixture(scope="module")
def small_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    root = tmp_path_factory.mktemp("faults")
    with LocalSubstrateProcess(
        workers=3, store=root / "store", park_timeout=1.5, log_path=root / "log"
    ) as proc:
        yield proc


@pytest.fixture
async def sub(small_pool: LocalSubstrateProcess) -> AsyncIterator[HttpSubstrate]:
    client = HttpSubstrate(small_pool.url)
    yield client
    for atespace in ("crash", "park"):
        try:
            actors = await client.list_actors(atespace)
        except SubstrateError:
            continue
        for actor in actors:
            await client.delete_actor(atespace, actor.name)
    await client.aclose()


async def digest(sub: HttpSubstrate, a: str, n: str) -> tuple[object, object]:
    ram = await sub.request(a, n, "readram", json={"key": "m", "digest": True})
    disk = await sub.request(a, n, "readdisk", json={"key": "f", "mode": "digest"})
    return orjson.loads(ram.body), orjson.loads(disk.body)


async def put_state(sub: HttpSubstrate, a: str, n: str) -> None:
    await sub.request(a, n, "writeram", json={"key": "m", "size": 300_000, "mode": "overwrite"})
    await sub.request(a, n, "writedisk", json={"key": "f", "size": 200_000, "mode": "truncate"})


async def until(predicate, timeout: float = 60.0) -> None:
    """Poll until `predicate()` holds; the timeout only catches a hang."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        assert loop.time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


async def test_kill_9_worker_crashes_its_actor_only_and_pool_refills(
    small_pool: LocalSubstrateProcess, sub: HttpSubstrate
) -> None:
    a = "crash"
    await sub.ensure_atespace(a)
    for name in ("victim", "running", "parked"):
        await sub.create_actor(a, name, *GLUTTON)
        await put_state(sub, a, name)
    await sub.suspend_actor(a, "parked")
    running_before = await digest(sub, a, "running")
    parked_before = await digest(sub, a, "parked")
    await sub.suspend_actor(a, "parked")

    before = await asyncio.to_thread(small_pool.debug_workers)
    host = (await sub.get_actor(a, "victim")).worker
    pid = next(w["pid"] for w in before["workers"] if w["name"] == host)
    os.kill(pid, signal.SIGKILL)

    async def victim_crashed() -> bool:
        return (await sub.get_actor(a, "victim")).status == "CRASHED"

    async def pool_full() -> bool:
        state = await asyncio.to_thread(small_pool.debug_workers)
        alive = [w for w in state["workers"] if w["alive"] and psutil.pid_exists(w["pid"])]
        return len(alive) == 3 and state["crashes"] == before["crashes"] + 1

    await until(victim_crashed)
    await until(pool_full)
    after = await asyncio.to_thread(small_pool.debug_workers)
    assert pid not in {w["pid"] for w in after["workers"]}

    with pytest.raises(SubstrateError) as resumed:
        await sub.resume_actor(a, "victim")
    assert resumed.value.crashed and resumed.value.failure_class is FailureClass.REPLACE
    with pytest.raises(SubstrateError) as routed:
        await sub.request(a, "victim", "ping", json={})
    assert routed.value.crashed and routed.value.from_router

    assert (await sub.get_actor(a, "running")).status == "RUNNING"
    assert await digest(sub, a, "running") == running_before
    assert await digest(sub, a, "parked") == parked_before
    await sub.delete_actor(a, "victim")


async def test_park_times_out_when_no_worker_frees(sub: HttpSubstrate) -> None:
    a = "park"
    await sub.ensure_atespace(a)
    holders = [f"h{i}" for i in range(3)]
    for name in [*holders, "late"]:
        await sub.create_actor(a, name, *GLUTTON)
    for name in holders:
        await sub.resume_actor(a, name)

    with pytest.raises(SubstrateError) as parked:
        await sub.request(a, "late", "ping", json={"message": "hi"})
    err = parked.value
    assert (err.code, err.status, err.from_router) == ("RESOURCE_EXHAUSTED", 503, True)
    assert err.failure_class is FailureClass.RETRY_LATER
    assert "within the park timeout of 1.5s" in err.message
    with pytest.raises(SubstrateError) as control:
        await sub.resume_actor(a, "late")
    assert (control.value.code, control.value.status) == ("RESOURCE_EXHAUSTED", 429)
    assert (await sub.get_actor(a, "late")).status == "SUSPENDED"


async def test_a_parked_request_completes_once_a_worker_frees(
    client: HttpSubstrate, atespace: str
) -> None:
    """On the shared substrate (a 30 s park timeout), so the request is still parked when a
    worker frees, on any machine."""
    holders = [f"h{i}" for i in range(SHARED_WORKERS)]
    for name in [*holders, "late"]:
        await client.create_actor(atespace, name, *GLUTTON)
    for name in holders:
        await client.resume_actor(atespace, name)
    waiting = asyncio.create_task(client.request(atespace, "late", "ping", json={"message": "hi"}))

    async def parked() -> bool:  # RESUMING from the moment the wake waits for a worker
        return (await client.get_actor(atespace, "late")).status == "RESUMING"

    await until(parked)
    assert not waiting.done()
    await client.suspend_actor(atespace, "h0")
    answer = await waiting
    assert orjson.loads(answer.body) == {"message": "hi"}
    assert (await client.get_actor(atespace, "late")).status == "RUNNING"


def test_sigterm_stops_workers_and_keeps_the_store(tmp_path) -> None:
    store = tmp_path / "kept"
    proc = LocalSubstrateProcess(workers=2, store=store)
    proc.start()

    async def scenario() -> None:
        sub = HttpSubstrate(proc.url)
        await sub.ensure_atespace("keep")
        await sub.create_actor("keep", "k", *GLUTTON)
        await put_state(sub, "keep", "k")
        await sub.suspend_actor("keep", "k")
        await sub.aclose()

    asyncio.run(scenario())
    pids = [w["pid"] for w in proc.debug_workers()["workers"]]
    assert proc.stop() == 0
    assert not [p for p in pids if psutil.pid_exists(p)]
    snapshot = store / "snapshots" / "keep" / "k"
    assert (snapshot / "LATEST").is_file()
    latest = snapshot / (snapshot / "LATEST").read_text()
    assert (latest / "ram" / "m").stat().st_size == 300_000
    assert (latest / "files" / "f").stat().st_size == 200_000
    assert not [p for p in store.iterdir() if p.name.startswith(".runtime")]


def test_workers_exit_when_the_server_is_killed(tmp_path) -> None:
    proc = LocalSubstrateProcess(workers=2, store=tmp_path / "s")
    proc.start()
    pids = [w["pid"] for w in proc.debug_workers()["workers"]]
    proc.kill()  # SIGKILL: no cleanup runs in the server

    def gone(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    deadline = time.monotonic() + 60  # only a hang takes this long
    while not all(gone(p) for p in pids):
        assert time.monotonic() < deadline, "workers outlived their server"
        time.sleep(0.05)
    proc.stop()
