"""How each script op becomes a glutton request (docs/SPEC.md §1.2 → §2.3)."""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING

from agentsession_core.script import payload
from agentsession_core.substrate.interface import RouterResponse, Substrate

if TYPE_CHECKING:
    from agentsession_core.script import Op


def request_for(op: Op) -> tuple[str, dict | None]:
    """(route, JSON body) for every op that talks to the actor; ingest sends raw bytes."""
    kind = op.kind
    if kind == "ping":
        return "ping", {"message": "agentsession"}
    if kind == "fill_ram":
        return "writeram", {"key": op.key, "size": op.size, "mode": "overwrite"}
    if kind == "churn_ram":
        return "writeram", {"key": op.key, "size": op.size, "mode": "overwrite_rotate"}
    if kind == "walk_ram":
        return "readram", {"key": op.key}
    if kind == "write_disk":
        return "writedisk", {"key": op.key, "size": op.size, "mode": "truncate"}
    if kind == "read_disk_digest":
        return "readdisk", {"key": op.key, "mode": "digest"}
    if kind == "read_disk_data":
        return "readdisk", {"key": op.key, "mode": "data"}
    if kind == "burn_cpu":
        return "burncpu", {"millis": op.millis, "parallel": max(1, op.parallel or 1)}
    if kind == "ingest":
        return "ingest", None
    raise ValueError(f"op kind {kind!r} has no route")


async def perform(
    substrate: Substrate,
    atespace: str,
    actor: str,
    op: Op,
    payload_rng: random.Random,
    timeout: float,
) -> int:
    """Run one op against the actor; returns the response size in bytes (dwell: 0)."""
    if op.kind == "dwell":
        if op.millis is None:  # decode requires it; a hand-built Op might not have it
            raise ValueError("dwell op without millis")
        await asyncio.sleep(op.millis / 1000)
        return 0
    route, body = request_for(op)
    response: RouterResponse
    if op.kind == "ingest":
        if op.key is None or op.size is None:  # as for dwell: decode requires both
            raise ValueError("ingest op without key or size")
        # The seed comes from the session's seeded stream (same run seed, same bytes); the
        # bytes themselves are built off the loop: 32 MiB inline would stall it ≈100 ms.
        seed = payload_rng.randbytes(payload.SEED_BYTES)
        data = await payload.payload(seed, op.size)
        response = await substrate.request(
            atespace, actor, route, body=data, params={"key": op.key}, timeout=timeout
        )
    else:
        response = await substrate.request(atespace, actor, route, json=body, timeout=timeout)
    return len(response.body)
