"""The capacity search's density frontier (campaign/density.py, docs/SPEC.md §6.7): the
FakeSubstrate's modelled workers and their listing, upstream's figures (actors per worker
p50/p90/p99, per node, per vCPU, per GiB), the memory's prediction, a substrate without a
listing, and gate.json's `capacity.density` through the gate's reader, the report and
density.csv — old gate.json files without it still read."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.capacity import CapacitySearch
from agentsession_core.campaign.density import (
    GIB,
    NO_LISTING,
    DensityFrontier,
    NodeResources,
    WorkerSample,
    memory_prediction,
    nearest_rank,
    node_resources,
)
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import parse
from agentsession_core.judge.gate import gate_document
from agentsession_core.judge.gate_document import GateDocument, GateInputError
from agentsession_core.judge.thresholds import parse_threshold
from agentsession_core.judge.verdict import ThresholdResult, WindowVerdict
from agentsession_core.output.stats_files import render_density_csv
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.fake import FakeSubstrate
from agentsession_core.substrate.interface import WorkerInfo
from agentsession_core.substrate.protocol import DEFAULT_TEMPLATE

MI = 1 << 20
SPACE = "dens"


def worker(name: str, allocated: int, capacity: int = 4, memory: int | None = None) -> WorkerInfo:
    return WorkerInfo(name, None, capacity, allocated, memory_limit_bytes=memory)


async def woken(fake: FakeSubstrate, count: int) -> list[str]:
    """Create `count` actors and wake each through the router; the names of those that
    woke (a wake with no room is refused RESOURCE_EXHAUSTED)."""
    await fake.ensure_atespace(SPACE)
    ns, name = DEFAULT_TEMPLATE
    up = []
    for i in range(count):
        await fake.create_actor(SPACE, f"a{i}", ns, name)
        try:
            await fake.resume_actor(SPACE, f"a{i}")
        except SubstrateError as exc:
            assert exc.code == "RESOURCE_EXHAUSTED", exc
            continue
        up.append(f"a{i}")
    return up


# --------------------------------------------------------------------------- the fake's workers
async def test_the_fake_places_actors_by_free_room_and_lists_them() -> None:
    fake = FakeSubstrate(workers=3, worker_capacity=2)
    assert len(await woken(fake, 7)) == 6  # 3 workers × 2: the seventh finds no room
    listing = await fake.list_workers()
    assert [(w.name, w.capacity, w.allocated) for w in listing] == [
        ("fake-0", 2, 2),
        ("fake-1", 2, 2),
        ("fake-2", 2, 2),
    ]
    assert sorted(a for w in listing for a in w.actors) == sorted(f"{SPACE}/a{i}" for i in range(6))
    # Spread by free room: the first three wakes went one to each worker.
    info = [await fake.get_actor(SPACE, f"a{i}") for i in range(3)]
    assert sorted(a.worker or "" for a in info) == ["fake-0", "fake-1", "fake-2"]
    # A suspend frees its slot; the parked seventh then wakes.
    await fake.suspend_actor(SPACE, "a0")
    assert sum(w.allocated for w in await fake.list_workers()) == 5
    await fake.resume_actor(SPACE, "a6")
    assert sum(w.allocated for w in await fake.list_workers()) == 6


async def test_a_worker_refuses_a_placement_past_its_memory() -> None:
    # 4 slots a worker, but 160Mi holds only two actors of 64Mi.
    fake = FakeSubstrate({DEFAULT_TEMPLATE: 64 * MI}, workers=2, worker_capacity=4,
                         worker_memory=160 * MI)  # fmt: skip
    assert len(await woken(fake, 6)) == 4
    assert [w.allocated for w in await fake.list_workers()] == [2, 2]
    assert fake.crash(SPACE, "a0")  # a crash frees its memory too
    assert sum(w.allocated for w in await fake.list_workers()) == 3


async def test_a_draining_worker_takes_no_new_actor() -> None:
    fake = FakeSubstrate(workers=2, worker_capacity=2)
    fake.drain("fake-1")
    assert len(await woken(fake, 3)) == 2
    assert [(w.allocated, w.state) for w in await fake.list_workers()] == [
        (2, "active"),
        (0, "draining"),
    ]


async def test_a_fake_without_workers_has_no_listing() -> None:
    with pytest.raises(SubstrateError) as caught:
        await FakeSubstrate().list_workers()
    assert caught.value.code == "UNIMPLEMENTED"
    # ...and places nothing: every wake succeeds, as before workers were modelled.
    assert len(await woken(FakeSubstrate(), 20)) == 20


# --------------------------------------------------------------------------- the figures
@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([4, 4, 4, 4], 0.5, 4),
        ([1, 2, 3, 4], 0.5, 2),
        ([1, 2, 3, 4], 0.9, 4),
        (list(range(1, 101)), 0.99, 99),
        (list(range(1, 101)), 0.90, 90),
        ([7], 0.99, 7),
        ([], 0.5, None),
    ],
)
def test_percentiles_over_workers_are_counts_some_worker_held(
    values: list[int], q: float, expected: int | None
) -> None:
    assert nearest_rank(values, q) == expected


def test_per_node_vcpu_and_gib_divide_the_actors_the_workers_hold() -> None:
    node = NodeResources(nodes=2, vcpus=4.0, memory_bytes=8 * GIB)
    # 24 actors over 8 workers, unevenly: percentiles over workers, never over sessions.
    counts = [0, 1, 2, 3, 4, 4, 5, 5]
    sample = WorkerSample(2.0, 0.0, 1, tuple(worker(f"w{i}", n, 5) for i, n in enumerate(counts)))
    figures = sample.figures(node)
    assert sample.actors == 24 and sample.capacity == 40
    assert figures["actors_per_node"] == 12.0  # 24 / 2 nodes
    assert figures["actors_per_vcpu"] == 3.0  # 24 / (2 × 4)
    assert figures["actors_per_gb_ram"] == 1.5  # 24 / (2 × 8 GiB)
    assert (figures["actors_per_pod_p50"], figures["actors_per_pod_p90"]) == (3, 5)
    assert figures["actors_per_pod_p99"] == 5
    unknown = sample.figures(NodeResources(None, None, None))
    assert unknown["actors_per_node"] is None and unknown["actors_per_vcpu"] is None
    assert unknown["actors_per_pod_p50"] == 3  # the listing alone still says these


def test_the_node_is_this_machine_for_the_embedded_substrate_and_stated_for_a_remote() -> None:
    local = node_resources(None, None, None, embedded=True)
    assert local.nodes == 1 and local.vcpus == float(os.cpu_count() or 0)
    assert local.memory_bytes and local.memory_bytes > 64 * MI
    assert "os.cpu_count()" in local.source["vcpus"]
    remote = node_resources(None, None, None, embedded=False)
    assert (remote.nodes, remote.vcpus, remote.memory_bytes) == (None, None, None)
    assert "search.node_vcpus" in remote.source["vcpus"]
    stated = node_resources(3, 16.0, 64 * GIB, embedded=False)
    assert stated.total_vcpus == 48.0 and stated.total_gib == 192.0
    assert stated.source == {
        "nodes": "search.nodes",
        "vcpus": "search.node_vcpus",
        "memory": "search.node_memory",
    }


def test_the_node_settings_are_search_parameters() -> None:
    params = parse(
        CampaignParams,
        {"search": {"threshold": "TimeToWake: p99 < 2s", "nodes": 2, "node_memory": "16Gi"}},
    )
    assert params.search.nodes == 2 and params.search.node_memory == 16 * GIB
    from agentsession_core.errors import UsageError

    with pytest.raises(UsageError, match=r"^parameter search\.node_memory"):
        parse(
            CampaignParams, {"search": {"threshold": "TimeToWake: p99 < 2s", "node_memory": "lots"}}
        )


# --------------------------------------------------------------------------- the prediction
def test_the_memory_predicts_min_of_capacity_and_memory_over_template_per_worker() -> None:
    memory_bound = memory_prediction([worker("a", 0, 8, 200 * MI)] * 4, 64 * MI)
    assert memory_bound is not None
    assert (memory_bound.actors, memory_bound.bound) == (12, "memory")  # 4 × ⌊200/64⌋
    assert "4 workers × min(capacity 8, 200Mi / 64Mi) = 3" in memory_bound.why
    capacity_bound = memory_prediction([worker("a", 0, 2, 1024 * MI)] * 3, 64 * MI)
    assert capacity_bound is not None and (capacity_bound.actors, capacity_bound.bound) == (
        6,
        "capacity",
    )
    mixed = memory_prediction([worker("a", 0, 8, 128 * MI), worker("b", 0, 1, 1024 * MI)], 64 * MI)
    assert mixed is not None and (mixed.actors, mixed.bound) == (3, "memory and capacity")
    no_limit = memory_prediction([worker("a", 0, 4, 128 * MI)], None)
    assert no_limit is not None and no_limit.actors == 4 and "capacity alone" in no_limit.why
    draining = WorkerInfo("d", None, 4, 0, state="draining", memory_limit_bytes=1024 * MI)
    only = memory_prediction([worker("a", 0, 4, 1024 * MI), draining], 64 * MI)
    assert only is not None and only.actors == 4  # a draining worker takes no placement
    assert memory_prediction([], 64 * MI) is None


# --------------------------------------------------------------------------- sampling
async def test_sampling_a_fake_gives_the_frontier_and_how_close_the_memory_came() -> None:
    fake = FakeSubstrate({DEFAULT_TEMPLATE: 64 * MI}, workers=2, worker_capacity=4,
                         worker_memory=200 * MI)  # fmt: skip
    density = DensityFrontier(NodeResources(1, 2.0, 4 * GIB))
    await woken(fake, 4)
    await density.sample(fake, level=1.0, probe=None, template_bytes=64 * MI)
    await woken_more(fake, 2)
    await density.sample(fake, level=2.0, probe=3, template_bytes=64 * MI)
    doc = density.document(
        2.0, frontier_rate=6.0, unit="residents", found_residents=6.0, resolution=0.1
    )
    assert doc["status"] == "measured" and doc["template_memory_bytes"] == 64 * MI
    frontier = doc["frontier"]
    assert frontier["actors"] == 6 and frontier["workers"] == 2 and frontier["capacity"] == 8
    assert frontier["actors_per_vcpu"] == 3.0 and frontier["actors_per_gb_ram"] == 1.5
    assert frontier["actors_per_pod_p50"] == 3 and frontier["actors_per_pod_p99"] == 3
    prediction = doc["prediction"]
    assert prediction["actors"] == 6 and prediction["bound"] == "memory"
    assert prediction["within_resolution"] is True and prediction["ratio"] == 1.0
    assert [s["actors"] for s in doc["samples"]] == [4, 6]
    assert doc["samples"][0]["probe"] is None and doc["peak"]["actors"] == 6
    assert "the memory predicts 6 (memory-bound)" in doc["line"], doc["line"]
    # A frontier well short of the prediction is said to be outside.
    short = density.document(
        1.0, frontier_rate=4.0, unit="residents", found_residents=4.0, resolution=0.1
    )
    assert short["prediction"]["within_resolution"] is False
    assert "outside the resolution" in short["line"]


async def woken_more(fake: FakeSubstrate, count: int) -> None:
    ns, name = DEFAULT_TEMPLATE
    base = len(fake._actors)
    for i in range(base, base + count):
        await fake.create_actor(SPACE, f"a{i}", ns, name)
        await fake.resume_actor(SPACE, f"a{i}")


async def test_a_substrate_without_a_listing_says_so_and_is_asked_once() -> None:
    fake = FakeSubstrate()
    density = DensityFrontier(NodeResources(1, 2.0, 4 * GIB))
    assert await density.sample(fake, level=1.0, probe=None, template_bytes=None) is None
    assert not density.sampling and density.missing is not None
    assert density.missing.startswith(NO_LISTING) and "UNIMPLEMENTED" in density.missing
    assert await density.sample(fake, level=2.0, probe=1, template_bytes=None) is None
    doc = density.document(2.0, frontier_rate=2.0, unit="swaps/s", found_residents=None,
                           resolution=0.1)  # fmt: skip
    assert doc["status"] == NO_LISTING and doc["frontier"] is None and doc["samples"] == []
    assert doc["line"] == density.missing
    # No substrate client at all (a sharded run's coordinator): the same, said so.
    none = DensityFrontier(NodeResources(None, None, None))
    await none.sample(None, level=1.0, probe=None, template_bytes=None)
    assert none.missing is not None and "no substrate client" in none.missing


class FlakyListing(FakeSubstrate):
    """A listing that fails once with an ordinary error: that sample says so, the next
    one is taken."""

    def __init__(self) -> None:
        super().__init__(workers=1, worker_capacity=2)
        self.calls = 0

    async def list_workers(self) -> list[WorkerInfo]:
        self.calls += 1
        if self.calls == 1:
            raise SubstrateError("UNAVAILABLE", "control plane restarting")
        return await super().list_workers()


async def test_a_failed_listing_is_that_samples_only() -> None:
    fake = FlakyListing()
    density = DensityFrontier(NodeResources(1, 2.0, 4 * GIB))
    failed = await density.sample(fake, level=1.0, probe=None, template_bytes=None)
    assert failed is not None and failed.error and "UNAVAILABLE" in failed.error
    assert density.sampling
    await density.sample(fake, level=2.0, probe=1, template_bytes=None)
    doc = density.document(2.0, frontier_rate=2.0, unit="swaps/s", found_residents=None,
                           resolution=0.1)  # fmt: skip
    assert doc["status"] == "measured" and doc["frontier"]["actors"] == 0
    assert doc["samples"][0]["error"] and doc["samples"][1]["error"] is None
    # The first level's listing failed: a frontier there is not measured.
    at_first = density.document(1.0, frontier_rate=1.0, unit="swaps/s", found_residents=None,
                                resolution=0.1)  # fmt: skip
    assert at_first["frontier"] is None and "no listing at 1x" in at_first["line"]


# --------------------------------------------------------------------------- gate.json
def probe_verdict(index: int, level: float, outcome: str) -> WindowVerdict:
    slo = ThresholdResult("TimeToWake: p99 < 2s", 900.0, 40, outcome == "pass", "")
    return WindowVerdict(index, level, 0.0, 1.0, outcome, [slo])  # type: ignore[arg-type]


async def density_gate(fake: FakeSubstrate) -> dict[str, Any]:
    """A density search (awake 2, 1x held) whose probes sample `fake`: 2x (4 residents)
    holds, 4x (8) breaks, 3x (6) holds, 3.5x (7) breaks, 3x holds again (the confirmation);
    gate.json as the campaign writes it."""
    params = parse(
        CampaignParams,
        {
            "population": {"sessions": 20, "awake": 2},
            "target": {"substrate": "http://127.0.0.1:1"},
            "search": {
                "threshold": "TimeToWake: p99 < 2s",
                "dimension": "awake",
                "max_level": 4,
                "resolution": 0.1,
                "nodes": 1,
                "node_vcpus": 2,
                "node_memory": "4Gi",
            },
        },
    )
    search = CapacitySearch.of(params, parse_threshold("TimeToWake: p99 < 2s"))
    assert search.density is not None
    search.start(1.0, None)
    await woken(fake, 2)
    await search.density.sample(fake, level=1.0, probe=None, template_bytes=64 * MI)
    for i, (level, outcome) in enumerate(
        [(2.0, "pass"), (4.0, "break"), (3.0, "pass"), (3.5, "break"), (3.0, "pass")]
    ):  # the last: the confirmation of 3x
        assert search.next_level() == level
        wanted = int(2 * level)
        held = sum(w.allocated for w in await fake.list_workers())
        await woken_more(fake, max(0, min(wanted, 6) - held))  # the workers hold 6 at most
        await search.density.sample(fake, level=level, probe=i + 1, template_bytes=64 * MI)
        search.record(level, probe_verdict(i + 1, level, outcome))
    assert search.next_level() is None
    doc = gate_document([], abort_reason=None, run_status="completed", capacity=search.document())
    doc["windows"] = [{"index": 0, "outcome": "pass", "level": 1.0, "missed": []}]
    return json.loads(json.dumps(doc))  # as a reader finds it on disk


async def test_gate_json_carries_the_density_and_reads_back() -> None:
    fake = FakeSubstrate({DEFAULT_TEMPLATE: 64 * MI}, workers=2, worker_capacity=4,
                         worker_memory=200 * MI)  # fmt: skip
    doc = await density_gate(fake)
    capacity = doc["capacity"]
    assert capacity["status"] == "found" and capacity["rate"] == 6.0  # 3x of awake 2
    density = capacity["density"]
    assert density["status"] == "measured"
    assert density["frontier"]["level"] == 3.0 and density["frontier"]["actors"] == 6
    assert density["frontier"]["actors_per_node"] == 6.0
    assert density["prediction"]["actors"] == 6 and density["prediction"]["found"] == 6.0
    assert density["prediction"]["within_resolution"] is True
    assert density["node"]["source"]["vcpus"] == "search.node_vcpus"
    assert isinstance(GateDocument.read(doc, "gate.json"), GateDocument)
    doc["capacity"]["density"]["frontier"]["actors_per_vcpu"] = "many"
    with pytest.raises(GateInputError, match=r"capacity\.density\.frontier\.actors_per_vcpu"):
        GateDocument.read(doc, "gate.json")
    doc["capacity"]["density"] = ["not", "an", "object"]
    with pytest.raises(GateInputError, match=r"capacity\.density is"):
        GateDocument.read(doc, "gate.json")


def test_an_older_gate_json_without_density_still_reads(tmp_path: Path) -> None:
    from agentsession_core.report.page import render_report
    from tests.unit.report_run import build_run
    from tests.unit.test_capacity_search import knee_capacity, with_capacity

    old = knee_capacity()
    assert "density" not in old
    doc = gate_document([], abort_reason=None, run_status="completed", capacity=old)
    assert isinstance(GateDocument.read(doc, "old gate.json"), GateDocument)
    build_run(tmp_path)
    with_capacity(tmp_path, old)
    page = render_report(tmp_path)
    knee = page.split('<section id="capacity">')[1].split("</section>")[0]
    assert "Density at the frontier" not in knee and "3 swaps/s (3x" in knee


def test_the_report_shows_the_density_frontier(tmp_path: Path) -> None:
    from agentsession_core.report.page import render_report
    from tests.unit.report_run import build_run
    from tests.unit.test_capacity_search import with_capacity

    fake = FakeSubstrate({DEFAULT_TEMPLATE: 64 * MI}, workers=2, worker_capacity=4,
                         worker_memory=200 * MI)  # fmt: skip
    doc = asyncio.run(density_gate(fake))  # build_run runs its own loop
    build_run(tmp_path)
    with_capacity(tmp_path, doc["capacity"])
    page = render_report(tmp_path)
    section = page.split('<section id="capacity">')[1].split("</section>")[0]
    assert "Density at the frontier" in section
    assert "actors per vCPU</td><td>3<" in section
    assert "actors per worker p99</td><td>3<" in section
    assert "the memory predicts</td><td>6<" in section and "within resolution" in section
    assert "search.node_vcpus" in section  # where the node's figures came from
    assert "<tr><td>first level</td><td>1x</td>" in section  # before the first probe


async def test_density_csv_has_upstreams_columns_and_the_frontiers_row() -> None:
    fake = FakeSubstrate({DEFAULT_TEMPLATE: 64 * MI}, workers=2, worker_capacity=4,
                         worker_memory=200 * MI)  # fmt: skip
    doc = await density_gate(fake)
    rows = list(csv.DictReader(io.StringIO(render_density_csv(doc["capacity"]["density"]))))
    assert len(rows) == 1
    (row,) = rows
    # Upstream's names first, then ours (docs/SPEC.md §7, density.csv).
    assert list(row) == [
        "actors_per_node",
        "actors_per_vcpu",
        "actors_per_gb_ram",
        "actors_per_pod_p50",
        "actors_per_pod_p90",
        "actors_per_pod_p99",
        "actors",
        "workers",
        "nodes",
        "vcpus_per_node",
        "memory_bytes_per_node",
        "level",
        "rate",
        "unit",
        "predicted_actors",
        "predicted_bound",
        "status",
    ]
    assert float(row["actors_per_node"]) == 6.0 and float(row["actors_per_gb_ram"]) == 1.5
    assert row["actors_per_pod_p90"] == "3" and row["predicted_actors"] == "6"
    assert row["status"] == "measured" and row["unit"] == "residents"
    none = render_density_csv(
        DensityFrontier(NodeResources(None, None, None), missing=f"{NO_LISTING}: x").document(
            None, frontier_rate=None, unit="swaps/s", found_residents=None, resolution=0.1
        )
    )
    (empty,) = list(csv.DictReader(io.StringIO(none)))
    assert empty["actors_per_node"] == "" and empty["status"] == NO_LISTING
