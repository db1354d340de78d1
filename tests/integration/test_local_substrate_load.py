"""40 actors cycled (wake → ops → hibernate) 5 times each on the shared 4-worker pool,
all at once: every actor finds exactly the state it left, every cycle."""

from __future__ import annotations

import asyncio
import random

import orjson
import pytest

from agentsession_core.substrate.http import HttpSubstrate


@pytest.fixture
def client(json_client: HttpSubstrate) -> HttpSubstrate:
    """This module's subject is the JSON wire (its bodies are JSON): its client, whatever
    the integration fixtures speak by default (conftest.py: ate)."""
    return json_client


ACTORS = 40
CYCLES = 5
HIBERNATE = ("suspend", "suspend-async", "pause")


async def snapshot(client: HttpSubstrate, a: str, n: str) -> tuple[object, ...]:
    ram = await client.request(a, n, "readram", json={"key": "mem", "digest": True})
    disk = await client.request(a, n, "readdisk", json={"key": "file", "mode": "digest"})
    return orjson.loads(ram.body)["sha256"], orjson.loads(disk.body)


async def cycle_actor(client: HttpSubstrate, a: str, index: int) -> int:
    name = f"c{index:02d}"
    rng = random.Random(index)  # seeded: the same mix of modes every run
    await client.create_actor(a, name, "benchmark-workloads", "glutton")
    expected = None
    for lap in range(CYCLES):
        if rng.random() < 0.5:
            await client.resume_actor(a, name)  # explicit wake; otherwise the router wakes it
        if expected is not None:
            assert await snapshot(client, a, name) == expected, (name, lap)
        size = 16_384 + 4096 * rng.randrange(8)
        await client.request(
            a, name, "writeram", json={"key": "mem", "size": size, "mode": "overwrite"}
        )
        await client.request(
            a, name, "writeram", json={"key": "mem", "size": 5000, "mode": "overwrite_rotate"}
        )
        await client.request(
            a, name, "writedisk", json={"key": "file", "size": 8192 + lap, "mode": "truncate"}
        )
        expected = await snapshot(client, a, name)
        mode = rng.choice(HIBERNATE)
        if mode == "pause":
            await client.pause_actor(a, name)
        else:
            await client.suspend_actor(a, name, wait=mode == "suspend")
    assert await snapshot(client, a, name) == expected, (name, "final")
    await client.suspend_actor(a, name)
    return CYCLES


async def test_forty_actors_five_cycles_on_four_workers(
    client: HttpSubstrate, atespace: str
) -> None:
    laps = await asyncio.gather(*(cycle_actor(client, atespace, i) for i in range(ACTORS)))
    assert sum(laps) == ACTORS * CYCLES
    actors = await client.list_actors(atespace)
    assert len(actors) == ACTORS
    assert {a.status for a in actors} == {"SUSPENDED"}
