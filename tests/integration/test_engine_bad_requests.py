"""A script whose op the target can never serve (issue 18, item 4), on the real local
substrate over both wires: fill_ram 400Mi against its 256 MiB per-op cap.

- The substrate states its caps: preflight refuses the run in one line naming the step, the
  op and the cap, before any actor exists.
- A substrate that states none (`--no-op-limits`) answers INVALID_ARGUMENT on every step:
  no actor is replaced for it, and after ten such answers in a row (MISCONFIGURED_GIVE_UP)
  with no step succeeding the run ends failed as misconfigured, before its hold is over.
- A run in which every step failed for any other reason ends failed, never completed.
Each test asks the substrate itself what is left. Two substrates for the module, one per
configuration (caps stated, or none); each test has an atespace of its own."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.run.run import Run, RunResult
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess

pytestmark = pytest.mark.timeout(120)

TOO_BIG = """\
name: too-big
min_actor_memory: 512Mi
steps:
  - name: 01_load
    agent: Loads a context larger than one op may be
    think: 100ms
    ops:
      - ping: {}
      - fill_ram: {key: context, size: 400Mi}
"""


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    """A substrate that states its per-op caps (256 MiB for an op)."""
    root = tmp_path_factory.mktemp("capped")
    with LocalSubstrateProcess(workers=1, store=root / "store") as proc:
        yield proc


@pytest.fixture(scope="module")
def uncapped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    """A substrate that states none; each test sets its own fault rules."""
    root = tmp_path_factory.mktemp("uncapped")
    with LocalSubstrateProcess(
        workers=3, store=root / "store", extra_args=["--no-op-limits"]
    ) as proc:
        yield proc


def run_params(
    proc: LocalSubstrateProcess, wire: str, out: Path, atespace: str, **extra: Any
) -> RunParams:
    target: dict[str, Any] = {"atespace": atespace, "request_timeout_seconds": 10.0}
    if wire == "ate":
        target |= {"substrate": proc.grpc_url, "router": proc.url, "protocol": "ate"}
    else:
        target |= {"substrate": proc.url}
    fields: dict[str, Any] = {
        "target": target,
        "population": {"kind": "closed", "sessions": 2},
        "think_scale": 0.05,
        "seed": 7,
        "out": str(out),
        "cleanup": {"stop_grace_seconds": 2.0, "timeout_seconds": 20.0},
    }
    return RunParams(**(fields | extra))


REACHED = "the test's condition was reached"


async def whole_run(
    params: RunParams, hold_s: float, until: Callable[[Run], bool] | None = None
) -> tuple[RunResult, str | None]:
    """The run's result, and why its hold ended early (None: it ran its length, or until
    `until(run)` held, which ends it as its length would)."""
    run = Run(params)
    reason = None
    async with run:
        if await run.preflight():
            await run.register()
            await run.fill()
            done = (lambda: REACHED if until(run) else None) if until else None
            _, _, reason = await run.hold(hold_s, should_stop=done)
            reason = None if reason == REACHED else reason
            run.finish("completed" if reason is None else "failed", reason)
    assert run.result is not None
    return run.result, reason


async def left_on(proc: LocalSubstrateProcess, atespace: str) -> list[str]:
    client = HttpSubstrate(proc.url)
    try:
        return sorted(actor.name for actor in await client.list_actors(atespace))
    finally:
        await client.aclose()


def status_of(result: RunResult) -> dict[str, Any]:
    return json.loads((result.run_dir / "status.json").read_text())


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "too-big.yaml"
    path.write_text(TOO_BIG)
    return str(path)


@pytest.mark.parametrize("wire", ["json", "ate"])
async def test_an_op_above_the_stated_cap_is_refused_at_preflight(
    capped: LocalSubstrateProcess, wire: str, script: str, tmp_path: Path
) -> None:
    params = run_params(capped, wire, tmp_path / "out", f"capped-{wire}", script=script)
    result, _ = await whole_run(params, 5.0)
    assert (result.status, result.exit_code) == ("refused", 1), result.reason
    assert result.reason is not None
    assert "\n" not in result.reason
    for part in ("step 01_load op 2 fill_ram", "400Mi", "per-op cap of 256Mi"):
        assert part in result.reason, result.reason
    assert status_of(result)["actors_created"] == 0
    with pytest.raises(Exception, match="NOT_FOUND"):  # refused before EnsureAtespace
        await left_on(capped, f"capped-{wire}")


@pytest.mark.parametrize("wire", ["json", "ate"])
async def test_a_never_servable_op_ends_the_run_misconfigured_without_replacements(
    uncapped: LocalSubstrateProcess, wire: str, script: str, tmp_path: Path
) -> None:
    uncapped.set_faults([])
    atespace = f"never-{wire}"
    params = run_params(uncapped, wire, tmp_path / "out", atespace, script=script)
    result, ended_by = await whole_run(params, 60.0)
    assert ended_by is not None and ended_by.startswith("misconfigured: ")  # not the 60 s hold
    assert (result.status, result.exit_code) == ("failed", 1), result.reason
    assert result.reason is not None and result.reason.startswith("misconfigured: ")
    assert "10 requests in a row" in result.reason, result.reason
    assert "step 01_load: op 2 fill_ram" in result.reason, result.reason
    status = status_of(result)
    assert status["status"] == "failed" and status["exit_code"] == 1
    assert list(status["misconfigured"]) in (["INVALID_ARGUMENT"], ["HTTP_400"])
    # Two sessions, two actors: a bad request replaced none of them.
    assert (status["actors_created"], status["actors_deleted"]) == (2, 2)
    assert "replaced by" not in (result.run_dir / "logs.txt").read_text()
    assert await left_on(uncapped, atespace) == []


async def test_a_run_whose_every_step_failed_is_not_completed(
    uncapped: LocalSubstrateProcess, tmp_path: Path
) -> None:
    # A 500 from the glutton on every fill_ram: counted failures, so replacements happen
    # (the actor might be at fault), but not one step succeeds in the whole hold.
    uncapped.set_faults(["op:/writeram:fail:1"])
    try:
        params = run_params(uncapped, "json", tmp_path / "out", "failing", script="smoke")
        # Held until steps have failed (a count: a busy machine takes longer, not fewer).
        result, _ = await whole_run(
            params,
            60.0,
            lambda run: run.recorder.totals().row("http", "Step_01_start").failures >= 3,
        )
    finally:
        uncapped.set_faults([])
    assert (result.status, result.exit_code) == ("failed", 1), result.reason
    assert result.reason is not None
    assert result.reason.startswith("no step succeeded: all "), result.reason
    assert "op 1 fill_ram" in result.reason, result.reason
    assert status_of(result)["abort_reason"] == result.reason
    assert await left_on(uncapped, "failing") == []
