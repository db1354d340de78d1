"""Many actors per worker process on the local substrate (docs/SPEC.md §2.7), over real
processes: four actors in one worker process (one pid, its resident memory growing with each
actor's filled bytes, each actor's bytes its own), a fifth refused for want of a slot and a
larger one for want of memory after the park timeout (RESOURCE_EXHAUSTED, naming which), a
wake short of memory served by the park beside it, the capacity and allocation on the JSON
wire (HttpSubstrate.list_workers), a drained worker taking no new placements, and a worker
killed with SIGKILL taking every actor it held down with it (each CRASHED)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.protocol import WORKERS_PATH
from local_substrate.launcher import LocalSubstrateProcess

pytestmark = pytest.mark.slow

MI = 1 << 20
FILL = 32 * MI  # each actor's RAM array
TEMPLATES = {"t/small": "64Mi", "t/big": "128Mi"}
T = TypeVar("T")


def rss(pid: int) -> int:
    """The process's resident memory, from /proc/PID/status (VmRSS, in KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


async def until(
    read: Callable[[], Awaitable[T]], holds: Callable[[T], bool], cap: float = 60.0
) -> None:
    """Poll `read()` until what it gives `holds`; the cap only catches a hang."""
    deadline = time.monotonic() + cap
    while not holds(seen := await read()):
        assert time.monotonic() < deadline, seen
        await asyncio.sleep(0.02)


async def fill(client: HttpSubstrate, actor: str) -> str:
    await client.create_actor("many", actor, "t", "small")
    await client.request(
        "many", actor, "writeram", json={"key": "k", "size": FILL, "mode": "truncate"}
    )
    answer = await client.request("many", actor, "readram", json={"key": "k", "digest": True})
    return str(answer.result["sha256"])


async def test_four_actors_in_one_worker_process(tmp_path: Path) -> None:
    with LocalSubstrateProcess(
        workers=1,
        worker_capacity=4,
        worker_memory="288Mi",  # four 64Mi reservations and half of a fifth
        templates=TEMPLATES,
        park_timeout=1.0,
        log_path=tmp_path / "substrate.log",
    ) as sub:
        client = HttpSubstrate(sub.url)
        try:
            await client.ensure_atespace("many")
            (worker,) = sub.debug_workers()["workers"]
            pid = worker["pid"]
            before = rss(pid)
            sums: dict[str, str] = {}
            grown = []
            for i in range(4):
                sums[f"a{i}"] = await fill(client, f"a{i}")
                grown.append(rss(pid) - before)
            # One process holds them all, and its memory grew by each actor's bytes.
            assert {a.worker for a in await client.list_actors("many")} == {worker["name"]}
            assert [w["pid"] for w in sub.debug_workers()["workers"]] == [pid]
            for i, delta in enumerate(grown):
                assert delta >= (i + 1) * FILL * 0.9, (i, delta >> 20)
            assert len(set(sums.values())) == 4  # each actor's bytes are its own

            (listed,) = await client.list_workers()
            assert (listed.name, listed.capacity, listed.allocated) == (worker["name"], 4, 4)
            assert listed.actors == tuple(f"many/a{i}" for i in range(4))
            assert listed.memory_limit_bytes == 288 * MI
            assert listed.memory_used_bytes == 4 * 64 * MI  # four reservations
            async with httpx.AsyncClient(base_url=sub.url, timeout=10) as raw:
                (wire,) = (await raw.get(WORKERS_PATH)).json()["workers"]
            assert wire["memory_used_bytes"] == 4 * 64 * MI and wire["state"] == "active"

            # A fifth: no slot frees up within the park timeout.
            await client.create_actor("many", "a4", "t", "small")
            with pytest.raises(SubstrateError) as no_slot:
                await client.resume_actor("many", "a4")
            assert no_slot.value.code == "RESOURCE_EXHAUSTED", no_slot.value
            assert "4 slots, all busy" in no_slot.value.message
            assert "within the park timeout" in no_slot.value.message

            # A slot free, but not the memory for a 128Mi actor: it waits for the memory as
            # for a slot (issue 38), and nothing frees any within the park timeout.
            await client.suspend_actor("many", "a0")
            await client.create_actor("many", "big", "t", "big")
            with pytest.raises(SubstrateError) as no_memory:
                await client.resume_actor("many", "big")
            assert no_memory.value.code == "RESOURCE_EXHAUSTED"
            assert no_memory.value.message.startswith(
                "no worker has memory for actor many/big (it reserves 134217728 bytes"
            ), no_memory.value.message
            assert no_memory.value.message.endswith("within the park timeout of 1.0s")
            await client.resume_actor("many", "a4")  # 3 x 64Mi + 64Mi fits in 288Mi
            (listed,) = await client.list_workers()
            assert listed.allocated == 4 and "many/a0" not in listed.actors

            # Every actor's state came through: the suspended one from the store too.
            for name in ("a1", "a2", "a3", "a0"):
                answer = await client.request(
                    "many", name, "readram", json={"key": "k", "digest": True}
                )
                assert answer.result["sha256"] == sums[name], name
                if name == "a1":
                    await client.suspend_actor("many", "a1")  # a slot for a0
        finally:
            await client.aclose()


