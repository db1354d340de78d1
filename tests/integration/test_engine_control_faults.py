"""Transient control failures at the two ends of a run, on the real local substrate over both
wires (issue 18, items 5 and 6): a preflight whose calls are reset still starts, a cleanup
whose deletions fail still deletes every actor before its deadline, and a cleanup that cannot
makes the run exit LEAKED_EXIT, not 0. Each test asks the substrate itself what is left."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.run import LEAKED_EXIT, Run
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[LocalSubstrateProcess]:
    # Every control call reset from the start: the first GetTemplate meets it.
    with LocalSubstrateProcess(
        workers=3,
        store=tmp_path / "store",
        faults=["control:reset:1"],
        fault_seed=18,
        log_path=tmp_path / "substrate.log",
    ) as running:
        yield running


def run_params(proc: LocalSubstrateProcess, wire: str, out: Path, **cleanup: Any) -> RunParams:
    target: dict[str, Any] = {"atespace": f"faults-{wire}", "request_timeout_seconds": 5.0}
    if wire == "ate":
        target |= {"substrate": proc.grpc_url, "router": proc.url, "protocol": "ate"}
    else:
        target |= {"substrate": proc.url}
    return RunParams(
        target=target,
        script="smoke",
        population={"kind": "closed", "sessions": 2},
        think_scale=0.05,
        seed=7,
        out=str(out),
        cleanup={"stop_grace_seconds": 2.0, **cleanup},
    )


async def left_on(proc: LocalSubstrateProcess, atespace: str) -> list[str]:
    """The actors the substrate itself still has in `atespace` (faults off)."""
    await asyncio.to_thread(proc.set_faults, [])
    client = HttpSubstrate(proc.url)
    try:
        return sorted(actor.name for actor in await client.list_actors(atespace))
    finally:
        await client.aclose()


async def later(seconds: float, proc: LocalSubstrateProcess, rules: list[str]) -> int:
    """Set `rules` in `seconds`; how often the rules they replace had fired."""
    await asyncio.sleep(seconds)
    before = await asyncio.to_thread(fired, proc)
    await asyncio.to_thread(proc.set_faults, rules)
    return before


def fired(proc: LocalSubstrateProcess) -> int:
    return sum(rule["fired"] for rule in proc.faults()["rules"])


@pytest.mark.parametrize("wire", ["json", "ate"])
async def test_reset_preflight_and_failing_deletes_are_retried(
    proc: LocalSubstrateProcess, wire: str, tmp_path: Path
) -> None:
    run = Run(run_params(proc, wire, tmp_path / "out", timeout_seconds=30.0))
    async with run:
        # The resets stop 0.5 s in, while preflight waits between its attempts.
        clearing = asyncio.create_task(later(0.5, proc, []))
        started = time.monotonic()
        assert await run.preflight(), run.refusal
        preflight_s = time.monotonic() - started
        assert await clearing > 0  # the first GetTemplate was reset
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(1.5)
        run.finish("completed" if reason is None else "failed", reason)
        # Every control call fails INTERNAL for the cleanup's first second: each actor's
        # first deletion fails, which alone used to leave it behind.
        await asyncio.to_thread(proc.set_faults, ["control:fail:1"])
        unfailing = asyncio.create_task(later(1.0, proc, []))
    assert await unfailing >= 2  # at least each actor's first deletion failed
    result = run.result
    assert result is not None
    assert (result.status, result.exit_code, result.leaks) == ("completed", 0, []), result.reason
    assert 0.5 <= preflight_s < 5.0, preflight_s
    logs = (result.run_dir / "logs.txt").read_text()
    assert "preflight: GetTemplate benchmark-workloads/glutton failed" in logs, logs
    assert "cleanup: " in logs and " 0 left" in logs, logs
    status = json.loads((result.run_dir / "status.json").read_text())
    assert status["leaked_actors"] == [] and status["exit_code"] == 0
    assert status["actors_deleted"] == status["actors_created"] >= 2
    assert await left_on(proc, f"faults-{wire}") == []


async def test_a_run_that_leaks_actors_exits_leaked_not_zero(
    proc: LocalSubstrateProcess, tmp_path: Path
) -> None:
    await asyncio.to_thread(proc.set_faults, [])
    run = Run(run_params(proc, "json", tmp_path / "out", timeout_seconds=1.5))
    async with run:
        assert await run.preflight(), run.refusal
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(1.0)
        run.finish("completed" if reason is None else "failed", reason)
        await asyncio.to_thread(proc.set_faults, ["control:fail:1"])  # for the whole cleanup
    assert fired(proc) > 0
    result = run.result
    assert result is not None
    assert (result.status, result.exit_code) == ("completed", LEAKED_EXIT), result.reason
    status = json.loads((result.run_dir / "status.json").read_text())
    assert status["exit_code"] == LEAKED_EXIT
    listed = sorted(leak["actor"] for leak in status["leaked_actors"])
    # What the run says it left is what the substrate has: then the test cleans up itself.
    assert listed and await left_on(proc, "faults-json") == listed
    assert all("INTERNAL" in leak["reason"] for leak in status["leaked_actors"])
    client = HttpSubstrate(proc.url)
    try:
        for name in listed:
            await client.delete_actor("faults-json", name)
    finally:
        await client.aclose()
    assert await left_on(proc, "faults-json") == []
