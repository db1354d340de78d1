"""The local substrate's limits and lifetime (docs/SPEC.md §2.4), with real processes: the
router's buffer caps, actors kept across a restart on the same store, worker ports that
answer only the router, and an embedded substrate that dies with the run that started it."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import orjson
import psutil
import pytest

from agentsession_core.substrate.ate import glutton_codec as gc
from agentsession_core.substrate.ate.control import ControlClient
from agentsession_core.substrate.errors import FailureClass, SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.protocol import (
    PROTOBUF_CONTENT_TYPE,
    TARGET_HEADER,
    WORKER_SECRET_ENV,
    WORKER_SECRET_HEADER,
)
from local_substrate.launcher import LocalSubstrateProcess

GLUTTON = ("benchmark-workloads", "glutton")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_router_buffers_are_capped_per_request_and_in_total(tmp_path: Path) -> None:
    # Per request: one op (1 MiB) plus 1 MiB of framing; in total: 2 MiB of bodies at once.
    with LocalSubstrateProcess(
        workers=2,
        park_timeout=1,
        extra_args=["--max-op-size", "1Mi", "--max-buffered", "2Mi"],
        log_path=tmp_path / "log",
    ) as proc:
        sub = HttpSubstrate(proc.url, router_timeout=10)
        await sub.ensure_atespace("buf")
        await sub.create_actor("buf", "a", *GLUTTON)
        with pytest.raises(SubstrateError) as big:
            await sub.request("buf", "a", "ingest", body=b"x" * (3 << 20), params={"key": "k"})
        assert (big.value.status, big.value.from_router) == (413, True)
        assert big.value.failure_class is FailureClass.MISCONFIGURED  # retrying cannot help
        async with httpx.AsyncClient(base_url=proc.url, timeout=10) as http:
            ate = await http.post(
                "/ingest",
                content=gc.ingest("k", b"x" * (3 << 20)),
                headers={TARGET_HEADER: "buf/a", "content-type": PROTOBUF_CONTENT_TYPE},
            )
        assert ate.status_code == 413 and "per-request cap" in ate.text

        # A slow upload declares 2 MiB and sends a little: it holds the whole budget.
        assert (await sub.get_actor("buf", "a")).status == "SUSPENDED"  # the 413s woke nothing
        port = int(proc.url.rsplit(":", 1)[1])
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(
            b"POST /ingest?key=slow HTTP/1.1\r\nHost: x\r\nate-target-actor: buf/a\r\n"
            b"Content-Type: application/octet-stream\r\nContent-Length: 2097152\r\n\r\n"
            + b"x"
            * 1000
        )
        # The router wakes the actor, then reserves the declared length, with no await in
        # between (router.py `_serve`, buffers.py `acquire`): once "a" shows RUNNING, the
        # reservation is held.
        deadline = time.monotonic() + 60  # only a hang takes this long
        while (await sub.get_actor("buf", "a")).status != "RUNNING":
            assert time.monotonic() < deadline, "the slow upload never reached the router"
            await asyncio.sleep(0.02)
        started = time.monotonic()
        with pytest.raises(SubstrateError) as full:
            await sub.request("buf", "a", "ping", json={"message": "hi"})
        assert (full.value.code, full.value.status, full.value.from_router) == (
            "RESOURCE_EXHAUSTED",
            503,
            True,
        )
        assert "buffer" in full.value.message and time.monotonic() - started >= 0.9
        slow.close()  # its bytes are released; the next body fits
        # A suspend waits for the actor's requests in flight: once it returns, the slow
        # upload's handler has ended and given its reservation back.
        await sub.suspend_actor("buf", "a")
        answer = await sub.request("buf", "a", "ping", json={"message": "hi"})
        assert orjson.loads(answer.body) == {"message": "hi"}
        await sub.aclose()


async def put_state(sub: HttpSubstrate, a: str, n: str, size: int) -> tuple[object, object]:
    await sub.request(a, n, "writeram", json={"key": "m", "size": size, "mode": "overwrite"})
    await sub.request(a, n, "writedisk", json={"key": "f", "size": size, "mode": "truncate"})
    return await digest(sub, a, n)


async def digest(sub: HttpSubstrate, a: str, n: str) -> tuple[object, object]:
    ram = await sub.request(a, n, "readram", json={"key": "m", "digest": True})
    disk = await sub.request(a, n, "readdisk", json={"key": "f", "mode": "digest"})
    return orjson.loads(ram.body), orjson.loads(disk.body)


def test_a_restart_on_the_same_store_keeps_the_actors(tmp_path: Path) -> None:
    store = tmp_path / "store"

    def serve() -> LocalSubstrateProcess:
        return LocalSubstrateProcess(workers=2, store=store, log_path=tmp_path / "log")

    async def first(url: str, grpc_url: str) -> dict[str, tuple[object, object]]:
        sub = HttpSubstrate(url)
        await sub.ensure_atespace("keep")
        states = {}
        for name in ("parked", "running", "paused"):
            await sub.create_actor("keep", name, *GLUTTON)
            states[name] = await put_state(sub, "keep", name, 100_000)
            if name == "parked":
                await sub.suspend_actor("keep", name)
        await sub.pause_actor("keep", "paused")
        control = ControlClient(grpc_url)
        await control.create_actor("keep", "fresh", *GLUTTON)  # over gRPC, never woken
        await control.aclose()
        await sub.aclose()
        return states

    with serve() as proc:
        states = asyncio.run(first(proc.url, proc.grpc_url))
    # What nobody owns is deleted at the next start: a stray actor dir, a dead runtime dir.
    (store / "snapshots" / "keep" / "stray" / "v000001").mkdir(parents=True)
    (store / ".runtime-999999" / "w0-0").mkdir(parents=True)

    async def second(url: str) -> None:
        sub = HttpSubstrate(url)
        actors = {a.name: a.status for a in await sub.list_actors("keep")}
        assert actors == dict.fromkeys(("fresh", "parked", "paused", "running"), "SUSPENDED")
        for name, state in states.items():
            assert await digest(sub, "keep", name) == state  # all state came back
            if name != "running":
                await sub.suspend_actor("keep", name)  # two workers: room for the next
        states["running"] = await put_state(sub, "keep", "running", 50_000)
        await sub.aclose()

    with serve() as proc:
        asyncio.run(second(proc.url))
        assert not (store / "snapshots" / "keep" / "stray").exists()
        assert not (store / ".runtime-999999").exists()
        proc.kill()  # SIGKILL: "running" is in a worker, its newest state dies with it

    async def third(url: str) -> None:
        sub = HttpSubstrate(url)
        actors = {a.name: a.status for a in await sub.list_actors("keep")}
        assert actors["running"] == "CRASHED" and actors["parked"] == "SUSPENDED"
        with pytest.raises(SubstrateError) as crashed:
            await sub.resume_actor("keep", "running")
        assert crashed.value.crashed  # replace it (§3.4), never a silently older snapshot
        assert await digest(sub, "keep", "parked") == states["parked"]
        await sub.delete_actor("keep", "running")
        await sub.aclose()

    with serve() as proc:
        asyncio.run(third(proc.url))
    assert not (store / "snapshots" / "keep" / "running").exists()


async def test_worker_ports_answer_only_with_the_pool_secret(tmp_path: Path) -> None:
    secret = "known-to-this-test"
    launcher = LocalSubstrateProcess(workers=1, log_path=tmp_path / "log")
    launcher.env[WORKER_SECRET_ENV] = secret
    with launcher as proc:
        sub = HttpSubstrate(proc.url)
        await sub.ensure_atespace("sec")
        await sub.create_actor("sec", "a", *GLUTTON)
        await sub.resume_actor("sec", "a")
        worker = proc.debug_workers()["workers"][0]
        base = f"http://127.0.0.1:{worker['port']}"
        proto = {"content-type": PROTOBUF_CONTENT_TYPE}
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            for answer in (
                await http.post("/ping", json={}),
                await http.post("/writeram", json={"key": "k", "size": 10, "mode": "overwrite"}),
                await http.get("/readyz"),
                await http.post("/_admin/state", json={}),
                await http.post("/_admin/drop", json={"actor": "sec/a"}),
                await http.post("/nosuchroute", json={}),
                await http.post("/ping", json={}, headers={WORKER_SECRET_HEADER: "guess"}),
            ):
                assert answer.status_code == 401
                assert answer.json()["error"]["code"] == "UNAUTHENTICATED"
            ate = await http.post("/ping", content=gc.ping(), headers=proto)
            assert ate.status_code == 401 and ate.headers["content-type"].startswith("text/")
            ok = await http.post(
                "/ping", json={"message": "m"}, headers={WORKER_SECRET_HEADER: secret}
            )
            assert ok.status_code == 200
        # The router forwards with the secret, so it must not forward to the admin routes.
        async with httpx.AsyncClient(base_url=proc.url, timeout=10) as http:
            admin = await http.post("/_admin/drop", json={}, headers={TARGET_HEADER: "sec/a"})
        assert admin.status_code == 404
        assert (await sub.get_actor("sec", "a")).status == "RUNNING"
        assert orjson.loads((await sub.request("sec", "a", "ping", json={})).body) == {
            "message": ""
        }
        await sub.aclose()


def test_kill_9_of_agentsession_run_leaves_nothing_behind(tmp_path: Path) -> None:
    run = subprocess.Popen(
        [
            *(sys.executable, "-m", "agentsession_core", "run", "--script", "smoke"),
            *("--population", "closed", "--sessions", "2", "--hold", "120s", "--seed", "3"),
            *("--think-scale", "0.05", "--local-workers", "2", "--out", str(tmp_path / "out")),
            *("--progress", "plain"),
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    holding = threading.Event()
    seen: list[str] = []

    def read() -> None:
        assert run.stderr is not None
        for line in run.stderr:
            seen.append(line)
            if "progress: hold" in line:
                holding.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert holding.wait(60), f"the run never reached its hold: {''.join(seen)[-2000:]}"
        family = psutil.Process(run.pid).children(recursive=True)
        substrate = next(p for p in family if "local_substrate" in p.cmdline())
        store = Path(re.search(r"--store (\S+)", " ".join(substrate.cmdline()))[1])
        workers = substrate.children()
        assert len(workers) == 2 and store.is_dir()
        assert any(store.glob("snapshots/*/*/actor.json"))  # the run's actors are there
    finally:
        os.kill(run.pid, 9)
        run.wait()
    deadline = time.monotonic() + 60  # only a hang takes this long
    while any(not gone(p.pid) for p in family) or store.exists():
        left = [p.pid for p in family if not gone(p.pid)]
        assert time.monotonic() < deadline, f"left behind: pids {left}, store {store.exists()}"
        time.sleep(0.1)
