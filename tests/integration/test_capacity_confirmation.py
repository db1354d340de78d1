"""The capacity search's confirmation and what bound the capacity (docs/SPEC.md §6.7), over
real processes: a local substrate whose wakes the test refuses above a known rate (as
test_capacity_search.py does), so the search converges on 3x (0.9 swaps/s: 3.75x broke).

* The substrate keeps its capacity: the confirmation holds 3x once more, gate.json says
  `confirmed: true`, and `bound_by` names the failure rule the broken probes missed.
* The substrate gets worse once the search converged (wakes refused during the
  confirmation too): the confirmation breaks, the search steps down once, to 3x × (1 −
  resolution) = 2.25x, which holds; gate.json says `confirmed: false` and the step down.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.run.run import Run
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_target
from tests.integration.test_capacity_search import (
    BASE_RPS,
    REFUSE_WAKES,
    TRUE_RATE,
    probes_line,
    rate_search,
)

pytestmark = pytest.mark.timeout(150)
FAILURES = "TimeToWake: failure_ratio < 0.02"


@pytest.fixture(scope="module")
def substrate() -> Iterator[LocalSubstrateProcess]:
    with LocalSubstrateProcess(workers=4, token=TOKEN, park_timeout=30) as proc:
        yield proc


async def searched(
    proc: LocalSubstrateProcess, tmp_path: Path, seed: int, *, worse_when_confirming: bool
) -> tuple[dict[str, Any], list[str]]:
    """test_capacity_search.py's `tolerant` phases; before each probe, every wake refused
    while its rate is above TRUE_RATE, and with `worse_when_confirming` during the
    confirmation too. gate.json's capacity, and the stage of each probe as it began."""
    params = rate_search(tmp_path, ate_target(proc), seed, thresholds=(FAILURES,), window_seconds=3)
    stages: list[str] = []
    run = Run(params, handle_signals=False)
    try:
        async with run:
            campaign = Campaign(params, run)
            await run.preflight()
            await run.register()
            await run.fill()
            for window in campaign.plan:
                await campaign.hold_window(window.index)
            number = 0
            while campaign.searching:
                assert campaign.search is not None
                level = campaign.search.next_level()
                assert level is not None
                stage = campaign.search.next_stage
                stages.append(stage)
                worse = worse_when_confirming and stage == "confirm"
                refuse = level > TRUE_RATE / BASE_RPS or worse
                await asyncio.to_thread(proc.set_faults, [REFUSE_WAKES] if refuse else [])
                await campaign.probe(number)
                number += 1
            campaign.finish()
    finally:
        await asyncio.to_thread(proc.set_faults, [])
    assert run.result is not None and run.result.leaks == []
    gate = json.loads((run.result.run_dir / "gate.json").read_text())
    capacity: dict[str, Any] = gate["capacity"]
    print(f"{capacity['reason']}; probes {probes_line(capacity)}")
    assert gate["verdict"] == "pass", gate["reason"]  # a probe that broke fails nothing
    return capacity, stages


async def test_the_found_capacity_is_held_again_and_names_what_bound_it(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    capacity, stages = await searched(substrate, tmp_path, 4, worse_when_confirming=False)
    outcomes = [(p["level"], p["outcome"], p["stage"]) for p in capacity["probes"]]
    assert outcomes == [
        (3, "held", "search"),
        (6, "broke", "search"),
        (4.5, "broke", "search"),
        (3.75, "broke", "search"),
        (3, "held", "confirm"),  # one more search window at the found level
    ]
    assert stages == ["search"] * 4 + ["confirm"]  # the stage the search asked for
    assert capacity["status"] == "found" and capacity["level"] == 3
    assert capacity["confirmed"] is True
    confirmation = capacity["confirmation"]
    assert confirmation["level"] == 3 and confirmation["outcome"] == "held"
    assert confirmation["index"] == capacity["probes"][-1]["index"]
    assert confirmation["step_down"] is None
    # Refused wakes miss the failure rule, not the latency SLO: that rule bound it.
    assert capacity["bound_kind"] == "failures" and capacity["bound_by"] == FAILURES
    assert "confirmed: held again" in capacity["reason"]
    assert f"bound by {FAILURES}" in capacity["reason"]


async def test_a_confirmation_that_breaks_steps_down_once_and_says_so(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    capacity, stages = await searched(substrate, tmp_path, 5, worse_when_confirming=True)
    outcomes = [(p["level"], p["outcome"], p["stage"]) for p in capacity["probes"]]
    # 3x × (1 − 0.25) = 2.25x: nothing held between it and 3x (only the anchor, 1x), so
    # the step down is probed, once.
    assert outcomes == [
        (3, "held", "search"),
        (6, "broke", "search"),
        (4.5, "broke", "search"),
        (3.75, "broke", "search"),
        (3, "broke", "confirm"),
        (2.25, "held", "step-down"),
    ]
    assert stages[-2:] == ["confirm", "step-down"]
    assert capacity["status"] == "found" and capacity["confirmed"] is False
    assert capacity["level"] == 2.25 and capacity["rate"] == pytest.approx(2.25 * BASE_RPS)
    assert capacity["broke_at_level"] == 3  # the confirmation's break is the lowest
    step = capacity["confirmation"]["step_down"]
    assert step["level"] == 2.25 and step["outcome"] == "held" and step["already_held"] is False
    assert capacity["confirmation"]["outcome"] == "broke"
    assert "the confirmation at 3x broke; stepped down once to 2.25x: held" in capacity["reason"]
    assert capacity["bound_kind"] == "failures" and capacity["bound_by"] == FAILURES
