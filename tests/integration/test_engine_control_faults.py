"""Transient control failures at the two ends of a run, on the real local substrate over both
wires (issue 18, items 5 and 6): a preflight whose first call is reset still starts, a cleanup
whose deletions fail still deletes every actor before its deadline, and a cleanup that cannot
makes the run exit LEAKED_EXIT, not 0. Each test asks the substrate itself what is left.

One substrate for the module; each test sets its own fault rules. The faults are driven, not
timed: a seeded rule resets exactly the first control call, and the failing deletions stop
failing once each actor's deletion has failed (as the test sees it happen)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.measure.stats import ROUTER_KIND
from agentsession_core.run.ending import STEP_ROW_PREFIX
from agentsession_core.run.run import LEAKED_EXIT, Run
from agentsession_core.substrate.ate.substrate import AteSubstrate
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess

pytestmark = pytest.mark.timeout(120)

# On this seed the rule's stream resets the first control call and none of the next 19
# (the test reads the substrate's own count to be sure): preflight meets exactly one reset.
RESET_FIRST, RESET_SEED = "control:reset:0.3", 488
CAP_S = 60.0  # only a hang waits this long


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    root = tmp_path_factory.mktemp("control-faults")
    with LocalSubstrateProcess(
        workers=3, store=root / "store", log_path=root / "substrate.log"
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


async def set_faults(proc: LocalSubstrateProcess, rules: list[str], seed: int = 0) -> None:
    await asyncio.to_thread(proc.set_faults, rules, seed)


async def left_on(proc: LocalSubstrateProcess, atespace: str) -> list[str]:
    """The actors the substrate itself still has in `atespace` (faults off)."""
    await set_faults(proc, [])
    client = HttpSubstrate(proc.url)
    try:
        return sorted(actor.name for actor in await client.list_actors(atespace))
    finally:
        await client.aclose()


def fired(proc: LocalSubstrateProcess) -> int:
    return sum(rule["fired"] for rule in proc.faults()["rules"])


def stepped(run: Run) -> str | None:
    """A hold's end once a step succeeded: a run completes only then (Run.no_step_succeeded)."""
    for (kind, name), row in run.recorder.totals().rows.items():
        if kind == ROUTER_KIND and name.startswith(STEP_ROW_PREFIX) and row.count > row.failures:
            return "a step succeeded"
    return None


async def hold_until_a_step(run: Run) -> None:
    _, _, reason = await run.hold(CAP_S, should_stop=lambda: stepped(run))
    assert reason == "a step succeeded", reason
    run.finish("completed")


@pytest.fixture
def failed_deletes(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Each actor's failed DeleteActor calls, as either wire's client saw them."""
    failed: Counter[str] = Counter()
    for cls in (HttpSubstrate, AteSubstrate):
        real = cls.delete_actor

        async def recorded(self: Any, atespace: str, name: str, real: Any = real) -> None:
            try:
                await real(self, atespace, name)
            except SubstrateError:
                failed[name] += 1
                raise

        monkeypatch.setattr(cls, "delete_actor", recorded)
    return failed


@pytest.mark.parametrize("wire", ["json", "ate"])
async def test_reset_preflight_and_failing_deletes_are_retried(
    proc: LocalSubstrateProcess, wire: str, tmp_path: Path, failed_deletes: Counter[str]
) -> None:
    await set_faults(proc, [RESET_FIRST], RESET_SEED)
    run = Run(run_params(proc, wire, tmp_path / "out", timeout_seconds=30.0))
    async with run:
        assert await run.preflight(), run.refusal
        (rule,) = (await asyncio.to_thread(proc.faults))["rules"]
        assert rule["fired"] == 1 and rule["seen"] >= 2, rule  # reset once, then retried
        await set_faults(proc, [])
        await run.register()
        await run.fill()
        await hold_until_a_step(run)
        actors = run.load.engine.ledger.live  # type: ignore[union-attr]
        assert len(actors) >= 2
        # Every control call fails INTERNAL until each actor's deletion has failed at least
        # once, which alone used to leave it behind.
        await set_faults(proc, ["control:fail:1"])

        async def unfail() -> None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + CAP_S
            while not all(failed_deletes[name] for name in actors):
                assert loop.time() < deadline, failed_deletes
                await asyncio.sleep(0.01)
            await set_faults(proc, [])

        unfailing = asyncio.create_task(unfail())
    await unfailing
    result = run.result
    assert result is not None
    assert (result.status, result.exit_code, result.leaks) == ("completed", 0, []), result.reason
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
    await set_faults(proc, [])
    run = Run(run_params(proc, "json", tmp_path / "out", timeout_seconds=1.5))
    async with run:
        assert await run.preflight(), run.refusal
        await run.register()
        await run.fill()
        await hold_until_a_step(run)
        await set_faults(proc, ["control:fail:1"])  # for the whole cleanup
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
