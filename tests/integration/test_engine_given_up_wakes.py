"""A wake the client gave up on may still complete on the substrate (found by the ate-wire
fault soak, issue 18): a turnover whose wake probes timed out while the router went on
restoring their actors left each of them RUNNING, holding a worker that no resident counted,
until the session was next woken (minutes later at sessions / rate); eight such wakes filled
the spare workers and every later wake queued for one. Now such a session is parked at once
(docs/SPEC.md §4.2), and the substrate runs no more actors than the resident set and the
swaps in flight."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.run import Run
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SESSIONS, AWAKE, RATE = 16, 3, 2.0
SPARE = 10  # workers beyond `awake`: room for what given-up wakes would leave running
HOLD_S = 8.0


async def running(client: HttpSubstrate, atespace: str) -> int | None:
    try:
        return sum(a.status == "RUNNING" for a in await client.list_actors(atespace))
    except SubstrateError:
        return None


async def test_a_wake_the_client_gave_up_on_does_not_keep_its_actor_running(
    tmp_path: Path,
) -> None:
    atespace = "given-up"
    async with LocalSubstrate(workers=AWAKE + SPARE, store=tmp_path / "store") as local:
        params = RunParams(
            target={
                "substrate": local.url,
                "atespace": atespace,
                "request_timeout_seconds": 0.5,
            },
            script="smoke",
            population={
                "kind": "turnover",
                "sessions": SESSIONS,
                "awake": AWAKE,
                "target_rps": RATE,
                "registration_quiet_seconds": 1.0,
            },
            think_scale=0.05,
            seed=5,
            out=str(tmp_path / "out"),
            name="given-up",
        )
        client = HttpSubstrate(local.url, control_timeout=5)
        seen: list[int] = []
        try:
            run = Run(params)
            async with run:
                await run.preflight()
                await run.register()
                await run.fill()
                # Every wake from now on is restored 1.5 s after it was asked for: the client
                # gives up at 0.5 s, the substrate finishes the restore all the same.
                await local.set_faults(["wake:latency:fixed:1500ms"])
                hold = asyncio.create_task(run.hold(HOLD_S))
                while not hold.done():
                    count = await running(client, atespace)
                    if count is not None:
                        seen.append(count)
                    await asyncio.sleep(0.5)
                await hold
                await local.set_faults([])
                run.finish("completed")
        finally:
            await client.aclose()
    assert run.result is not None
    rows = {}
    for line in (run.result.run_dir / "stats.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[row["metric"]] = row["measurements"]
    wakes = rows["rps_TimeToWake"]
    assert wakes["failure_count"] >= HOLD_S, wakes  # the swaps' wakes timed out
    # Each given-up wake's actor was parked: the given-up wakes of the last second or two
    # may still be restoring or parking, the rest hold no worker. Without the park the
    # count climbs by RATE a second up to every worker (AWAKE + SPARE).
    assert seen and max(seen[len(seen) // 2 :]) <= AWAKE + 2 * RATE, seen
    assert rows["grpc_SuspendActor"]["request_count"] >= wakes["failure_count"] // 2, rows
