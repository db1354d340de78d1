"""Sharded runs (engine/shards/) on a real Dask cluster of worker processes, against real
local substrates over real sockets:

* three shards: the merged stream's counts are exactly the sum of what each shard booked;
* a shard's worker killed mid-hold with `min_shards: 2`: noticed at once, the window is void
  naming the shard, the run ends void, and the coordinator deletes the lost shard's actors
  (none leaked);
* a shard's worker killed mid-hold with the default `min_shards` (1 of 2): its actors are
  deleted, its sessions are re-created on the survivor under their own names, the window the
  loss cut is void, the later windows are judged on the full load, no session twice;
* the substrate killed and restarted on the same store, on both wires: the coordinator's one
  probe sees it back and every shard replaces the residents it lost;
* the substrate killed: an abort rule on the merged stream trips within 3 s, and every
  shard stops.

The module shares one LocalCluster (3 worker processes), reached by its scheduler address
as an existing cluster would be (generator.cluster); the flow tests
(test_campaign_flow.py) use the default, a local cluster per run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine import watchdog
from agentsession_core.engine.params import parse
from agentsession_core.engine.shards import files, open_run
from agentsession_core.engine.shards.coordinator import ShardedRun
from agentsession_core.measure.stats import CONTROL_KIND, ROUTER_KIND
from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrate

from .conftest import TOKEN
from .dask_cluster import local_scheduler
from .test_engine_recovery import Substrate, leftovers

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    with local_scheduler(3) as address:
        yield address


def campaign_params(url: str, out: Path, scheduler: str, **overrides) -> CampaignParams:
    values = {
        "name": "sharded",
        "tag": "test",
        "out": str(out),
        "seed": 5,
        "script": "smoke",
        "think_scale": 0.05,
        "hold_minutes": 0.5,
        "window_seconds": 30,
        "thresholds": [],
        "abort": {"rules": []},
        "target": {"substrate": url, "token": TOKEN, "request_timeout_seconds": 5},
        "population": {
            "kind": "turnover",
            "sessions": 4,
            "awake": 2,
            "target_rps": 2,
            "registration_quiet_seconds": 0.5,
        },
        "cleanup": {"timeout_seconds": 20, "stop_grace_seconds": 1},
        "generator": {"shards": 2, "cluster": scheduler},
    }
    for key, value in overrides.items():
        values[key] = {**values[key], **value} if isinstance(values.get(key), dict) else value
    return parse(CampaignParams, values)


async def leftover_actors(url: str, atespace: str, token: str | None = TOKEN) -> list[str]:
    client = HttpSubstrate(url, token=token)
    try:
        return [a.name for a in await client.list_actors(atespace)]
    finally:
        await client.aclose()


def status_of(run: ShardedRun) -> dict:
    assert run.result is not None
    return json.loads((run.result.run_dir / "status.json").read_text())


async def test_three_shards_merge_into_exact_sums(substrate, scheduler, tmp_path):
    params = campaign_params(
        substrate.url,
        tmp_path,
        scheduler,
        population={"kind": "closed", "sessions": 3, "awake": 0},
        generator={"shards": 3},
        target={"metrics_url": f"{substrate.url}/metrics"},  # the substrate's own figures
    )
    run = open_run(params, handle_signals=False)
    assert isinstance(run, ShardedRun)
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        start, end, reason = await run.hold(4.0)
        assert reason is None and run.server is not None
        await run.server.cut(start, end, index=0)
        run.finish()
    assert run.result is not None and run.result.status == "completed", run.result
    merged = run.recorder.totals().rows
    summed: dict[str, int] = {}
    for final in run.finals.values():
        for key, count in final["counts"].items():
            summed[key] = summed.get(key, 0) + count
    assert len(run.finals) == 3
    by_key = {"/".join(key): stats.count for key, stats in merged.items()}
    assert by_key == summed  # every row: the merged count is exactly the shards' sum
    assert summed[f"{CONTROL_KIND}/CreateActor"] == 3 and summed[f"{ROUTER_KIND}/FirstTouch"] == 3
    assert sum(n for key, n in summed.items() if key.startswith(f"{ROUTER_KIND}/Step_")) > 3
    status = status_of(run)
    assert [s["state"] for s in status["shards"]] == ["stopped"] * 3
    assert status["actors_created"] == status["actors_deleted"] == 3
    assert status["leaked_actors"] == [] and run.result.leaks == []
    run_dir = run.result.run_dir
    for k in range(3):
        health = json.loads((run_dir / f"shards/{k}/health.json").read_text())
        assert health["shard"] == k and health["monitored"] and health["sessions"] == 1
    server = json.loads((run_dir / "server_summary.json").read_text())  # docs/SPEC.md §5.9
    assert server["sampling"]["failed"] == 0  # the token went along: same origin
    assert server["windows"][0]["figures"]["wakes"]["increase"] > 0
    assert verify_manifest(run_dir) == []
    assert await leftover_actors(substrate.url, status["atespace"]) == []


async def test_a_killed_shard_voids_its_window_names_itself_and_leaks_nothing(
    substrate, scheduler, tmp_path
):
    # Both shards needed: losing one ends the run (the default carries its sessions on).
    params = campaign_params(
        substrate.url, tmp_path, scheduler, generator={"shards": 2, "min_shards": 2}
    )
    run = open_run(params, handle_signals=False)
    assert isinstance(run, ShardedRun)
    async with run:
        campaign = Campaign(params, run)
        await run.preflight()
        await run.register()
        await run.fill()
        window = asyncio.create_task(campaign.hold_window(0))
        await asyncio.sleep(3.0)
        assert not window.done()
        names_before = set(run.stream.names[1]) if run.stream else set()
        os.kill(run.shard_info[1]["pid"], signal.SIGKILL)
        killed = time.monotonic()
        verdict = await asyncio.wait_for(window, 20)
        noticed = time.monotonic() - killed
        campaign.finish()
    print(f"lost shard noticed and the hold ended {noticed:.2f}s after the kill")
    assert noticed < 5.0
    assert verdict is not None and verdict.outcome == "void", verdict
    assert "shard 1 lost" in (verdict.void_reason or ""), verdict.void_reason
    assert run.result is not None and run.result.status == "void"
    assert names_before, "the shard published its actor names before it died"
    status = status_of(run)
    assert [s["state"] for s in status["shards"]] == ["stopped", "lost"]
    assert status["leaked_actors"] == []
    assert await leftover_actors(substrate.url, status["atespace"]) == []  # 0 actors leaked
    gate = json.loads((run.result.run_dir / "gate.json").read_text())
    assert gate["verdict"] == "void" and "shard 1 lost" in gate["reason"], gate["reason"]
    assert verify_manifest(run.result.run_dir) == []


async def test_an_abort_rule_trips_within_3s_of_the_substrate_dying(scheduler, tmp_path):
    async with LocalSubstrate(workers=4, store=tmp_path / "store") as local:
        params = campaign_params(
            local.url,
            tmp_path,
            scheduler,
            target={"token": None},
            population={"target_rps": 4},
            abort={
                "rules": ["TimeToWake: failure_ratio < 0.5 (min 3)"],
                "sliding_seconds": 2,
                "delay_seconds": 2,
            },
        )
        run = open_run(params, handle_signals=False)
        assert isinstance(run, ShardedRun)
        async with run:
            campaign = Campaign(params, run)
            await run.preflight()
            await run.register()
            await run.fill()
            window = asyncio.create_task(campaign.hold_window(0))
            await asyncio.sleep(5.0)
            assert not window.done(), campaign.monitor and campaign.monitor.reason
            local.kill()
            killed = time.monotonic()
            while campaign.monitor is None or campaign.monitor.reason is None:
                assert time.monotonic() - killed < 10, "no abort within 10 s"
                await asyncio.sleep(0.02)
            tripped = time.monotonic() - killed
            verdict = await asyncio.wait_for(window, 20)
            campaign.finish()
    print(f"abort rule tripped {tripped:.2f}s after the substrate was killed")
    assert tripped < 3.0, f"abort rule tripped {tripped:.1f}s after the kill"
    assert verdict is not None and verdict.outcome == "aborted"
    assert run.result is not None and run.result.status == "aborted"
    status = status_of(run)
    assert [s["state"] for s in status["shards"]] == ["stopped", "stopped"]  # every shard
    assert all(s["phase"] == "done" for s in status["shards"])


async def test_two_shards_gauges_and_stats_book_the_same_resident_set(scheduler, tmp_path):
    """Issue 18: the shards sampled their gauges 20 ms after each second, when every tick's
    swaps (on whole seconds: the common t0 is one) still had their wakes in flight, and the
    merged gauges.jsonl summed a gap per swap that the ticks' ResidentShortfall never saw.
    A slow snapshot restore (100 ms per wake) makes that certain. Now the shards sample
    mid-second and the two books agree within the bound of docs/SPEC.md §4.2 (one
    resident-second per slot that went missing: no wake fails here)."""
    faults = ["wake:latency:fixed:100ms"]
    async with LocalSubstrate(workers=8, store=tmp_path / "store", faults=faults) as local:
        params = campaign_params(local.url, tmp_path, scheduler, target={"token": None})
        run = open_run(params, handle_signals=False)
        assert isinstance(run, ShardedRun)
        async with run:
            await run.preflight()
            await run.register()
            await run.fill()
            _, _, reason = await run.hold(8.0)
            assert reason is None
            run.finish()
    assert run.result is not None and run.result.status == "completed", run.result
    run_dir = run.result.run_dir
    rows = {}
    for line in (run_dir / "stats.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[row["metric"]] = row["measurements"]
    window = rows["turnover_window"]
    # The gauge runs from the fill on, the ticks' books from the first tick: the fill's own
    # gap is in the gauge only (docs/SPEC.md §4.2), so both are read over the turnover window.
    shortfall: dict[float, float] = {}
    for line in (run_dir / "gauges.jsonl").read_text().splitlines():
        gauge = json.loads(line)
        if gauge["name"] == "turnover_resident" and gauge["labels"]["state"] == "shortfall":
            shortfall[gauge["t"]] = gauge["value"]
    gauged = sum(v for t, v in shortfall.items() if window["start_unix"] <= t < window["end_unix"])
    booked = window["resident_shortfall_seconds"]
    assert booked == rows["turnover_ResidentShortfall"]["event_count"]
    failed_wakes = rows["rps_TimeToWake"]["failure_count"]
    assert rows["rps_TimeToWake"]["request_count"] >= 8  # the swaps ran, both shards'
    # The bound, plus one resident-second for a loaded machine's wake slower than the half
    # second between a tick and a sample (a real gap, seen by the gauge alone).
    assert abs(gauged - booked) <= failed_wakes + 1, (gauged, booked, window, shortfall)


def base_name(actor: str) -> str:
    """`agent-s1-3-r2` -> `agent-s1-3`: the session an actor belongs to."""
    return re.sub(r"-r\d+$", "", actor)


async def test_a_killed_shard_s_sessions_go_on_on_the_survivor_and_later_windows_are_judged(
    substrate, scheduler, tmp_path
):
    params = campaign_params(
        substrate.url, tmp_path, scheduler, hold_minutes=0.2, window_seconds=3
    )  # four windows of 3 s: a busy machine's saturated second voids a short one only
    run = open_run(params, handle_signals=False)
    assert isinstance(run, ShardedRun)
    verdicts = []
    async with run:
        campaign = Campaign(params, run)
        await run.preflight()
        await run.register()
        await run.fill()
        first = asyncio.create_task(campaign.hold_window(0))
        await asyncio.sleep(0.5)
        assert run.stream is not None
        standing = set(run.stream.names[1])  # the lost shard's actors, as it published them
        os.kill(run.shard_info[1]["pid"], signal.SIGKILL)  # a real kill of its worker
        killed = time.monotonic()
        verdicts.append(await asyncio.wait_for(first, 20))
        for index in range(1, len(campaign.plan)):
            verdicts.append(await campaign.hold_window(index))
        carried_on = run.stream.losses[0].back
        # The truth on the substrate while the load runs: one actor per session, no other.
        on_substrate = await leftover_actors(substrate.url, run.atespace)
        campaign.finish()
    recovered = (carried_on or 0) - (time.time() - (time.monotonic() - killed))
    print(
        f"lost shard's sessions ran again {recovered:.1f}s after the kill "
        f"{run.stream.losses[0].stages}; verdicts "
        + " ".join(f"{v.outcome}:{v.void_reason}" for v in verdicts if v is not None)
    )
    # Within seconds: 3-4 s on a quiet moment of the shared machine, up to 9 s at its busiest
    # (status.json generator.losses[].stages_s says where they went).
    assert carried_on is not None and recovered < 15.0
    assert verdicts[0] is not None and verdicts[0].outcome == "void", verdicts[0]
    assert re.match(r"shard 1 lost at \d\d:\d\d:\d\d UTC", verdicts[0].void_reason or "")
    # The windows after the carry-on are judged again: never void for the loss. (On the busy
    # shared machine the re-created actors' worker processes starting there can still
    # saturate a generator for a second: that window is then void by generator health,
    # named as such, as any window would be.)
    later = [v for v in verdicts if v is not None and v.start_unix >= carried_on]
    assert later, verdicts
    for verdict in later:
        assert verdict.outcome == "pass" or "saturated" in (verdict.void_reason or ""), verdict
    last = later[-1]
    assert run.result is not None and run.result.status == "completed", run.result
    # Every actor the lost shard had was deleted by the coordinator...
    assert standing and run.swept[1].deleted >= len(standing) and run.swept[1].leaks == []
    # ...and its sessions run on again under their own names, each once (no session twice).
    sessions = params.population.sessions
    names = [base_name(a) for a in on_substrate]
    assert len(names) == len(set(names)) == sessions, on_substrate
    assert {n.rsplit("-", 1)[0] for n in names} == {"agent-s0", "agent-s1"}
    status = status_of(run)
    rows = status["shards"]
    assert [r["state"] for r in rows] == ["stopped", "lost", "stopped"], rows
    # On the module's spare worker (up since the start, running no shard), not the lost one.
    assert rows[2]["adopted_from"] == 1 and rows[2]["worker"] not in (
        rows[0]["worker"],
        rows[1]["worker"],
    )
    assert (rows[2]["first_session"], rows[2]["sessions"]) == (0, rows[1]["sessions"])
    assert files.sessions(run) == sessions  # as the live shards' engines hold them: once
    last_window = run.recorder.window_seconds(int(last.start_unix), int(last.end_unix))
    assert last_window.row("rps", "TimeToWake").count > 0
    assert status["leaked_actors"] == [] and run.result.leaks == []
    assert await leftover_actors(substrate.url, status["atespace"]) == []
    assert verify_manifest(run.result.run_dir) == []


@pytest.mark.parametrize("protocol", ["json", "ate"])
async def test_a_sharded_run_replaces_what_a_substrate_restart_lost(
    scheduler, tmp_path, protocol, caplog, monkeypatch
):
    """docs/SPEC.md §5.8: the coordinator's one probe sees the substrate go and come back
    (SIGKILL, restarted on the same store and ports: the residents' actors come back
    CRASHED), and every shard checks its residents against it and replaces what was lost.

    On the shared 2-core machine a restart on the same store took 6-25 s, often past the
    watchdog's 10 s: the coordinator's watchdog (in this process) is given 40 s here, so the
    recovery itself is what the test sees."""
    caplog.set_level(logging.INFO, logger="agentsession")
    monkeypatch.setattr(watchdog, "MISSES", 20)
    # Few workers: a restart starts them all again, and must come back within the watchdog's
    # 10 s on a busy machine (the restart below is timed).
    served = Substrate(tmp_path / "store", tmp_path / "substrate.log", workers=4)
    served.start()
    awake = 2
    if protocol == "ate":
        target = {"substrate": f"grpc://127.0.0.1:{served.grpc_port}", "router": served.url}
    else:
        target = {"substrate": served.url}
    params = campaign_params(
        served.url,
        tmp_path,
        scheduler,
        target={**target, "token": None, "protocol": protocol},
        population={"sessions": 6, "awake": awake, "catch_up_ratio": 1},
    )
    client = HttpSubstrate(served.url, control_timeout=2)
    try:
        run = open_run(params, handle_signals=False)
        assert isinstance(run, ShardedRun)
        held = False
        async with run:
            await run.preflight()
            await run.register()
            await run.fill()
            restarted = math.inf

            def seen_enough() -> str | None:  # the hold goes on until 7 s after the restart
                return "enough" if time.time() > restarted + 7.0 else None

            hold = asyncio.create_task(run.hold(40.0, should_stop=seen_enough))
            await asyncio.sleep(2.5)
            await asyncio.to_thread(served.sigkill)
            killed = time.time()
            await asyncio.sleep(1.0)  # with the restart's own seconds, longer than a probe period
            await asyncio.to_thread(served.start)
            restarted = time.time()
            print(f"substrate silent {restarted - killed:.1f}s")
            _, _, reason = await hold
            run.finish()
            held = True
        # The Run takes what its body raised as the run's failure; say that, not a later line.
        assert held, f"the body failed: {run.result and run.result.reason}"
        if reason == "enough":
            reason = run.result.reason if run.result is not None else None
        assert run.result is not None
        assert await leftovers(client, run.atespace) == []
    finally:
        await client.aclose()
        served.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "agentsession"]
    # One probe for the run: the coordinator's; no shard probes on its own.
    assert not any(line.startswith("shard") and "unreachable" in line for line in lines)
    assert not any(line.startswith("shard") and "answers again" in line for line in lines)
    status = status_of(run)
    assert status["leaked_actors"] == [] and [s["state"] for s in status["shards"]] == [
        "stopped",
        "stopped",
    ]
    if reason is not None and "unreachable" in reason:
        # The other outcome the issue allows (the restart outlasted the watchdog): the
        # coordinator said so once, the run failed naming it.
        assert restarted - killed >= 39.0 and "unreachable" in reason, reason
        assert run.result.status == "failed" and run.result.reason == reason
        assert sum("substrate unreachable" in line for line in lines) == 1, lines
        return
    assert run._watchdog is not None and run._watchdog.outages == 1
    assert sum("substrate answers again" in line for line in lines) == 1, lines
    # Every shard checked its residents and replaced what the restart lost (booked DeleteActor
    # of a replacement; cleanup's deletions are not booked).
    for k in (0, 1):
        assert any(line.startswith(f"shard {k}: substrate back") for line in lines), lines
    # What the restart lost was found by that check ("after the outage: N of M residents"),
    # or, where a swap touched it first (the ate wire's router is back before its gRPC), by
    # the failed wake or park: replaced either way.
    replaced = sum(
        final["counts"].get(f"{CONTROL_KIND}/DeleteActor", 0) for final in run.finals.values()
    )
    assert replaced >= 1, replaced
    # The resident set is whole again within 10 s of the restart, and swaps go on after it.
    resident: dict[int, float] = {}
    for line in (run.result.run_dir / "gauges.jsonl").read_text().splitlines():
        gauge = json.loads(line)
        if gauge["name"] == "turnover_resident" and gauge["labels"]["state"] == "resident":
            resident[int(gauge["t"])] = gauge["value"]
    back = [t for t, n in sorted(resident.items()) if t >= int(restarted) and n == awake]
    assert back and back[0] - restarted <= 10.0, resident
    woken = run.recorder.window_seconds(int(restarted) + 1, back[-1] + 1).row("rps", "TimeToWake")
    assert woken.count - woken.failures > 0
    assert run.result.status in ("completed", "failed"), run.result  # failed: the §4.2 gap
    if run.result.status == "failed":
        assert (run.result.reason or "").startswith("turnover: the resident set averaged")


async def test_live_control_reaches_every_shard(substrate, scheduler, tmp_path):
    """docs/SPEC.md §5.10 on a sharded run: a level by hand goes to every shard (split as at
    the start), a pause stops every shard's swaps, a stop ends the run with every actor
    deleted."""
    import httpx

    params = campaign_params(
        substrate.url,
        tmp_path,
        scheduler,
        metrics_port=0,
        population={"sessions": 6, "awake": 2, "target_rps": 1},
    )
    run = open_run(params, handle_signals=False)
    assert isinstance(run, ShardedRun)
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def wakes() -> int:
        return run.recorder.totals().row("rps", "TimeToWake").count

    async def steer(url: str) -> dict:
        seen: dict = {}
        async with httpx.AsyncClient(timeout=10) as http:
            await asyncio.sleep(1.0)
            doubled = (await http.patch(url, json={"level": 2}, headers=auth)).json()
            seen["intended"] = doubled["intended_rate"]
            await asyncio.sleep(2.0)
            assert (await http.patch(url, json={"paused": True}, headers=auth)).is_success
            await asyncio.sleep(1.5)  # the last swaps in flight land in the merged stream
            before = wakes()
            await asyncio.sleep(1.5)
            seen["paused_wakes"] = wakes() - before
            assert (await http.patch(url, json={"stopped": True}, headers=auth)).is_success
        return seen

    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        assert run.control_url is not None
        steering = asyncio.create_task(steer(run.control_url))
        start, end, reason = await run.hold(40.0)
        run.finish()
        seen = await steering
    assert run.result is not None and run.result.status == "completed", run.result
    assert reason is None and (end - start) / 1e9 < 20
    assert seen["intended"] == 2.0 and seen["paused_wakes"] == 0
    lines = (run.result.run_dir / "stats.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    levels = [r["measurements"]["level"] for r in rows if r["metric"].startswith("turnover_window")]
    assert levels == [1.0, 2.0]  # one turnover_window row per level, the one set by hand too
    status = status_of(run)
    assert [c["name"] for c in status["control"]["changes"]] == ["level", "pause", "stop"]
    assert await leftover_actors(substrate.url, status["atespace"]) == []
