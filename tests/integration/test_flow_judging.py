"""The campaign flow's judging beyond the hold, under Prefect's test harness: a paired
campaign's two arms (docs/SPEC.md §6.8) and a capacity search's probes (§6.7), each phase
or probe a task, the result in gate.json, Prefect's artifacts and the verdict event.

Neither judges the generator's health: saturated seconds void no window here, or drop no
paired block, so that a busy machine cannot turn either into `void`.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from agentsession_core.measure.health import GeneratorHealth
from tests.integration import flow_harness
from tests.integration.flow_harness import (
    TEST_TIMEOUT_S,
    run_flow,
    small_campaign,
    task_runs,
    verdict_events,
)

pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)
prefect_api = flow_harness.prefect_api  # this module's own Prefect API


async def test_a_paired_aa_campaign_passes_and_reports_its_arms_to_prefect(
    prefect_api, tmp_path, monkeypatch
):
    """A paired campaign of one build on both arms, two embedded local substrates: it passes
    with no figure regressed or improved (every figure with enough samples unchanged); both
    arms run in one task per phase; the verdict artifact and the verdict event carry the
    comparison of the candidate with its reference arm. No second counts as saturated, so
    every one-second block is compared (a paired campaign drops a saturated block from
    both arms, whatever generator.void_when_saturated says)."""
    monkeypatch.setattr(GeneratorHealth, "saturated_in", lambda self, first, last: [])
    values = small_campaign(
        tmp_path,
        name="pairedflow",
        hold_minutes=0.25,
        window_seconds=5,
        population={"target_rps": 8, "sessions": 16, "awake": 3},
        target={"local_workers": 5},
        reference={"local_workers": 5, "request_timeout_seconds": 20},
        # A short hold's few wakes: p50 compared from 20 past it in each arm (default 50).
        gate={"block_seconds": 1, "min_blocks": 4, "min_beyond": 20},
        max_regression=0.5,
    )
    state = await run_flow(values)
    assert state.is_completed(), state
    result = await state.result()
    gate = orjson.loads((Path(result["run_dir"]) / "gate.json").read_bytes())
    paired = gate["paired"]
    assert result["verdict"] == gate["verdict"] == "pass", result["reason"]
    assert paired["status"] == "compared" and paired["blocks_dropped"] == 0, paired
    assert paired["blocks"] >= 15, paired  # every second of the 15 s hold, a block each
    assert "against the reference arm" in result["reason"]
    statuses = {m["metric"]: m["status"] for m in paired["metrics"]}
    assert not set(statuses.values()) & {"regressed", "improved"}, statuses
    assert statuses["TimeToWake.p50"] == statuses["Step_*.p50"] == "unchanged", statuses
    assert {m["status"] for m in paired["metrics"] if m.get("why") is None} == {"unchanged"}
    # Prefect names a task run after its task and a short hex suffix (fill-3fa).
    runs = {re.sub(r"-[0-9a-f]{3}$", "", name) for name in await task_runs(state)}
    assert {"preflight", "register", "fill", "hold-0", "hold-1", "hold-2"} <= runs, runs
    from prefect.artifacts import Artifact

    markdown = (await Artifact.aget("pairedflow-gate")).data
    assert "Candidate against the reference arm" in markdown
    assert "| TimeToWake.p50 |" in markdown
    (event,) = await verdict_events("pairedflow", result["run_dir"])
    carried = event.payload["paired"]
    assert carried["status"] == "compared" and carried["blocks"] == paired["blocks"]
    assert carried["rule"] == paired["rule"] and carried["regressions"] == paired["regressions"]
    wake = next(m for m in carried["metrics"] if m["metric"] == "TimeToWake.p50")
    assert wake["ratio"] == next(
        m["ratio"] for m in paired["metrics"] if m["metric"] == "TimeToWake.p50"
    )


async def test_a_capacity_search_runs_one_task_per_probe(prefect_api, tmp_path):
    """After the hold's `hold-N` tasks, one `probe-N` task per probe (docs/SPEC.md §6.7);
    the probes' result lands in gate.json. A busy box must not void the one probe."""
    values = small_campaign(
        tmp_path,
        search={
            "threshold": "TimeToWake: p99 < 30s",
            "start": 1.5,
            "max_level": 1.5,
            "settle_seconds": 0,
            "window_seconds": 2,
        },
        generator={"void_when_saturated": False},
    )
    state = await run_flow(values)
    assert state.is_completed(), state
    result = await state.result()
    runs = await task_runs(state)
    assert "probe-0" in runs and "probe-1" not in runs, runs
    gate = orjson.loads((Path(result["run_dir"]) / "gate.json").read_bytes())
    capacity = gate["capacity"]
    assert [p["level"] for p in capacity["probes"]] == [1.5]
    assert capacity["status"] == "above", capacity  # held at max_level: above it
    assert "capacity search above" in result["reason"]
