"""The capacity search against substrates whose capacity is known by construction
(docs/SPEC.md §6.7):

* rate: a local substrate behind `capacity_standin.OneAtATimeRouter`, which serves wake
  probes one at a time for SERVICE_S each, so at most 1 / SERVICE_S wakes per second
  succeed; above that rate the wakes queue and the SLO breaks. On the JSON and the ate wire.
* density: a local substrate with WORKERS workers (each the template's memory: its memory
  limit), which refuses a wake once every worker holds a resident (after its park timeout),
  so it holds WORKERS residents and no more.
* an abort rule tripping during the search ends it at the last level held; every actor is
  deleted all the same.

This box is shared (load averages past 10 on two cores), so the generator's own void rule
is relaxed in these runs (`tolerant`): a saturated second here says nothing about the
substrate, and the search under test would end `void` on it. One seed per wire here, at
resolution 0.25; bench/capacity_search.py runs three seeds on each wire at the default 0.1.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.shards import open_run
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.capacity_standin import OneAtATimeRouter
from tests.integration.conftest import TOKEN

pytestmark = pytest.mark.timeout(120)

# At most one wake a second succeeds. Below that rate a turnover's swaps (at most one a
# tick) never meet a busy server; above it two fall in one tick and the second is refused
# (or, its resident still waking, never sent: the swap is booked as Backlog).
SERVICE_S = 1.0
QUEUE_S = 0.5
TRUE_RATE = 1 / SERVICE_S
BASE_RPS = 0.3
WORKERS = 4  # the density stand-in's resident limit


def rate_search(out: Path, target: dict[str, Any], seed: int, **search: Any) -> CampaignParams:
    return CampaignParams(
        target={"token": TOKEN, **target},
        script="smoke",
        think_scale=0.05,
        seed=seed,
        name="capacity",
        out=str(out),
        hold_minutes=3 / 60,
        window_seconds=3,
        # What the stand-in refuses once wakes outrun it (a probe breaks on any threshold).
        thresholds=["TimeToWake: failure_ratio < 0.02", "Backlog: events <= 0"],
        population={
            "sessions": 8,
            "awake": 3,
            "target_rps": BASE_RPS,
            "spawn_rate": 50,
            "registration_quiet_seconds": 0.5,
        },
        cleanup={"stop_grace_seconds": 3},
        abort={"rules": [], "delay_seconds": 0},
        search={
            "threshold": "TimeToWake: p99 < 2s",
            # 3x = 0.9 swaps/s holds; then 6x breaks and two bisections bracket the knee.
            "start": 3,
            "factor": 2,
            "resolution": 0.25,
            "max_level": 8,
            "settle_seconds": 1,
            # At 1.2 swaps/s one tick in five has two: a window of 5 s sees one.
            "window_seconds": 5,
            **search,
        },
    )


async def tolerant(
    params: CampaignParams, router: OneAtATimeRouter | None = None
) -> tuple[Campaign, dict[str, Any]]:
    """run_campaign's phases, with the generator's void rule relaxed (module docstring);
    `router`'s limit starts once the population is resident."""
    run = open_run(params, handle_signals=False)
    async with run:
        run.health.void_fraction = 1.0
        campaign = Campaign(params, run)
        await run.preflight()
        await run.register()
        await run.fill()
        if router is not None:
            await asyncio.to_thread(router.limit)
        for window in campaign.plan:
            if campaign.stopped:
                break
            await campaign.hold_window(window.index)
        number = 0
        while campaign.searching:
            await campaign.probe(number)
            number += 1
        campaign.finish()
    assert run.result is not None
    gate = json.loads((run.result.run_dir / "gate.json").read_text())
    return campaign, gate


def probes_line(capacity: dict[str, Any]) -> str:
    return ", ".join(
        f"{p['rate']:g} {capacity['unit']} {p['outcome']} "
        f"(figure {p['figure']}, missed {p['missed']})"
        for p in capacity["probes"]
    )


def assert_found_within_resolution(gate: dict[str, Any], truth: float) -> None:
    capacity = gate["capacity"]
    print(f"capacity {capacity['rate']} (truth {truth}); probes {probes_line(capacity)}")
    assert capacity["status"] == "found", capacity["reason"]
    assert capacity["unit"] == "swaps/s"
    assert abs(capacity["rate"] - truth) <= capacity["resolution"] * truth, capacity
    assert capacity["broke_at_rate"] > capacity["rate"]
    # Probes above the capacity broke; the campaign's verdict is the hold's.
    assert any(p["outcome"] == "broke" for p in capacity["probes"])
    assert gate["verdict"] == "pass", gate["reason"]


