"""A substrate killed mid-hold: the run notices, fails with that reason, still writes every
artifact, and lists each actor it could not delete instead of leaking it silently. (The
normal and SIGINT cases are in test_engine_turnover.py and test_engine_cli.py.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agentsession_core.engine import watchdog
from agentsession_core.engine.params import RunParams
from agentsession_core.measure.stats import ROUTER_KIND
from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.run.ending import STEP_ROW_PREFIX
from agentsession_core.run.run import Run
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import ate_target


def steps(run: Run) -> int:
    """The steps the run has booked so far."""
    return sum(
        row.count
        for (kind, name), row in run.recorder.totals().rows.items()
        if kind == ROUTER_KIND and name.startswith(STEP_ROW_PREFIX)
    )


async def test_substrate_killed_mid_hold_fails_the_run_and_lists_the_leaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watchdog, "EVERY_S", 0.5)
    proc = LocalSubstrateProcess(workers=2, store=tmp_path / "store", log_path=tmp_path / "log")
    await asyncio.to_thread(proc.start)
    try:
        params = RunParams(
            target=ate_target(proc, atespace="killed", request_timeout_seconds=5.0),
            script="smoke",
            population={"kind": "closed", "sessions": 3},
            think_scale=0.05,
            seed=7,
            out=str(tmp_path / "out"),
            # Deletions retry until this deadline against the dead substrate: kept short.
            cleanup={"timeout_seconds": 3.0, "stop_grace_seconds": 2.0},
        )
        run = Run(params)
        async with run:
            await run.preflight()
            await run.register()
            await run.fill()
            registered = steps(run)

            def kill_once_stepping() -> None:
                """Kill the substrate mid-hold once the sessions are at work: a step booked
                after registration's (a count, not a time). Never a reason to stop."""
                if steps(run) > registered and proc.process.poll() is None:  # type: ignore[union-attr]
                    proc.kill()

            _, _, reason = await run.hold(60.0, should_stop=kill_once_stepping)
            run.finish("completed" if reason is None else "failed", reason)
    finally:
        await asyncio.to_thread(proc.stop)
    result = run.result
    assert result is not None
    assert (result.status, result.exit_code) == ("failed", 1)
    assert result.reason is not None and "substrate unreachable" in result.reason
    status = json.loads((result.run_dir / "status.json").read_text())
    assert status["status"] == "failed" and status["abort_reason"] == result.reason
    assert status["stats_generated"] and status["actors_created"] == 3
    # The three it created are listed; replacements it tried to create after the kill
    # never got an answer, and are listed as such (they may not exist).
    leaked = sorted(leak["actor"] for leak in status["leaked_actors"])
    created = sorted(leak["actor"] for leak in status["leaked_actors"] if leak["created"] == "yes")
    assert created == ["agent-0", "agent-1", "agent-2"]
    assert all(leak["created"] in ("yes", "unconfirmed") for leak in status["leaked_actors"])
    assert all(leak["atespace"] == "killed" and leak["reason"] for leak in status["leaked_actors"])
    assert sorted(leak["actor"] for leak in result.leaks) == leaked
    for name in ("stats.csv", "stats.jsonl", "failures.csv", "stats_history.csv", "logs.txt"):
        assert (result.run_dir / name).is_file(), name
    assert verify_manifest(result.run_dir) == []
