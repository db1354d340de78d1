"""Runs over the ate wire against the embedded local substrate (`target.protocol: ate` and no
URL): open_substrate starts the local substrate and drives it through AteSubstrate, the gRPC
ateapi.Control endpoint and the router's protobuf bodies, with real worker processes. Each
run holds until every row read here has been answered; its embedded router then answers a
request for an actor that does not exist as a real one does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.measure.stats import CONTROL_KIND, ROUTER_KIND
from agentsession_core.run.run import Run
from agentsession_core.substrate.ate.substrate import AteSubstrate
from agentsession_core.substrate.errors import SubstrateError

WAKES = (ROUTER_KIND, "WakeFirstTouch")


def params(tmp_path: Path, **population: Any) -> RunParams:
    return RunParams(
        out=str(tmp_path),
        script="smoke",
        think_scale=0.05,
        target={"protocol": "ate", "local_workers": 3, "token": "embedded-token"},
        population={"sessions": 2, "spawn_rate": 50.0, **population},
        cleanup={"stop_grace_seconds": 5.0},
    )


BOOKED = "every row read here is booked"


async def run_until(run: Run, rows: list[tuple[str, str]]) -> None:
    """Start-up, then a hold that ends once each of `rows` and a step have been answered
    (polled every 100 ms; a minute at most); then a request to an actor never created."""

    def booked() -> str | None:
        totals = run.recorder.totals()
        steps = any(kind == ROUTER_KIND and name.startswith("Step_") for kind, name in totals.rows)
        return BOOKED if steps and all(totals.row(*row).count for row in rows) else None

    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(60, should_stop=booked)
        # A request for an actor that does not exist: the router's own 404, which replaces.
        assert run.load.engine is not None
        with pytest.raises(SubstrateError) as caught:
            await run.load.engine.substrate.request(
                run.atespace, "never-created", "ping", json={}, timeout=30
            )
        assert caught.value.code == "ACTOR_NOT_FOUND"
        assert caught.value.failure_class.value == "replace"
        run.finish("completed" if reason == BOOKED else "failed", reason)


@pytest.mark.parametrize("resume_mode", ["implicit", "explicit"])
async def test_a_run_and_the_router_over_the_embedded_ate_substrate(
    tmp_path: Path, resume_mode: str
) -> None:
    run = Run(params(tmp_path, resume_mode=resume_mode), handle_signals=False)
    names = ["CreateActor", "SuspendActor"] + (["ResumeActor"] if resume_mode == "explicit" else [])
    await run_until(run, [(CONTROL_KIND, name) for name in names] + [WAKES])
    assert run.result is not None and run.result.status == "completed", run.result
    assert run.load.engine is not None and isinstance(run.load.engine.substrate, AteSubstrate)
    assert run.load.engine.substrate.control_url.startswith("grpc://127.0.0.1:")
    totals = run.recorder.totals()
    for name in names:
        row = totals.row(CONTROL_KIND, name)
        assert row.count > 0 and row.failures == 0, name
        assert row.server.count == row.count, name  # the gRPC elapsed trailer, every answer
    wakes = totals.row(*WAKES)
    assert wakes.count > 0 and wakes.failures == 0
    steps = [key for key in totals.rows if key[0] == ROUTER_KIND and key[1].startswith("Step_")]
    assert steps, totals.rows.keys()
    for key in steps:
        row = totals.rows[key]
        assert row.failures == 0, (key, row.errors)
        assert row.server.count == row.count, key
    assert run.result.leaks == []
