"""Runs over the ate wire against the embedded local substrate (`target.protocol: ate` and no
URL): open_substrate starts the local substrate and drives it through AteSubstrate, the gRPC
ateapi.Control endpoint and the router's protobuf bodies, with real worker processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.run import Run
from agentsession_core.measure.stats import CONTROL_KIND, ROUTER_KIND
from agentsession_core.substrate.ate.substrate import AteSubstrate
from agentsession_core.substrate.errors import SubstrateError


def params(tmp_path: Path, **population: Any) -> RunParams:
    return RunParams(
        out=str(tmp_path),
        script="smoke",
        think_scale=0.05,
        target={"protocol": "ate", "local_workers": 3, "token": "embedded-token"},
        population={"sessions": 2, "spawn_rate": 50.0, **population},
        cleanup={"stop_grace_seconds": 5.0},
    )


async def run_for(run: Run, seconds: float) -> None:
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(seconds)
        run.finish("completed" if reason is None else "failed", reason)


@pytest.mark.parametrize("resume_mode", ["implicit", "explicit"])
async def test_a_run_over_the_embedded_ate_substrate(tmp_path: Path, resume_mode: str) -> None:
    run = Run(params(tmp_path, resume_mode=resume_mode), handle_signals=False)
    await run_for(run, 4.0)
    assert run.result is not None and run.result.status == "completed", run.result
    assert run.engine is not None and isinstance(run.engine.substrate, AteSubstrate)
    assert run.engine.substrate.control_url.startswith("grpc://127.0.0.1:")
    totals = run.recorder.totals()
    names = ["CreateActor", "SuspendActor"] + (["ResumeActor"] if resume_mode == "explicit" else [])
    for name in names:
        row = totals.row(CONTROL_KIND, name)
        assert row.count > 0 and row.failures == 0, name
        assert row.server.count == row.count, name  # the gRPC elapsed trailer, every answer
    wakes = totals.row(ROUTER_KIND, "WakeFirstTouch")
    assert wakes.count > 0 and wakes.failures == 0
    steps = [key for key in totals.rows if key[0] == ROUTER_KIND and key[1].startswith("Step_")]
    assert steps, totals.rows.keys()
    for key in steps:
        row = totals.rows[key]
        assert row.failures == 0, (key, row.errors)
        assert row.server.count == row.count, key
    assert run.result.leaks == []


async def test_the_embedded_router_answers_as_a_real_one_on_the_ate_wire(tmp_path: Path) -> None:
    # A request for an actor that does not exist: the router's own 404, which replaces.
    run = Run(params(tmp_path), handle_signals=False)
    async with run:
        await run.preflight()
        assert run.engine is not None
        sub = run.engine.substrate
        with pytest.raises(SubstrateError) as caught:
            await sub.request(run.atespace, "never-created", "ping", json={}, timeout=30)
        assert caught.value.code == "ACTOR_NOT_FOUND"
        assert caught.value.failure_class.value == "replace"
        run.finish()