async def test_a_wake_short_of_memory_waits_for_the_park_beside_it(tmp_path: Path) -> None:
    """Issue 38: a turnover swap at the memory's frontier wakes one actor while another
    parks. The wake waits for the memory as for a slot and runs once the park frees it;
    refused at once, such wakes held a density search at 4 of the 6 residents the memory
    predicts. The park timeout is far beyond any wait here: the order is what is tested."""
    with LocalSubstrateProcess(
        workers=1,
        worker_capacity=4,
        worker_memory="192Mi",  # three 64Mi reservations, and a slot to spare
        templates=TEMPLATES,
        park_timeout=300.0,
        log_path=tmp_path / "substrate.log",
    ) as sub:
        client = HttpSubstrate(sub.url)
        try:
            await client.ensure_atespace("many")
            for name in ("a0", "a1", "a2", "a3"):
                await client.create_actor("many", name, "t", "small")
            for name in ("a0", "a1", "a2"):
                await client.resume_actor("many", name)
            waking = asyncio.create_task(client.resume_actor("many", "a3"))

            async def queued() -> str:
                async with httpx.AsyncClient(base_url=sub.url, timeout=10) as raw:
                    return (await raw.get("/metrics")).text

            # Parked in the substrate's wake queue, not refused: a slot is free, the memory
            # is not.
            await until(queued, lambda text: "agentsession_substrate_wake_queue 1" in text)
            assert not waking.done()
            (listed,) = await client.list_workers()
            assert listed.allocated == 3 and "many/a3" not in listed.actors
            await client.suspend_actor("many", "a0")  # the park beside the wake
            woken = await asyncio.wait_for(waking, 120)
            assert woken.status == "RUNNING"
            (listed,) = await client.list_workers()
            assert listed.actors == ("many/a1", "many/a2", "many/a3")
            assert listed.memory_used_bytes == 3 * 64 * MI
        finally:
            await client.aclose()


async def test_a_killed_worker_crashes_every_actor_it_held(tmp_path: Path) -> None:
    with LocalSubstrateProcess(
        workers=1, worker_capacity=3, templates=TEMPLATES, log_path=tmp_path / "substrate.log"
    ) as sub:
        client = HttpSubstrate(sub.url)
        try:
            await client.ensure_atespace("many")
            for name in ("r0", "r1", "p"):
                await fill(client, name)
            await client.pause_actor("many", "p")  # its state stays in the worker, its slot free
            await fill(client, "s")
            await client.suspend_actor("many", "s")  # its state is in the store
            (listed,) = await client.list_workers()
            assert listed.allocated == 2 and len(listed.actors) == 3
            (worker,) = sub.debug_workers()["workers"]
            os.kill(worker["pid"], signal.SIGKILL)

            async def states() -> dict[str, str]:
                return {a.name: a.status for a in await client.list_actors("many")}

            await until(lambda: states(), lambda seen: seen["r0"] == "CRASHED")
            assert await states() == {
                "r0": "CRASHED",
                "r1": "CRASHED",
                "p": "CRASHED",
                "s": "SUSPENDED",
            }
            for name in ("r0", "r1", "p"):
                with pytest.raises(SubstrateError) as crashed:
                    await client.resume_actor("many", name)
                assert crashed.value.code == "ABORTED" and "crashed" in crashed.value.message
            # The replacement holds nothing yet, and takes the suspended actor back.
            await until(
                lambda: asyncio.to_thread(sub.debug_workers),
                lambda seen: (
                    seen["workers"][0]["pid"] != worker["pid"] and seen["workers"][0]["alive"]
                ),
            )
            await client.resume_actor("many", "s")
            (listed,) = await client.list_workers()
            assert listed.name != worker["name"] and listed.actors == ("many/s",)
            assert sub.debug_workers()["crashes"] == 1
        finally:
            await client.aclose()


async def test_placement_spreads_and_a_drained_worker_takes_none(tmp_path: Path) -> None:
    with LocalSubstrateProcess(
        workers=2,
        worker_capacity=3,
        templates=TEMPLATES,
        park_timeout=1.0,
        log_path=tmp_path / "substrate.log",
    ) as sub:
        client = HttpSubstrate(sub.url)
        try:
            await client.ensure_atespace("many")
            for name in ("x", "y"):
                await client.create_actor("many", name, "t", "small")
                await client.resume_actor("many", name)
            # By free capacity: the second goes to the emptier worker.
            assert sorted(w.allocated for w in await client.list_workers()) == [1, 1]
            host = (await client.get_actor("many", "x")).worker
            assert host is not None
            drained = await client.drain_worker(host)
            assert (drained.name, drained.state) == (host, "draining")
            for name in ("z1", "z2"):  # both go to the other worker, though x's has a slot
                await client.create_actor("many", name, "t", "small")
                await client.resume_actor("many", name)
                assert (await client.get_actor("many", name)).worker != host
            by_name = {w.name: w for w in await client.list_workers()}
            assert by_name[host].state == "draining" and by_name[host].actors == ("many/x",)
            with pytest.raises(SubstrateError) as unknown:
                await client.drain_worker("w99")
            assert unknown.value.code == "NOT_FOUND"
        finally:
            await client.aclose()
