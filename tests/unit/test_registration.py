"""Registration (docs/SPEC.md §3.2, §4.2) against the in-memory FakeSubstrate: its deadline
(a CreateActor quota ends the run in one line, every created actor deleted), the count
across tasks, and the registration rule for closed in lifecycle none (step 1 as soon as the
actor serves)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.engine.engine import Engine
from agentsession_core.engine.params import RunParams
from agentsession_core.measure.recorder import Recorder
from agentsession_core.run.run import Run
from agentsession_core.script import load_script
from agentsession_core.substrate.fake import FakeSubstrate
from agentsession_core.substrate.interface import ActorInfo

ATESPACE = "unit"


def params_for(tmp_path: Path, **population: Any) -> RunParams:
    return RunParams(
        script="smoke",
        seed=7,
        out=str(tmp_path),
        target={"atespace": ATESPACE},
        population={"registration_quiet_seconds": 0, "spawn_rate": 1000, **population},
        cleanup={"stop_grace_seconds": 1},
    )


async def register_only(run: Run) -> None:
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        run.finish()


@pytest.mark.parametrize("kind", ["turnover", "turns", "closed"])
def test_a_quota_below_sessions_ends_registration_at_its_deadline_in_one_line(
    tmp_path: Path, kind: str
) -> None:
    substrate = FakeSubstrate(max_actors=7)
    awake = {"awake": 2} if kind == "turnover" else {}
    params = params_for(
        tmp_path, kind=kind, sessions=12, registration_deadline_seconds=0.5, **awake
    )
    run = Run(params, substrate=substrate, handle_signals=False)
    asyncio.run(register_only(run))
    assert run.result is not None
    expected = (
        "registration: 7 of 12 sessions registered before the 0.5 s deadline: "
        "CreateActor RESOURCE_EXHAUSTED (quota of 7 actors reached)"
    )
    assert (run.result.status, run.result.reason) == ("failed", expected)
    logs = (run.result.run_dir / "logs.txt").read_text().splitlines()
    said = [line for line in logs if "registration:" in line]
    assert len(said) == 1 and said[0].endswith(expected), said
    # Every actor it created is deleted.
    assert asyncio.run(substrate.list_actors(ATESPACE)) == []
    status = json.loads((run.result.run_dir / "status.json").read_text())
    assert (status["actors_created"], status["actors_deleted"]) == (7, 7)
    assert status["leaked_actors"] == []


def test_the_registration_deadline_defaults_to_twice_the_ramp_plus_a_minute() -> None:
    population = RunParams(population={"sessions": 1000, "spawn_rate": 10}).population
    assert population.registration_deadline() == 1000 / 10 * 2 + 60
    assert population.registration_deadline(50) == 50 / 10 * 2 + 60
    population = RunParams(population={"registration_deadline_seconds": "30s"}).population
    assert population.registration_deadline() == 30.0


class SlowCreates(FakeSubstrate):
    """CreateActor answers after a seeded few milliseconds, so registrations interleave."""

    def __init__(self) -> None:
        super().__init__()
        self.delays = random.Random(5)

    async def create_actor(self, atespace: str, name: str, tns: str, tname: str) -> ActorInfo:
        await asyncio.sleep(self.delays.uniform(0, 0.02))
        return await super().create_actor(atespace, name, tns, tname)


async def test_the_registration_count_loses_no_update_across_tasks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="agentsession")
    params = params_for(Path("."), kind="turns", sessions=12)
    engine = Engine(params, SlowCreates(), load_script("smoke"), Recorder(), atespace=ATESPACE)
    await engine.preflight()
    await engine.register()
    assert await engine.cleanup() == []
    assert "registration: 12 of 12 sessions registered" in caplog.messages


async def test_closed_in_lifecycle_none_runs_step_one_as_soon_as_the_actor_serves() -> None:
    # personal-assistant-light thinks 55 minutes before step 1: without the registration
    # rule the hold would measure empty sandboxes for 55 minutes.
    params = RunParams(
        script="personal-assistant-light",
        population={"kind": "closed", "sessions": 3, "lifecycle_mode": "none", "spawn_rate": 100},
        cleanup={"stop_grace_seconds": 1},
    )
    script = load_script(params.script)
    engine = Engine(params, FakeSubstrate(), script, Recorder(), atespace=ATESPACE)
    await engine.preflight()
    await engine.register()  # ends when every session started, step 1 included
    first = engine.recorder.totals().row("http", f"Step_{script.steps[0].name}")
    assert (first.count, first.failures) == (3, 0)
    assert all(s.cursor == 1 for s in engine.population.sessions)
    assert engine.recorder.totals().row("http", "WakeFirstTouch").count == 0
    assert await engine.cleanup() == []


async def test_closed_in_a_parking_mode_still_starts_from_a_parked_actor() -> None:
    params = RunParams(
        script="smoke",
        think_scale=1000.0,  # no think ends during the test
        population={"kind": "closed", "sessions": 2, "spawn_rate": 100},
        cleanup={"stop_grace_seconds": 1},
    )
    engine = Engine(params, FakeSubstrate(), load_script("smoke"), Recorder(), atespace=ATESPACE)
    await engine.preflight()
    await engine.register()
    assert engine.recorder.totals().row("http", "Step_01_start").count == 0
    assert engine.recorder.totals().row("grpc", "SuspendActor").count == 2
    assert await engine.cleanup() == []


class CountedCreates(FakeSubstrate):
    """Counts every CreateActor it is sent, and when."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[float] = []
        self.on_send: Callable[[int], None] = lambda sent: None  # told each one's number

    async def create_actor(self, *args: Any, **kwargs: Any) -> ActorInfo:
        self.sent.append(asyncio.get_running_loop().time())
        self.on_send(len(self.sent))
        return await super().create_actor(*args, **kwargs)


async def test_once_the_watchdog_failed_the_run_registration_sends_no_create(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """issue 29: a run the watchdog failed went on registering (CreateActor after CreateActor
    against a substrate it had just called unreachable)."""
    caplog.set_level("INFO", logger="agentsession")
    params = params_for(Path("."), kind="turnover", sessions=200, awake=0, spawn_rate=50)
    substrate = CountedCreates()
    engine = Engine(params, substrate, load_script("smoke"), Recorder(), atespace=ATESPACE)
    await engine.preflight()
    loop = asyncio.get_running_loop()
    failed_at: list[float] = []

    def fail() -> None:
        failed_at.append(loop.time())
        engine.watchdog_failed("substrate unreachable for 10s (5 probes in a row …)", True)

    # The watchdog fails the run as the fifth CreateActor goes out (a count, not a time).
    substrate.on_send = lambda sent: fail() if sent == 5 else None
    await asyncio.wait_for(engine.register(), 30)
    assert failed_at and len(substrate.sent) == 5
    assert not [t for t in substrate.sent if t > failed_at[0]], "a CreateActor after the failure"
    assert engine.unreachable is not None
    await engine.cleanup()
