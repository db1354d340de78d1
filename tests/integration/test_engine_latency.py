"""Coordinated omission, shown on the local substrate: when the substrate is slow, a
session falls behind its Poisson schedule. The time its arrivals wait, measured from their
intended times, grows with that backlog and is booked (turns/QueueWait, docs/SPEC.md §4.3),
never omitted; the wake itself is measured from when the turn could start, so the queue does
not pass for wake latency, and the service time of the very same requests does not grow."""

from __future__ import annotations

from pathlib import Path

from agentsession_core.engine.engine import Engine
from agentsession_core.engine.params import RunParams
from agentsession_core.measure.recorder import Recorder
from agentsession_core.script import load_script
from agentsession_core.substrate.interface import Substrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_target

# Every other turn the actor computes for 900 ms; turns arrive 4 per second, so the
# session owes more work than it can do and its backlog grows all through the hold.
SLOW_SCRIPT = """\
name: slow-every-other-turn
min_actor_memory: 1Mi
steps:
  - name: 01_quick
    agent: answers at once
    think: 1ms
    ops:
      - ping: {}
  - name: 02_slow
    agent: the substrate takes its time
    think: 1ms
    ops:
      - burn_cpu: {millis: 900, parallel: 1}
"""
NS = 1_000_000_000


async def test_latency_from_intended_grows_while_service_time_does_not(
    substrate: LocalSubstrateProcess, client: Substrate, atespace: str, tmp_path: Path
) -> None:
    script_path = tmp_path / "slow.yaml"
    script_path.write_text(SLOW_SCRIPT)
    params = RunParams(
        target=ate_target(substrate, token=TOKEN),
        script=str(script_path),
        population={
            "kind": "turns",
            "sessions": 1,
            "turns_per_hour": 4 * 3600,
            "turn_mean_seconds": 0.01,
            "registration_quiet_seconds": 0.0,
        },
        seed=3,
        cleanup={"stop_grace_seconds": 3.0},
    )
    engine = Engine(params, client, load_script(params.script), Recorder(), atespace=atespace)
    try:
        await engine.preflight()
        await engine.register()
        await engine.fill()
        start, end, _ = await engine.hold(8.0)
    finally:
        assert await engine.cleanup() == []
    rec = engine.recorder
    early = rec.window(start, start + 3 * NS).row("turns", "QueueWait")
    late = rec.window(end - 3 * NS, end).row("turns", "QueueWait")
    assert early.count >= 2 and late.count >= 2, (early.count, late.count)

    # From the arrival's intended time: the backlog shows and grows.
    assert late.response.quantile(0.5) > early.response.quantile(0.5) + 1000.0
    assert late.response.quantile(0.5) > 2000.0
    # The wake, from when its turn could start: the queue is not in it. Were it measured from
    # the arrival's intended time it would hold the queue's wait and more (its median at least
    # the queue's); it holds less than half of it, however slow the machine (a slower machine
    # burns the 900 ms turns no faster and only grows the queue).
    wakes = rec.window(end - 3 * NS, end).row("http", "WakeFirstTouch")
    assert wakes.count >= 2 and wakes.failures == 0
    assert wakes.response.quantile(0.5) < late.response.quantile(0.5) / 2
    # Every arrival is booked as due at its intended time, started or not: the schedule is
    # not thinned by the backlog.
    started = rec.totals().row("turns", "QueueWait").count
    assert rec.totals().row("turns", "Arrivals").events > started + 2

    # The slow step itself: its service time is the substrate's 900 ms every time.
    slow = rec.totals().row("http", "Step_02_slow")
    assert slow.count >= 3
    assert slow.service.quantile(0.5) >= 850.0
