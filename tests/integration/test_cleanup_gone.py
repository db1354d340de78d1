"""Cleanup against a substrate that is gone (issue 29, docs/SPEC.md §3.5): it once spent
116 s of its 120 s deadline retrying deletes against a killed substrate. Now, with the
watchdog not yet aware of the outage (the run ended first), no answer to any of its calls for
UNANSWERED_S ends the retries, and every actor is listed as leaked with the reason; and a
substrate that answers that the actors (and their atespace) do not exist, restarted on an
empty store, has its actors counted deleted (that answer is not retried, nor a leak). The
case the watchdog already saw is tests/integration/test_capacity_outage.py's. Measured
against the real local substrate, killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from agentsession_core.engine.ledger import UNANSWERED_S
from agentsession_core.engine.params import CleanupParams, RunParams
from agentsession_core.run.run import Run
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.ports import fixed_port

pytestmark = pytest.mark.timeout(200)
SESSIONS = 6
# The cleanup's default deadline, which it used to spend in full.
CLEANUP_DEADLINE_S = CleanupParams().timeout_seconds


def substrate(tmp_path: Path, ports: tuple[int, int], store: str) -> LocalSubstrateProcess:
    """On the router port and the ate control port given, so a restart comes back on both."""
    port, grpc_port = ports
    return LocalSubstrateProcess(
        workers=2,
        store=tmp_path / store,
        log_path=tmp_path / f"{store}.log",
        extra_args=["--port", str(port), "--grpc-port", str(grpc_port)],
    )


def params(ports: tuple[int, int], out: Path) -> RunParams:
    port, grpc_port = ports
    return RunParams(
        target={
            "substrate": f"grpc://127.0.0.1:{grpc_port}",
            "router": f"http://127.0.0.1:{port}",
            "atespace": "gone",
            "request_timeout_seconds": 5.0,
        },
        script="smoke",
        population={"kind": "closed", "sessions": SESSIONS, "spawn_rate": 50},
        think_scale=0.05,
        seed=29,
        out=str(out),
        cleanup={"stop_grace_seconds": 1.0},  # the deadline stays the default 120 s
    )


async def run_then(tmp_path: Path, then: str) -> Run:
    """Register and hold a closed run, stop its load, then kill the substrate (`then`:
    "kill", or "restart" it empty on the same port) just before the run leaves: cleanup
    meets it."""
    ports = (fixed_port(), fixed_port())
    proc = substrate(tmp_path, ports, "store")
    await asyncio.to_thread(proc.start)
    fresh: LocalSubstrateProcess | None = None
    try:
        run = Run(params(ports, tmp_path / "out"), handle_signals=False)
        async with run:
            assert await run.preflight(), run.refusal
            await run.register()
            await run.fill()
            _, _, reason = await run.hold(1.0)
            run.finish("completed" if reason is None else "failed", reason)
            # The load stops first (the run leaves), so no session meets the dead substrate
            # and is replaced under a new name: cleanup alone does.
            assert run.load.engine is not None
            await run.load.engine.stop()
            await asyncio.to_thread(proc.kill)  # SIGKILL: nothing in it cleans up
            if then == "restart":
                fresh = substrate(tmp_path, ports, "empty")
                await asyncio.to_thread(fresh.start)
    finally:
        await asyncio.to_thread(proc.stop)
        if fresh is not None:
            await asyncio.to_thread(fresh.stop)
    return run


async def test_cleanup_gives_up_on_a_substrate_that_stopped_answering(tmp_path: Path) -> None:
    run = await run_then(tmp_path, "kill")
    result = run.result
    assert result is not None
    status = json.loads((result.run_dir / "status.json").read_text())
    leaked = status["leaked_actors"]
    assert sorted(leak["actor"] for leak in leaked) == [f"agent-{i}" for i in range(SESSIONS)]
    # Refused connections: gRPC's UNAVAILABLE on the ate wire (the JSON wire says TRANSPORT).
    assert all("UNAVAILABLE" in leak["reason"] for leak in leaked), leaked
    # The silence rule ended the retries, after UNANSWERED_S without an answer, as the
    # reason says; not the deadline it used to spend (116 s of 120), as the cleanup's own
    # line says.
    silent = [re.search(r"gave no answer to cleanup for (\d+)s", leak["reason"]) for leak in leaked]
    assert None not in silent, leaked
    assert all(int(m.group(1)) >= UNANSWERED_S for m in silent if m), leaked
    logs = (result.run_dir / "logs.txt").read_text()
    took = re.search(rf"cleanup: 0 actors deleted, {SESSIONS} left, ([\d.]+)s", logs)
    assert took and float(took.group(1)) < CLEANUP_DEADLINE_S, logs[-2000:]
    # Never silent: the run that measured fine but left actors behind exits 3.
    assert (result.status, result.exit_code) == ("completed", 3), result


async def test_actors_a_restarted_empty_substrate_does_not_have_are_deleted(
    tmp_path: Path,
) -> None:
    run = await run_then(tmp_path, "restart")
    result = run.result
    assert result is not None
    status = json.loads((result.run_dir / "status.json").read_text())
    assert status["leaked_actors"] == [] and result.exit_code == 0, status
    # Every actor made (a replacement too, had a session been replaced) was deleted.
    assert status["actors_deleted"] == status["actors_created"] >= SESSIONS
