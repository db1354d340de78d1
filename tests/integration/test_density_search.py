"""The capacity search's density frontier on a running campaign (docs/SPEC.md §6.7): the
probe hook samples the worker listing at the first level and at every probe, gate.json's
`capacity.density` and density.csv say the frontier, and

* on a FakeSubstrate whose workers are memory-bound the search stops where the memory says;
* on a FakeSubstrate without a listing the search runs on and density says "no worker
  listing";
* on the embedded local substrate with multi-actor workers (target.local_worker_capacity 4,
  local_worker_memory 3Gi, the template's 1 GiB each: ⌊3Gi / 1Gi⌋ = 3 actors a worker, 2
  workers) the density search stops at the 6 residents the memory predicts, within its
  resolution, and the listing shows 3 actors in each worker process.

As in test_capacity_search.py, the generator's void rule is off
(generator.void_when_saturated): this box is shared, and a saturated second here says
nothing of the substrate.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.run.run import Run
from agentsession_core.substrate.fake import FakeSubstrate
from agentsession_core.substrate.interface import Substrate
from agentsession_core.substrate.protocol import DEFAULT_TEMPLATE
from tests.integration.conftest import TOKEN

pytestmark = pytest.mark.timeout(120)

MI = 1 << 20


def density_search(
    out: Path,
    *,
    target: dict[str, Any] | None = None,
    target_rps: float = 0.5,
    **search: Any,
) -> CampaignParams:
    """A turnover of 12 sessions, 2 awake at 1x, whose resident set the search grows: 2x = 4
    residents, 4x = 8, then bisection."""
    return CampaignParams(
        target={"token": TOKEN, **(target or {})},
        script="smoke",
        think_scale=0.05,
        seed=7,
        name="density",
        out=str(out),
        hold_minutes=3 / 60,
        window_seconds=3,
        # Past the frontier every tick books at least one resident short: 1 event/s. Within
        # it a swap whose wake outlasts a tick books one: a 3 s window allows one.
        thresholds=["ResidentShortfall: events_per_s < 0.5"],
        population={
            "sessions": 12,
            "awake": 2,
            "target_rps": target_rps,
            "spawn_rate": 50,
            "registration_quiet_seconds": 0.5,
        },
        cleanup={"stop_grace_seconds": 3},
        abort={"rules": [], "delay_seconds": 0},
        generator={"void_when_saturated": False},
        search={
            "threshold": "TimeToWake: failure_ratio < 0.05",
            "dimension": "awake",
            "start": 2,
            "max_level": 4,
            "resolution": 0.2,
            "settle_seconds": 1,
            "window_seconds": 3,
            **search,
        },
    )


async def tolerant(
    params: CampaignParams, substrate: Substrate | None = None
) -> tuple[Campaign, dict[str, Any]]:
    """The campaign's phases, `substrate` driven instead of the target's."""
    run = Run(params, substrate=substrate, handle_signals=False)
    async with run:
        campaign = Campaign(params, run)
        await run.preflight()
        await run.register()
        await run.fill()
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


def said(capacity: dict[str, Any]) -> str:
    probes = ", ".join(f"{p['rate']:g} {p['outcome']}" for p in capacity["probes"])
    return f"{capacity['reason']}; probes {probes}; {capacity['density']['line']}"


def density_row(campaign: Campaign) -> dict[str, str]:
    assert campaign.run.result is not None
    path = campaign.run.result.run_dir / "density.csv"
    (row,) = list(csv.DictReader(path.open()))
    manifest = json.loads((campaign.run.result.run_dir / "manifest.json").read_text())
    assert "density.csv" in json.dumps(manifest)  # sealed with the run's other files
    return row


async def test_a_memory_bound_fake_stops_the_search_where_the_memory_says(tmp_path: Path) -> None:
    # 2 workers of 4 slots, but 200Mi holds 3 actors of 64Mi: 6 residents and no more.
    fake = FakeSubstrate({DEFAULT_TEMPLATE: 64 * MI}, workers=2, worker_capacity=4,
                         worker_memory=200 * MI)  # fmt: skip
    params = density_search(tmp_path, nodes=1, node_vcpus=2, node_memory="4Gi")
    campaign, gate = await tolerant(params, fake)
    capacity = gate["capacity"]
    print(said(capacity))
    density = capacity["density"]
    assert capacity["status"] == "found", capacity["reason"]
    assert density["status"] == "measured", density
    prediction = density["prediction"]
    assert prediction["actors"] == 6 and prediction["bound"] == "memory"
    assert prediction["within_resolution"] is True, density["line"]
    # One listing at the first level, one per probe: the hook ran at each.
    assert density["samples"][0]["probe"] is None
    assert len(density["samples"]) == 1 + len(capacity["probes"])
    frontier = density["frontier"]
    assert frontier["level"] == capacity["level"] and frontier["actors"] <= 6
    assert frontier["actors_per_vcpu"] == pytest.approx(frontier["actors"] / 2)
    assert 5 <= density["peak"]["actors"] <= 6  # a broken probe fills the memory (a listing
    # is one instant: a swap's wake may just have been refused)
    row = density_row(campaign)
    assert row["actors_per_node"] == f"{float(frontier['actors'])}" and row["status"] == "measured"


async def test_a_substrate_without_a_listing_still_searches(tmp_path: Path) -> None:
    params = density_search(tmp_path, max_level=2)  # one probe is enough here
    campaign, gate = await tolerant(params, FakeSubstrate({DEFAULT_TEMPLATE: 64 * MI}))
    capacity = gate["capacity"]
    assert capacity["status"] == "above", capacity["reason"]  # nothing bounds the fake
    density = capacity["density"]
    assert density["status"] == "no worker listing" and "UNIMPLEMENTED" in density["why"]
    assert density["frontier"] is None and density["samples"] == []
    assert density_row(campaign)["status"] == "no worker listing"


async def test_the_density_search_on_multi_actor_workers_finds_the_memory_frontier(
    tmp_path: Path,
) -> None:
    """The local substrate's default template reserves 1 GiB an actor (its memory limit);
    workers of 4 slots and 3 GiB hold 3 each, so 2 workers hold 6 residents."""
    params = density_search(
        tmp_path,
        target={"local_workers": 2, "local_worker_capacity": 4, "local_worker_memory": "3Gi"},
        start=3,  # 6 residents first: the frontier in three probes either way
    )
    campaign, gate = await tolerant(params)
    capacity = gate["capacity"]
    print(said(capacity))
    density = capacity["density"]
    assert capacity["unit"] == "residents"
    assert capacity["status"] == "found", capacity["reason"]
    assert density["status"] == "measured", density
    prediction = density["prediction"]
    assert prediction["actors"] == 6 and prediction["bound"] == "memory", prediction
    # The search stops at the frontier the memory predicts, within its resolution.
    assert prediction["within_resolution"] is True, density["line"]
    assert capacity["rate"] <= 6 < capacity["broke_at_rate"] + 1, said(capacity)
    frontier = density["frontier"]
    assert frontier["workers"] == 2 and frontier["capacity"] == 8
    # Several actors in one worker process: the listing's allocated counts, not sessions.
    # A listing is one instant: at a broken probe a swap's wake may just have been refused,
    # so the fullest listing holds the 6 that fit or one fewer, never more.
    assert 5 <= density["peak"]["actors"] <= 6, density["samples"]
    peak = max(density["samples"], key=lambda s: s["actors"])
    assert peak["actors_per_pod_p99"] == 3 and peak["workers"] == 2
    node = density["node"]
    assert node["nodes"] == 1 and "os.cpu_count()" in node["source"]["vcpus"]
    assert campaign.run.result is not None and campaign.run.result.leaks == []
    row = density_row(campaign)
    assert row["predicted_actors"] == "6" and row["actors_per_gb_ram"]


async def test_a_probe_too_short_for_the_slo_minimum_is_void_not_a_break(tmp_path: Path) -> None:
    """Issue 38: the capacity preset's SLO wants 50 wakes a window; a 6 s probe at 2 swaps/s
    holds about 12. Booked `broke`, such probes stopped the density search at 4 of the 6
    residents the memory predicts, and the console said `pass`. The probe is void, the search
    ends void, and the reason says what to lengthen."""
    params = density_search(
        tmp_path,
        target={"local_workers": 2, "local_worker_capacity": 4, "local_worker_memory": "3Gi"},
        threshold="TimeToWake: p99 < 2s (min 50)",
        window_seconds=6,
        target_rps=2.0,
    )
    _, gate = await tolerant(params)
    capacity = gate["capacity"]
    print(said(capacity))
    assert capacity["status"] == "void", said(capacity)
    (probe,) = capacity["probes"]  # a void probe ends the search
    assert probe["outcome"] == "void" and probe["figure"] is None, probe
    assert probe["why"].startswith("too few samples to judge the SLO: "), probe["why"]
    assert "< its min 50 in the probe's 6 s window" in probe["why"]
    assert capacity["broke_at_level"] is None and capacity["level"] is None
    assert "lengthen search.window_seconds" in capacity["reason"], capacity["reason"]
    assert "saturated" not in capacity["reason"]  # not blamed on the generator
