"""Turnover's resident set against the real local substrate (worker processes, sockets,
snapshots), docs/SPEC.md §4.2: with a fifth of the wakes refused, or 1 % of the ops failing,
for the whole hold the set keeps its size and the gap is booked as
turnover/ResidentShortfall; a fill with fewer workers than `awake` ends the run with the
shortfall named, not "completed".

The faults are injected in front of the substrate's client (tests/faults.py) from a seeded
stream, armed for the hold only.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import TurnoverPopulation
from agentsession_core.engine.run import Run
from agentsession_core.engine.single_run import run_blocking
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.faults import Faulty
from tests.integration.test_engine_turnover import read_jsonl

pytestmark = pytest.mark.timeout(240)

AWAKE = 20
REFUSED_HOLD = 15.0  # seconds: the seeded stream refuses its 7th and 12th wake probes


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    """Room for AWAKE residents plus the wakes of a swap (one worker per running actor)."""
    root = tmp_path_factory.mktemp("wide")
    with LocalSubstrateProcess(
        workers=AWAKE + 2, store=root / "store", park_timeout=10, log_path=root / "log"
    ) as proc:
        yield proc


def turnover_params(out: Path, url: str | None, **population: Any) -> RunParams:
    return RunParams(
        target={"substrate": url, "request_timeout_seconds": 10.0},
        script="smoke",
        seed=7,
        out=str(out),
        name="resident",
        population={
            "kind": "turnover",
            "registration_quiet_seconds": 0.5,
            "spawn_rate": 50,
            **population,
        },
        cleanup={"stop_grace_seconds": 2.0},
    )


async def faulty_hold(params: RunParams, faulty: Faulty, hold: float) -> Run:
    run = Run(params, substrate=faulty, handle_signals=False)  # type: ignore[arg-type]
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        population = run.engine.population  # type: ignore[union-attr]
        assert isinstance(population, TurnoverPopulation) and population.fill_short is None
        faulty.armed = True
        _, _, reason = await run.hold(hold)
        faulty.armed = False
        run.finish("completed" if reason is None else "failed", reason or population.problem())
    return run


def resident_gauge(run_dir: Path, window: dict[str, Any]) -> list[float]:
    """turnover_resident{state=resident}, once a second over the turnover window."""
    lines = (run_dir / "gauges.jsonl").read_text().splitlines()
    gauges = [json.loads(line) for line in lines]
    return [
        g["value"]
        for g in gauges
        if g["name"] == "turnover_resident"
        and g["labels"] == {"state": "resident"}
        and window["start_unix"] <= g["t"] < window["end_unix"]
    ]


async def test_a_fifth_of_wakes_refused_for_the_whole_hold_keeps_the_resident_set(
    wide: LocalSubstrateProcess, tmp_path: Path
) -> None:
    client = HttpSubstrate(wide.url, control_timeout=30, router_timeout=30)
    faulty = Faulty(client, refuse_wakes=0.2, seed=5)
    faulty.armed = False
    params = turnover_params(tmp_path, wide.url, sessions=40, awake=AWAKE, target_rps=1.0)
    try:
        run = await faulty_hold(params, faulty, REFUSED_HOLD)
    finally:
        await client.aclose()
    assert run.result is not None
    assert (run.result.status, run.result.leaks) == ("completed", []), run.result.reason
    rows = read_jsonl(run.result.run_dir / "stats.jsonl")
    assert faulty.refused > 0 and rows["rps_TimeToWake"]["failure_count"] > 0
    window = rows["turnover_window"]
    assert window["resident_shortfall_seconds"] > 0  # the gap was booked, not hidden
    assert window["resident_shortfall_mean"] <= 0.02 * AWAKE, window
    assert abs(window["achieved_rps"] - 1.0) <= 0.1, window  # owed wakes complete the swaps
    hold = resident_gauge(run.result.run_dir, window)
    print(
        f"refused {faulty.refused} wakes; shortfall mean {window['resident_shortfall_mean']:.3f}"
        f"; resident gauge mean {statistics.fmean(hold):.2f} of {AWAKE}"
    )
    # The gauge is sampled once a second: all but the window's edges.
    assert len(hold) >= REFUSED_HOLD - 3 and statistics.fmean(hold) >= 0.98 * AWAKE, hold


async def test_one_percent_of_ops_failing_keeps_every_resident(
    wide: LocalSubstrateProcess, tmp_path: Path
) -> None:
    client = HttpSubstrate(wide.url, control_timeout=30, router_timeout=30)
    faulty = Faulty(client, fail_ops=0.01, seed=2)
    faulty.armed = False
    params = turnover_params(tmp_path, wide.url, sessions=40, awake=AWAKE, target_rps=5.0)
    try:
        run = await faulty_hold(params, faulty, 20.0)
    finally:
        await client.aclose()
    assert run.result is not None
    assert run.result.status == "completed", run.result.reason
    rows = read_jsonl(run.result.run_dir / "stats.jsonl")
    steps = sum(v["failure_count"] for k, v in rows.items() if k.startswith("http_Step_"))
    assert faulty.failed > 0 and steps == faulty.failed
    # A failed step keeps its session resident: no slot is lost (the old engine parked it).
    window = rows["turnover_window"]
    assert window["resident_shortfall_mean"] <= 0.01 * AWAKE, window
    hold = resident_gauge(run.result.run_dir, window)
    assert len(hold) >= 15 and statistics.fmean(hold) >= 0.98 * AWAKE, hold


def test_a_fill_with_fewer_workers_than_awake_ends_with_the_shortfall_named(
    tmp_path: Path,
) -> None:
    params = RunParams(
        target={"local_workers": 3},  # the embedded local substrate
        script="smoke",
        seed=7,
        out=str(tmp_path),
        name="short-fill",
        population={
            "kind": "turnover",
            "sessions": 8,
            "awake": 6,
            "target_rps": 1.0,
            "registration_quiet_seconds": 0.5,
            "spawn_rate": 50,
            "fill_deadline_seconds": 4,
        },
        cleanup={"stop_grace_seconds": 2.0},
    )
    result = run_blocking(params, hold_seconds=3.0)
    assert (result.status, result.exit_code) == ("failed", 1)
    assert result.reason is not None
    assert result.reason.startswith("fill: 3 of 6 sessions resident at the 4 s fill deadline")
    assert "the turnover starts 3 short" in result.reason
    logs = (result.run_dir / "logs.txt").read_text()
    assert logs.count(result.reason) == 1  # one line, then the status says it
    assert json.loads((result.run_dir / "status.json").read_text())["status"] == "failed"
    rows = read_jsonl(result.run_dir / "stats.jsonl")
    assert rows["turnover_window"]["resident_shortfall_mean"] >= 2.0
    assert result.leaks == []
