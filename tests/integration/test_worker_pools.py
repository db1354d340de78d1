"""Worker pools end to end (docs/SPEC.md §2.6): a two-pool local substrate under a turnover
run keeps every actor on the pool its name drew, by the substrate's own record of where each
actor ran; a selector for a pool the substrate does not have is refused in one line, on the
JSON wire and on the ate wire, and ends a run as misconfigured instead of replacing actors."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import TurnoverPopulation
from agentsession_core.engine.worker_pools import PoolDraw
from agentsession_core.run.run import Run
from agentsession_core.substrate.ate.substrate import AteSubstrate
from agentsession_core.substrate.errors import FailureClass, SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.protocol import NO_POOL_MATCH
from local_substrate.launcher import LocalSubstrateProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

POOLS = {"fast": 2, "slow": 2}
SESSIONS, AWAKE, RATE = 4, 2, 20.0
TICK_NS = 100_000_000  # 2 swaps every 0.1 s: each actor parked and woken 5 times a second
SWAPS_EACH = 20  # the wakes every actor must have had, all on its own pool
CAP_S = 90.0  # only a hang holds this long: the hold ends once every actor has them


def scrape(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        return str(answer.read().decode())


def balanced_seed() -> int:
    """The first seed whose draw puts two of the four actors on each pool, so both pools
    carry the turnover (the draw is a function of seed and name: the test can know it)."""
    for seed in range(100):
        draw = PoolDraw(seed, {"fast": 1, "slow": 1})
        if sorted(draw.pool_of(f"agent-{i}") for i in range(SESSIONS)).count("fast") == 2:
            return seed
    raise AssertionError("no balanced seed below 100")


async def test_every_actor_stays_on_its_pool(tmp_path: Path) -> None:
    seed = balanced_seed()
    with LocalSubstrateProcess(pools=POOLS, log_path=tmp_path / "substrate.log") as sub:
        params = RunParams(
            target={
                "substrate": sub.url,
                "atespace": "pools",
                "worker_pools": {"fast": 1, "slow": 1},
                "metrics_url": f"{sub.url}/metrics",  # server figures, per pool too
            },
            server={"interval_seconds": 1.0},
            script="smoke",
            population={
                "kind": "turnover",
                "sessions": SESSIONS,
                "awake": AWAKE,
                "target_rps": RATE,
                "registration_quiet_seconds": 0.5,
            },
            think_scale=0.02,
            seed=seed,
            out=str(tmp_path),
            name="pools",
        )
        run = Run(params)
        async with run:
            await run.preflight()
            await run.register()
            population = run.load.engine.population  # type: ignore[union-attr]
            assert isinstance(population, TurnoverPopulation)
            population.tick_ns = TICK_NS
            await run.fill()
            woken = asyncio.Event()

            async def count_wakes() -> None:
                """Until the substrate's own record shows every actor woken SWAPS_EACH times."""
                while not woken.is_set():
                    placed = (await asyncio.to_thread(sub.debug_workers))["placements"]
                    counts = [
                        sum(placed.get(f"pools/agent-{i}", {}).values()) for i in range(SESSIONS)
                    ]
                    if min(counts) >= SWAPS_EACH:
                        woken.set()
                    await asyncio.sleep(0.1)

            counting = asyncio.create_task(count_wakes())
            start, end, reason = await run.hold(
                CAP_S, should_stop=lambda: "woken" if woken.is_set() else None
            )
            counting.cancel()
            assert reason == "woken", reason
            assert run.load.server is not None
            await run.load.server.cut(start, end, index=0, level=1.0)  # as the CLI's run does
            run.finish("completed")
        placements = sub.debug_workers()["placements"]
        families = {f.name: f for f in text_string_to_metric_families(scrape(sub.url))}
    assert run.result is not None and run.result.status == "completed", run.result
    draw = PoolDraw(seed, {"fast": 1, "slow": 1})
    for i in range(SESSIONS):
        name = f"agent-{i}"
        ran_on = placements[f"pools/{name}"]
        # One pool only, the one the name drew, across every one of its wakes.
        assert list(ran_on) == [draw.pool_of(name)], (name, ran_on)
        assert ran_on[draw.pool_of(name)] >= SWAPS_EACH, (name, ran_on)
    # The substrate's figures carry the pool: each pool's wakes, its workers by state.
    wakes = Counter()
    for sample in families["agentsession_substrate_wakes"].samples:
        if sample.name.endswith("_total"):
            wakes[sample.labels["pool"]] += sample.value
    assert set(wakes) == set(POOLS) and min(wakes.values()) >= 2 * SWAPS_EACH, wakes
    workers = families["agentsession_substrate_workers"].samples
    assert {(s.labels["pool"], s.labels["state"]) for s in workers} == {
        (pool, state) for pool in POOLS for state in ("busy", "free")
    }
    # So do the run's server figures (server_summary.json): each pool's own wake series.
    server = json.loads((run.result.run_dir / "server_summary.json").read_text())
    figures = server["steady"]["figures"]
    for pool in POOLS:
        assert figures[f"wakes_{pool}_router"]["increase"] > 0, sorted(figures)
    # Rows carry the pool beside the overall wake row, which keeps its name.
    rows = {
        json.loads(line)["metric"]: json.loads(line)["measurements"]
        for line in (run.result.run_dir / "stats.jsonl").read_text().splitlines()
    }
    overall = rows["rps_TimeToWake"]["request_count"]
    per_pool = [rows[f"rps_TimeToWake:pool={p}"]["request_count"] for p in POOLS]
    assert sum(per_pool) == overall and min(per_pool) > 0, (overall, per_pool)


