"""Live control (docs/SPEC.md §5.10) of a real run on the local substrate, over real HTTP:
the token, refused bodies, a level change the achieved rate follows, pause and resume, a
stop that ends the run with its artifacts and every actor deleted, the change marked on
report.html, `agentsession control` end to end, and a campaign window a change voids."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.run import Run
from agentsession_core.measure.stats import TIME_TO_WAKE_ROW
from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE_RPS = 1.0  # three residents on the shared substrate's four workers: 2 swaps/s fit
PAUSE_SECONDS = 1.5


def run_fields(substrate: LocalSubstrateProcess, tmp_path: Path, name: str) -> dict[str, Any]:
    return {
        "target": {"substrate": substrate.url, "token": TOKEN, "atespace": name},
        "script": "smoke",
        "population": {
            "kind": "turnover",
            "sessions": 6,
            "awake": 3,
            "target_rps": BASE_RPS,
            "registration_quiet_seconds": 0.3,
        },
        "think_scale": 0.02,
        "seed": 5,
        "out": str(tmp_path),
        "name": name,
        "metrics_port": 0,
        "cleanup": {"stop_grace_seconds": 2.0},
    }


async def control_cli(url: str, *args: str, token: str | None = TOKEN) -> tuple[int, str, str]:
    """`agentsession control URL …` in its own process, the token in its environment."""
    env = {k: v for k, v in os.environ.items() if k != "AGENTSESSION_TOKEN"}
    if token is not None:
        env["AGENTSESSION_TOKEN"] = token
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentsession_core",
        "control",
        url,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def wakes_per_second(run_dir: Path) -> dict[int, int]:
    """Successful wakes per second, from stats_history.jsonl (by done time)."""
    out: dict[int, int] = {}
    for line in (run_dir / "stats_history.jsonl").read_text().splitlines():
        r = json.loads(line)
        if (r.get("type"), r.get("name")) == TIME_TO_WAKE_ROW:
            out[r["t"]] = r["count"] - r.get("failures", 0)
    return out


def seconds_to_double(run_dir: Path, change_unix: float) -> float:
    """From a level change (1 → 2) to the start of the first second with twice the base
    rate of successful wakes; asserts a second at the base rate before it."""
    wakes = wakes_per_second(run_dir)
    assert any(n <= BASE_RPS for t, n in wakes.items() if t < change_unix - 1), wakes
    doubled = [t for t, n in wakes.items() if t > change_unix - 1 and n >= 2 * BASE_RPS]
    assert doubled, sorted(wakes.items())
    return min(doubled) - change_unix


def changes(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "stats_history.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("type") == "control"]


async def test_a_run_steered_by_hand(
    substrate: LocalSubstrateProcess, client: HttpSubstrate, tmp_path: Path
) -> None:
    params = RunParams(**run_fields(substrate, tmp_path, "live-control"))
    run = Run(params, handle_signals=False)
    seen: dict[str, Any] = {}

    async def steer(url: str) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            # The token: refused without it or with another, answered with it.
            assert (await http.get(url)).status_code == 401
            wrong = await http.get(url, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401 and "not this run's" in wrong.json()["error"]
            assert (await http.get(url, headers=AUTH)).json()["level"] == 1.0
            # Bad bodies: 400 naming the field; nothing changes.
            for body, field in (
                ({"level": 0}, "level:"),
                ({"level": 5000}, "level:"),
                ({"level": "2"}, "level:"),
                ({"paused": "yes"}, "paused:"),
                ({"stopped": False}, "stopped:"),
                ({"speed": 2}, "speed:"),
            ):
                bad = await http.patch(url, json=body, headers=AUTH)
                assert bad.status_code == 400 and bad.json()["error"].startswith(field), body
            assert (await http.patch(url, content=b"{", headers=AUTH)).status_code == 400
            assert run.control.changes == []

            await asyncio.sleep(3.0)  # a few seconds at the base rate, after the fill
            doubled = await http.patch(url, json={"level": 2}, headers=AUTH)
            assert doubled.status_code == 200
            assert doubled.json()["intended_rate"] == 2 * BASE_RPS
            seen["level_at"] = time.time()
            await asyncio.sleep(2.5)

            population = run.engine.population  # type: ignore[union-attr]
            assert (await http.patch(url, json={"paused": True}, headers=AUTH)).json()["paused"]
            # No tick starts a swap once the pause is applied; meanwhile a refusal through
            # the command. The pause lasts at least PAUSE_SECONDS whatever the command took
            # (its process start is under a second on a busy machine), so that at the
            # level's 2 swaps/s a tick that still started swaps would have started some.
            paused_at = time.monotonic()
            before = population.swaps_started  # type: ignore[attr-defined]
            code, _, err = await control_cli(url, "level", "0")
            assert code == 2 and "level: 0 must be > 0" in err, err
            await asyncio.sleep(max(0.0, paused_at + PAUSE_SECONDS - time.monotonic()))
            seen["paused_swaps"] = population.swaps_started - before  # type: ignore[attr-defined]
            status = (await http.get(url, headers=AUTH)).json()
            assert status["paused"] and status["intended_rate"] == 0.0

            resumed = await http.patch(url, json={"paused": False}, headers=AUTH)
            assert resumed.json()["paused"] is False
            before = population.swaps_started  # type: ignore[attr-defined]
            await asyncio.sleep(1.2)
            seen["resumed_swaps"] = population.swaps_started - before  # type: ignore[attr-defined]
            code, out, _ = await control_cli(url, "stop")
            assert code == 0 and out.startswith("hold, level 2, running"), out
            assert "stopping" in out and len(out.splitlines()) == 1, out
            refused = await http.patch(url, json={"level": 3}, headers=AUTH)
            assert refused.status_code == 409

    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        assert run.control_url is not None
        steering = asyncio.create_task(steer(run.control_url))
        start, end, reason = await run.hold(60)
        run.finish("completed" if reason is None else "failed", reason)
        await steering
    assert run.result is not None
    # Stopped by hand: the hold ended early, as if its duration had, and the run completed.
    assert (run.result.status, run.result.exit_code, reason) == ("completed", 0, None)
    assert (end - start) / 1e9 < 40
    assert seen["paused_swaps"] == 0
    assert seen["resumed_swaps"] >= 1

    run_dir = run.result.run_dir
    # The achieved rate follows the level: the first second with twice the base rate of
    # successful wakes began within 2 s of the change.
    assert seconds_to_double(run_dir, seen["level_at"]) <= 2.0

    booked = changes(run_dir)
    assert [c["name"] for c in booked] == ["level", "pause", "resume", "stop"]
    assert {c["source"] for c in booked} == {"manual"}
    assert booked[0]["label"] == "level 1 → 2"
    status = json.loads((run_dir / "status.json").read_text())
    assert status["control"]["stopped"].startswith("manual change at ")
    assert status["actors_created"] == status["actors_deleted"] > 0
    assert await client.list_actors("live-control") == []
    report = (run_dir / "report.html").read_text()
    assert "manual: level 1 → 2" in report and "manual: paused" in report
    assert verify_manifest(run_dir / "manifest.json") == []


async def test_a_window_spanning_a_change_is_void_and_a_stop_leaves_the_rest_unheld(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    params = CampaignParams(
        **run_fields(substrate, tmp_path, "live-campaign"),
        tag="test",
        window_seconds=3,
        hold_minutes=12 / 60,
        thresholds=["Step_*: failure_ratio < 0.5"],
    )
    run = Run(params, handle_signals=False)
    async with run:
        campaign = Campaign(params, run)
        await run.preflight()
        await run.register()
        await run.fill()
        assert run.control_url is not None

        async def steer(url: str) -> None:
            async with httpx.AsyncClient(timeout=10) as http:
                await asyncio.sleep(1.0)  # inside window 0
                status = (await http.get(url, headers=AUTH)).json()
                assert status["window"]["index"] == 0
                assert (await http.patch(url, json={"level": 2.5}, headers=AUTH)).is_success
                for _ in range(100):  # until window 2 is under way (bounded: 10 s)
                    window = (await http.get(url, headers=AUTH)).json()["window"]
                    if window is not None and window["index"] == 2:
                        break
                    await asyncio.sleep(0.1)
                assert (await http.patch(url, json={"stopped": True}, headers=AUTH)).is_success

        steering = asyncio.create_task(steer(run.control_url))
        for window in campaign.plan:
            if campaign.stopped:
                break
            await campaign.hold_window(window.index)
        campaign.finish()
        await steering
    assert run.result is not None and run.result.status == "completed"
    first, second, third = campaign.verdicts
    assert first.outcome == "void"
    assert first.void_reason is not None
    assert first.void_reason.startswith("manual change at ")
    assert first.void_reason.endswith("(level 1 → 2.5)")
    # The plan's level again from the next window: judged as planned.
    assert second.outcome in ("pass", "void") and second.level == 1.0
    assert second.void_reason is None or "manual" not in second.void_reason
    assert third.outcome == "void" and "(stopped); window 3 not held" in (third.void_reason or "")
    gate = json.loads((run.result.run_dir / "gate.json").read_text())
    assert gate["verdict"] == "void" and gate["reason"].startswith("stopped by hand: ")
    assert gate["run"]["windows_planned"] == 4 and len(gate["windows"]) == 3


async def test_a_level_by_hand_over_the_ate_wire(
    substrate: LocalSubstrateProcess, client: HttpSubstrate, tmp_path: Path
) -> None:
    fields = run_fields(substrate, tmp_path, "live-control-ate")
    fields["target"] |= {
        "substrate": substrate.grpc_url,
        "router": substrate.url,
        "protocol": "ate",
    }
    run = Run(RunParams(**fields), handle_signals=False)
    changed: list[float] = []

    async def steer(url: str) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            # Whole seconds at the base rate first: the hold starts on the next whole second
            # after the fill, and the base must be seen before the change.
            await asyncio.sleep(3.0)
            assert (await http.patch(url, json={"level": 2}, headers=AUTH)).is_success
            changed.append(time.time())
            await asyncio.sleep(2.5)
            assert (await http.patch(url, json={"stopped": True}, headers=AUTH)).is_success

    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        assert run.control_url is not None
        steering = asyncio.create_task(steer(run.control_url))
        _, _, reason = await run.hold(60)
        run.finish("completed" if reason is None else "failed", reason)
        await steering
    assert run.result is not None and run.result.status == "completed", run.result
    assert seconds_to_double(run.result.run_dir, changed[0]) <= 2.0
    assert await client.list_actors("live-control-ate") == []
