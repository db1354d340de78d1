"""Seeded payload bytes: determinism, exact sizes, and building off the event loop."""

from __future__ import annotations

import asyncio
import hashlib
import random
import threading

import pytest

from agentsession_core.engine import ops
from agentsession_core.engine.pacing import stream
from agentsession_core.script import Op, payload
from agentsession_core.substrate.interface import RouterResponse

MiB = 1 << 20


@pytest.mark.parametrize(
    "size", [0, 1, 4095, payload.INLINE_MAX, payload.INLINE_MAX + 1, MiB - 1, MiB, 3 * MiB + 7]
)
async def test_payload_has_exactly_the_size_asked_and_matches_its_chunks(size):
    seed = b"s" * payload.SEED_BYTES
    data = await payload.payload(seed, size)
    assert isinstance(data, bytes)
    assert len(data) == size
    assert data == payload.build(seed, size)
    assert data == b"".join(chunk for _, chunk in payload.random_chunks(seed, size))
    offsets = [offset for offset, _ in payload.random_chunks(seed, size)]
    assert offsets == list(range(0, size, payload.CHUNK))


def test_random_chunks_are_pinned_to_shake128():
    # A fixed value: the bytes for a given seed must not change between releases.
    seed = bytes(range(16))
    [(offset, chunk)] = list(payload.random_chunks(seed, 32))
    assert offset == 0
    assert chunk == hashlib.shake_128(seed + (0).to_bytes(8, "little")).digest(32)


def test_same_seed_same_bytes_other_seed_other_bytes():
    a = payload.build(b"a" * 16, 2 * MiB + 3)
    assert a == payload.build(b"a" * 16, 2 * MiB + 3)
    b = payload.build(b"b" * 16, 2 * MiB + 3)
    assert a != b
    # A longer payload of the same seed extends the shorter one (chunks depend on the index).
    assert payload.build(b"a" * 16, 3 * MiB)[: len(a)] == a


class _Recording:
    """A substrate that only keeps the bodies it is sent."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def request(
        self, atespace, actor, route, *, body=None, json=None, params=None, timeout=None
    ) -> RouterResponse:
        assert route == "ingest" and json is None and params == {"key": "blob"}
        self.bodies.append(body)
        return RouterResponse(status=200, body=b"{}", content_type="application/json")


async def _ingest_bodies(seed: int, session: int, size: int, times: int) -> list[bytes]:
    substrate = _Recording()
    rng = stream(seed, "session", session, "payload")
    op = Op(kind="ingest", key="blob", size=size)
    for _ in range(times):
        await ops.perform(substrate, "space", "actor", op, rng, timeout=5.0)
    return substrate.bodies


async def test_ingest_bodies_follow_the_session_stream():
    first = await _ingest_bodies(7, 1, 300_000, times=2)
    assert [len(body) for body in first] == [300_000, 300_000]
    assert first[0] != first[1]  # each op draws a fresh seed
    assert await _ingest_bodies(7, 1, 300_000, times=2) == first  # same run seed, same bytes
    assert (await _ingest_bodies(7, 2, 300_000, times=1))[0] != first[0]  # other session
    assert (await _ingest_bodies(8, 1, 300_000, times=1))[0] != first[0]  # other run seed


async def test_building_a_large_payload_leaves_the_loop_running(monkeypatch):
    # Offloading check, not a benchmark: the build waits, mid-way, until the loop has run a
    # callback. Built off the loop, the loop runs it at once; built on the loop, nothing could
    # run it, and the build would give up waiting: that is a failure, on any machine.
    loop = asyncio.get_running_loop()
    loop_ran = threading.Event()
    real_build = payload.build

    def build_once_the_loop_runs(seed: bytes, size: int) -> bytes:
        loop.call_soon_threadsafe(loop_ran.set)
        assert loop_ran.wait(60), "the loop did not run while the payload was being built"
        return real_build(seed, size)

    monkeypatch.setattr(payload, "build", build_once_the_loop_runs)
    seed = random.Random(3).randbytes(16)
    data = await payload.payload(seed, 32 * MiB)
    assert loop_ran.is_set() and data == real_build(seed, 32 * MiB)