async def test_a_missing_pool_is_refused_in_one_line_on_both_wires(tmp_path: Path) -> None:
    with LocalSubstrateProcess(pools={"fast": 1}, log_path=tmp_path / "substrate.log") as sub:
        json_wire = HttpSubstrate(sub.url)
        ate_wire = AteSubstrate(sub.grpc_url, sub.url)
        lines = []
        try:
            for wire, client in (("json", json_wire), ("ate", ate_wire)):
                await client.ensure_atespace("lost")
                actor = f"{wire}-actor"
                created = await client.create_actor(
                    "lost", actor, "benchmark-workloads", "glutton", worker_selector={"pool": "gpu"}
                )
                assert created.status == "SUSPENDED"
                resume = client.resume_actor("lost", actor)
                probe = client.request("lost", actor, "ping", json={"message": "hi"})
                for call in (resume, probe):
                    with pytest.raises(SubstrateError) as refused:
                        await call
                    error = refused.value
                    assert error.code == "FAILED_PRECONDITION", error
                    assert error.failure_class is FailureClass.MISCONFIGURED, error
                    lines.append(str(error))
                await client.delete_actor("lost", actor)
        finally:
            await json_wire.aclose()
            await ate_wire.aclose()
        # A run whose worker_pools name that pool ends at once, in one line, replacing nothing.
        params = RunParams(
            target={"substrate": sub.url, "worker_pools": "gpu:1", "atespace": "lost-run"},
            script="smoke",
            population={"kind": "closed", "sessions": 2},
            think_scale=0.05,
            out=str(tmp_path),
            name="lost-pool",
        )
        run = Run(params, handle_signals=False)
        async with run:
            await run.preflight()
            await run.register()
            await run.fill()
            _, _, reason = await run.hold(20.0)
            run.finish("completed" if reason is None else "failed", reason)
        assert run.result is not None and run.result.status == "failed"
        lines.append(run.result.reason or "")
        assert lines[-1].startswith("misconfigured: "), lines[-1]
        assert run.load.engine is not None
        assert all(s.generation == 0 for s in run.load.engine.population.sessions)  # none replaced
    for line in lines:  # one line, naming what was asked and what there is
        assert "\n" not in line and NO_POOL_MATCH in line and "gpu" in line and "fast" in line
