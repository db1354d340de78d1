"""Issue 4's turnover run, end to end against the local substrate (real processes and
sockets): the rows, the marker line, registration parks kept apart, the swap rate, the
resident set's books, the manifest, and an empty atespace afterwards."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import (
    FILL_DONE_MARKER,
    RESIDENT_TOLERANCE,
    TurnoverPopulation,
)
from agentsession_core.measure.histogram import LogHistogram
from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.run.run import Run
from agentsession_core.substrate.interface import Substrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_target

# A swap wakes the longest-parked session, so each is woken every SESSIONS / RATE ticks: the
# first of the fill's sessions take the script's last step (their third wake) at the fifth.
SESSIONS, AWAKE, RATE, HOLD = 8, 4, 2, 10.0


def read_jsonl(path: Path) -> dict[str, dict]:
    rows = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        rows[row["metric"]] = row["measurements"]
    return rows


def seconds_late(wakes: LogHistogram, after_ms: float = 1000.0) -> int:
    """What wakes slower than `after_ms` from their tick cost a book sampled `after_ms` after
    each tick (ResidentShortfall: a second), one resident-second for each `after_ms` a wake
    still had to go (docs/SPEC.md §4.2: a wake under way is no resident yet)."""
    late, k = 0, 1
    while (beyond := wakes.count - wakes.count_at_or_below(after_ms * k)) > 0:
        late, k = late + beyond, k + 1
    return late


async def test_turnover_smoke_run(
    substrate: LocalSubstrateProcess, client: Substrate, tmp_path: Path
) -> None:
    atespace = "engine-turnover"
    params = RunParams(
        target=ate_target(substrate, token=TOKEN, atespace=atespace),
        script="smoke",
        population={
            "kind": "turnover",
            "sessions": SESSIONS,
            "awake": AWAKE,
            "target_rps": RATE,
            "registration_quiet_seconds": 2.0,
        },
        think_scale=0.05,
        seed=7,
        out=str(tmp_path),
        name="turnover-smoke",
    )
    run = Run(params)
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        _, _, reason = await run.hold(HOLD)
        assert reason is None
        problem = run.load.problem()  # as the CLI ends it: a short resident set fails it
        run.finish("completed" if problem is None else "failed", problem)
        population = run.load.engine.population  # type: ignore[union-attr]
    assert run.result is not None
    run_dir = run.result.run_dir

    rows = read_jsonl(run_dir / "stats.jsonl")
    # The upstream runner's row names (docs/SPEC.md §5.1), so its dashboards read ours:
    # control-plane calls are grpc, router requests http, the turnover wake rps_TimeToWake.
    requests = {
        "grpc_CreateActor",
        "grpc_SuspendActor_Register",
        "grpc_SuspendActor",
        "http_FirstTouch",
        "http_WakeFirstTouch",
        "rps_TimeToWake",
    }
    requests |= {
        f"http_Step_{step}" for step in ("01_start", "02_upload", "03_work", "04_write_back")
    }
    wanted = requests | {"turnover_window"}
    assert wanted <= set(rows), sorted(wanted - set(rows))
    # Nothing else books requests: the rest are the generator's own rows, the load's own
    # count-only rows and the extra rows.
    others = {
        "generator_LoopLag",
        "generator_DispatchLag",
        "turnover_Backlog",
        "turnover_ResidentShortfall",
    }
    assert set(rows) - wanted <= others, sorted(set(rows) - wanted - others)
    for metric in requests:
        assert rows[metric]["failure_count"] == 0, (metric, rows[metric].get("errors"))
    # The Locust CSVs carry the same request rows as Type and Name (not the load's own rows).
    with (run_dir / "stats.csv").open(newline="") as f:
        typed = {f"{r['Type']}_{r['Name']}" for r in csv.DictReader(f) if r["Type"]}
    assert typed == requests, sorted(typed ^ requests)
    # The gap was booked every second. A healthy substrate fails no wake, so the only gap is
    # a wake still under way at the next tick: a resident-second for each whole second a wake
    # took (TimeToWake runs from its tick), as the books have them.
    shortfall = rows["turnover_ResidentShortfall"]
    assert shortfall["duration_s"] >= HOLD - 2
    late = seconds_late(run.recorder.totals().row("rps", "TimeToWake").response)
    assert shortfall["event_count"] <= late, (shortfall, late)

    # Registration parks only under *_Register; SuspendActor holds the turnover parks.
    assert isinstance(population, TurnoverPopulation)
    assert rows["grpc_SuspendActor_Register"]["request_count"] == SESSIONS
    parks = rows["grpc_SuspendActor"]["request_count"]
    # A tick that fires as the hold ends may have its swaps refused by the stop guard.
    assert population.swaps_started - RATE <= parks <= population.swaps_started
    # Fill wakes are the only WakeFirstTouch rows; every swap is one park and one wake.
    assert rows["http_WakeFirstTouch"]["request_count"] == AWAKE
    assert rows["rps_TimeToWake"]["request_count"] == AWAKE + parks

    window = rows["turnover_window"]
    assert (window["target_rps"], window["level"], window["awake"]) == (RATE, 1.0, AWAKE)
    assert window["duration_s"] >= HOLD - 2
    assert window["resident_shortfall_seconds"] == shortfall["event_count"]
    # The swap rate: every tick asked for RATE swaps, started or (a resident still inside its
    # step when its tick came) booked as Backlog; each swap's wake is booked (above).
    assert population.swaps_started + window["backlog"] == RATE * population.ticks, window
    assert "grpc_SuspendActor_Register_count" not in window  # registration is outside it
    assert window["grpc_SuspendActor_count"] > 0 and window["rps_TimeToWake_count"] > 0
    # The run ends as its books say: completed unless the mean gap was above the tolerance.
    short = window["resident_shortfall_mean"] > RESIDENT_TOLERANCE * AWAKE
    assert (run.result.status, run.result.exit_code) == (
        ("failed", 1) if short else ("completed", 0)
    ), (run.result.reason, window)

    logs = (run_dir / "logs.txt").read_text()
    assert FILL_DONE_MARKER in logs
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == run.result.status and status["stats_generated"]
    assert (status["actors_created"], status["actors_deleted"]) == (SESSIONS, SESSIONS)
    assert status["leaked_actors"] == []
    assert verify_manifest(run_dir) == []
    assert await client.list_actors(atespace) == []
