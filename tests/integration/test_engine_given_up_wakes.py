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
import time
from pathlib import Path

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import TurnoverPopulation
from agentsession_core.run.run import Run
from agentsession_core.substrate.interface import Substrate
from local_substrate.launcher import LocalSubstrate
from tests.integration.conftest import ate_client, ate_target

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SESSIONS, AWAKE, RATE = 16, 3, 2.0
SPARE = 10  # workers beyond `awake`: room for what given-up wakes would leave running
HOLD_S = 8.0
# Every wake of the hold is restored RESTORE_S after it was asked for; the client gives up on
# it at GIVE_UP_S (long enough for any wake before the fault, on a loaded machine too).
GIVE_UP_S, RESTORE_S = 2.0, 4.0
SETTLING = ("RESUMING", "SUSPENDING")


async def settled(client: Substrate, atespace: str) -> list[str]:
    """The run's actors' states once none is RESUMING or SUSPENDING (a minute at most)."""
    deadline = time.monotonic() + 60
    while True:
        now = [a.status for a in await client.list_actors(atespace)]
        if not any(status in SETTLING for status in now):
            return now
        assert time.monotonic() < deadline, now
        await asyncio.sleep(0.2)


async def test_a_wake_the_client_gave_up_on_does_not_keep_its_actor_running(
    tmp_path: Path,
) -> None:
    atespace = "given-up"
    async with LocalSubstrate(workers=AWAKE + SPARE, store=tmp_path / "store") as local:
        params = RunParams(
            target=ate_target(local, atespace=atespace, request_timeout_seconds=GIVE_UP_S),
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
            # Long enough for every wake and park under way to end: nothing is cut off.
            cleanup={"stop_grace_seconds": 3 * RESTORE_S},
        )
        client = ate_client(local, control_timeout=5)
        try:
            run = Run(params, handle_signals=False)
            async with run:
                await run.preflight()
                await run.register()
                await run.fill()
                # From now on the client gives up on every wake, and the substrate finishes the
                # restore all the same.
                await local.set_faults([f"wake:latency:fixed:{RESTORE_S:g}s"])
                await run.hold(HOLD_S)
                assert run.load.engine is not None
                population = run.load.engine.population
                assert isinstance(population, TurnoverPopulation)
                # The wakes still under way: once the load stops, a given-up one is not
                # parked (the stop guard), and its actor runs when its restore lands.
                under_way = len(population.waking)
                await run.load.engine.stop()  # no new wake: what runs now only settles
                residents = run.load.residents()
                # Until every restore the client gave up on has landed, and every park the
                # engine sent for it has ended (they wait for the restore, in order).
                now = await settled(client, atespace)
                await local.set_faults([])
                run.finish("completed")
        finally:
            await client.aclose()
    assert run.result is not None and residents is not None
    rows = {}
    for line in (run.result.run_dir / "stats.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[row["metric"]] = row["measurements"]
    wakes = rows["rps_TimeToWake"]
    assert wakes["failure_count"] >= HOLD_S, wakes  # the swaps' wakes timed out
    # Each given-up wake's actor was parked: once all settled the substrate runs the resident
    # set and the wakes the stop found under way, no more. Without the park every given-up
    # wake's actor would still run, up to every worker (AWAKE + SPARE).
    running = now.count("RUNNING")
    assert running <= residents + under_way, (running, residents, under_way, now)
    parks = rows["grpc_SuspendActor"]["request_count"]
    assert parks >= wakes["failure_count"] - under_way, rows
