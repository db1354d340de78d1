"""The Run's seams: it drives any Substrate it is given (and leaves closing it to the
caller), and the population's own gauges and summary rows reach the artifacts without the
Run knowing which population it runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agentsession_core.engine.context import RunContext
from agentsession_core.engine.ledger import ActorLedger
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.closed import ClosedPopulation
from agentsession_core.measure.recorder import Recorder
from agentsession_core.run.run import Run
from agentsession_core.script import load_script
from tests.unit.test_session import MemorySubstrate


class ClosingSubstrate(MemorySubstrate):
    closed = False

    async def aclose(self) -> None:
        self.closed = True


def _stepped_and_sampled(run: Run) -> str | None:
    """A hold's end once a step succeeded and two seconds have closed with the gauges
    sampled (counts: a slow machine takes longer, never fewer)."""
    totals = run.recorder.totals()
    stepped = any(
        kind == "http" and name.startswith("Step_") and row.count > row.failures
        for (kind, name), row in totals.rows.items()
    )
    sampled = [{name for name, _ in snapshot} for snapshot in run.recorder.gauges.values()]
    gauged = [names for names in sampled if {"sessions", "turnover_sessions"} <= names]
    return "enough" if stepped and len(gauged) >= 2 else None


async def _drive(run: Run) -> None:
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(60, should_stop=lambda: _stepped_and_sampled(run))
        assert reason == "enough", reason
        run.finish("completed")


def small_turnover(out: Path) -> RunParams:
    """A turnover of four sessions, two awake: a whole run in a few seconds."""
    return RunParams(
        script="smoke",
        think_scale=0.2,
        out=str(out),
        population={
            "kind": "turnover",
            "sessions": 4,
            "awake": 2,
            "target_rps": 2,
            "registration_quiet_seconds": 0,
            "spawn_rate": 100,
        },
        cleanup={"stop_grace_seconds": 1},
    )


def test_a_run_drives_the_substrate_it_is_given(tmp_path: Path) -> None:
    substrate = ClosingSubstrate()
    params = small_turnover(tmp_path)
    run = Run(params, substrate=substrate, handle_signals=False)
    asyncio.run(_drive(run))
    assert run.result is not None and run.result.status == "completed", run.result
    created = {actor for call, actor in substrate.calls if call == "create"}
    assert len(created) == 4 and set(substrate.deleted) == created  # cleaned up
    assert not substrate.closed  # the caller's to close
    run_dir = run.result.run_dir
    assert not (run_dir / "substrate.log").exists()  # no local substrate was started
    rows = [json.loads(line) for line in (run_dir / "stats.jsonl").read_text().splitlines()]
    assert any(row["metric"] == "turnover_window" for row in rows)
    gauges = {
        json.loads(line)["name"] for line in (run_dir / "gauges.jsonl").read_text().splitlines()
    }
    assert {"sessions", "turnover_sessions"} <= gauges


def test_a_population_has_no_extra_gauges_or_rows_by_default() -> None:
    params = RunParams(script="smoke")
    ctx = RunContext(
        MemorySubstrate(), Recorder(), load_script("smoke"), params, "a", ActorLedger("a")
    )
    population = ClosedPopulation(ctx)
    assert population.gauges() == {} and population.summary_rows(ctx.recorder) == {}