@pytest.mark.parametrize("seed", [1])
async def test_the_rate_search_finds_the_capacity_on_the_json_wire(
    substrate: LocalSubstrateProcess, tmp_path: Path, seed: int
) -> None:
    with OneAtATimeRouter(substrate.url, SERVICE_S, QUEUE_S) as router:
        params = rate_search(tmp_path, {"substrate": substrate.url, "router": router.url}, seed)
        _, gate = await tolerant(params, router)
    assert_found_within_resolution(gate, TRUE_RATE)


@pytest.mark.parametrize("seed", [2])
async def test_the_rate_search_finds_the_capacity_on_the_ate_wire(
    substrate: LocalSubstrateProcess, tmp_path: Path, seed: int
) -> None:
    with OneAtATimeRouter(substrate.url, SERVICE_S, QUEUE_S) as router:
        target = {"substrate": substrate.grpc_url, "router": router.url, "protocol": "ate"}
        params = rate_search(tmp_path, target, seed)
        campaign, gate = await tolerant(params, router)
    assert campaign.run.engine is not None
    assert type(campaign.run.engine.substrate).__name__ == "AteSubstrate"
    assert_found_within_resolution(gate, TRUE_RATE)


async def test_an_abort_during_the_search_ends_it_at_the_last_level_held(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    with OneAtATimeRouter(substrate.url, SERVICE_S, QUEUE_S) as router:
        params = rate_search(tmp_path, {"substrate": substrate.url, "router": router.url}, 3)
        # Trips once wakes outrun the stand-in (4x = 1.2 wakes/s).
        params = params.model_copy(
            update={
                "abort": params.abort.model_copy(
                    update={"rules": ["TimeToWake: failure_ratio < 0.2"], "sliding_seconds": 3}
                )
            }
        )
        campaign, gate = await tolerant(params, router)
    capacity = gate["capacity"]
    print(f"{capacity['reason']}; probes {probes_line(capacity)}")
    assert capacity["status"] == "aborted", capacity
    assert capacity["probes"][-1]["outcome"] == "aborted"
    held = [p["level"] for p in capacity["probes"] if p["outcome"] == "held"]
    assert capacity["level"] == max(held, default=capacity["anchor_level"])
    assert capacity["broke_at_level"] == capacity["probes"][-1]["level"]
    assert campaign.run.result is not None and campaign.run.result.leaks == []
    client = HttpSubstrate(substrate.url, token=TOKEN)
    try:
        assert await client.list_actors(campaign.run.atespace) == []
    finally:
        await client.aclose()


async def test_the_density_search_finds_the_resident_limit(tmp_path: Path) -> None:
    with LocalSubstrateProcess(
        workers=WORKERS,
        store=tmp_path / "store",
        token=TOKEN,
        templates={"test/density": "64Mi"},  # WORKERS × 64Mi: its memory limit
        park_timeout=1,  # a wake with no worker free is refused after 1 s
        log_path=tmp_path / "substrate.log",
    ) as proc:
        params = CampaignParams(
            target={"substrate": proc.url, "token": TOKEN, "template": "test/density"},
            script="smoke",
            think_scale=0.05,
            name="density",
            out=str(tmp_path / "runs"),
            hold_minutes=3 / 60,
            window_seconds=3,
            thresholds=["ResidentShortfall: events_per_s <= 0.02 * awake"],
            population={
                "sessions": 10,
                "awake": 2,
                "target_rps": 0.5,
                "spawn_rate": 50,
                "registration_quiet_seconds": 0.5,
            },
            cleanup={"stop_grace_seconds": 3},
            abort={"rules": [], "delay_seconds": 0},
            search={
                "threshold": "TimeToWake: failure_ratio < 0.05",
                "dimension": "awake",
                "start": 2,
                "max_level": 3,
                "resolution": 0.2,
                "settle_seconds": 2,
                "window_seconds": 3,
            },
        )
        campaign, gate = await tolerant(params)
    capacity = gate["capacity"]
    print(f"{capacity['reason']}; probes {probes_line(capacity)}")
    assert capacity["unit"] == "residents"
    assert capacity["status"] == "found", capacity["reason"]
    assert capacity["rate"] == WORKERS
    assert capacity["broke_at_rate"] > WORKERS
    assert campaign.run.result is not None and campaign.run.result.leaks == []
