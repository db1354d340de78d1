"""Coordinated omission, shown on the local substrate: when the substrate is slow, a
session falls behind its Poisson schedule; latency measured from the intended time grows
with that backlog while the service time of the very same requests does not."""

from __future__ import annotations

from pathlib import Path

from agentsession_core.engine.engine import Engine
from agentsession_core.engine.params import RunParams
from agentsession_core.measure.recorder import Recorder
from agentsession_core.script import load_script
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.local.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN

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
    substrate: LocalSubstrateProcess, client: HttpSubstrate, atespace: str, tmp_path: Path
) -> None:
    script_path = tmp_path / "slow.yaml"
    script_path.write_text(SLOW_SCRIPT)
    params = RunParams(
        target={"substrate": substrate.url, "token": TOKEN},
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
    early = rec.window(start, start + 3 * NS).row("http", "WakeFirstTouch")
    late = rec.window(end - 3 * NS, end).row("http", "WakeFirstTouch")
    assert early.count >= 2 and late.count >= 2, (early.count, late.count)
    assert early.failures == late.failures == 0

    # From the intended time: the backlog shows and grows.
    assert late.response.quantile(0.5) > early.response.quantile(0.5) + 1000.0
    assert late.response.quantile(0.5) > 2000.0
    # From the send: the probe is as quick late as early (it never waited in the substrate).
    assert late.service.quantile(0.5) < 300.0
    assert late.service.quantile(0.99) < late.response.quantile(0.5) / 4
    # The difference is start lag, the time the session was behind its schedule.
    assert late.start_lag.quantile(0.5) > 2000.0 - late.service.quantile(0.5)

    # The slow step itself: its service time is the substrate's 900 ms every time.
    slow = rec.totals().row("http", "Step_02_slow")
    assert slow.count >= 3
    assert slow.service.quantile(0.5) >= 850.0
