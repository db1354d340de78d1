"""Live control (docs/SPEC.md §5.10) of a real run on the local substrate, over real HTTP:
the token, refused bodies, a level change the next tick swaps at and the achieved rate
follows, pause and resume, a stop that ends the run with its artifacts and every actor
deleted, the change marked on report.html, `agentsession control` end to end, and a campaign
window a change voids.

Each step waits on the run's own events (its ticks, its books closing whole seconds), never
on a duration; what a change did is judged per tick and from the books."""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import RunParams
from agentsession_core.measure.stats import TIME_TO_WAKE_ROW
from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.run.run import Run
from agentsession_core.substrate.interface import Substrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_target

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE_RPS = 1.0  # three residents on the shared substrate's four workers: 2 swaps/s fit
SHORTFALL_ROW = ("turnover", "ResidentShortfall")  # every tick books one, 0 included


def run_fields(substrate: LocalSubstrateProcess, tmp_path: Path, name: str) -> dict[str, Any]:
    return {
        "target": ate_target(substrate, token=TOKEN, atespace=name),
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
        # Saturated seconds are counted but void no window: the windows here judge the
        # changes by hand, and a loaded machine's saturated second says nothing of them.
        "generator": {"void_when_saturated": False},
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


def follows_the_level(run_dir: Path, change_unix: float) -> None:
    """The achieved rate follows a level change (1 → 2): a second at the base rate of
    successful wakes before it, one at twice the base rate after it."""
    wakes = wakes_per_second(run_dir)
    assert any(n <= BASE_RPS for t, n in wakes.items() if t < change_unix - 1), wakes
    assert any(n >= 2 * BASE_RPS for t, n in wakes.items() if t > change_unix - 1), wakes


class Ticks:
    """A turnover run's ticks as it runs them: how many, and the swaps they asked for (the
    ones started and the ones booked as Backlog for want of a session, docs/SPEC.md §4.2)."""

    def __init__(self, run: Run) -> None:
        self.run = run

    @property
    def population(self) -> Any:
        assert self.run.load.engine is not None
        return self.run.load.engine.population

    def now(self) -> tuple[int, int]:
        """(ticks so far, swaps they asked for)."""
        backlog = self.run.recorder.totals().row("turnover", "Backlog").events
        return self.population.ticks, self.population.swaps_started + backlog

    async def after(self, since: int, count: int) -> None:
        """Until `count` ticks ran after the `since`-th."""
        await until(lambda: self.population.ticks >= since + count, f"{count} ticks")

    def asked_per_tick(self, since: tuple[int, int]) -> float:
        ticks, asked = self.now()
        assert ticks > since[0], "no tick ran"
        return (asked - since[1]) / (ticks - since[0])

    async def closed_past(self, unix: float, seconds: int) -> None:
        """Until the run's books closed `seconds` whole seconds after `unix`."""
        rec = self.run.recorder
        await until(lambda: rec.closed_until > math.ceil(unix) + seconds, "seconds booked")

    def ticked_in(self, first: float, last: float) -> list[int]:
        """The seconds in (first, last) in which a tick ran, as the run booked them."""
        seconds = self.run.recorder.intervals
        return sorted(s for s in seconds if first < s < last and SHORTFALL_ROW in seconds[s])


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` until it holds; the cap only catches a hang."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"never {what}"
        await asyncio.sleep(0.05)


def changes(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "stats_history.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("type") == "control"]


async def test_a_run_steered_by_hand(
    substrate: LocalSubstrateProcess, client: Substrate, tmp_path: Path
) -> None:
    params = RunParams(**run_fields(substrate, tmp_path, "live-control"))
    run = Run(params, handle_signals=False)
    ticks = Ticks(run)
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

            await ticks.after(0, 2)  # whole seconds at the base rate first
            doubled = await http.patch(url, json={"level": 2}, headers=AUTH)
            assert doubled.status_code == 200
            assert doubled.json()["intended_rate"] == 2 * BASE_RPS
            seen["level_at"] = time.time()
            at_level = ticks.now()  # applied before the answer: every later tick has it
            await ticks.after(at_level[0], 2)
            seen["asked_at_level"] = ticks.asked_per_tick(at_level)

            assert (await http.patch(url, json={"paused": True}, headers=AUTH)).json()["paused"]
            # No tick runs once the pause is applied (before the answer), so no swap starts:
            # over two whole seconds the run books, at the level's 2 swaps a second.
            # Meanwhile a refusal through the command.
            seen["paused_at"], paused = time.time(), ticks.now()
            code, _, err = await control_cli(url, "level", "0")
            assert code == 2 and "level: 0 must be > 0" in err, err
            await ticks.closed_past(seen["paused_at"], 2)
            seen["while_paused"] = tuple(b - a for a, b in zip(paused, ticks.now(), strict=True))
            status = (await http.get(url, headers=AUTH)).json()
            assert status["paused"] and status["intended_rate"] == 0.0

            resumed = await http.patch(url, json={"paused": False}, headers=AUTH)
            assert resumed.json()["paused"] is False
            seen["resumed_at"], resumed_from = time.time(), ticks.now()
            await ticks.after(resumed_from[0], 1)  # the next tick swaps again, at the level
            seen["asked_after_resume"] = ticks.asked_per_tick(resumed_from)
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
    assert (end - start) / 1e9 < 60
    # Every tick after the change asked for twice the base rate's swaps, and so did the first
    # after the resume; while paused none ran (nor any swap), as the books say too.
    assert seen["asked_at_level"] == seen["asked_after_resume"] == 2 * BASE_RPS, seen
    assert seen["while_paused"] == (0, 0), seen
    assert ticks.ticked_in(seen["paused_at"], seen["resumed_at"]) == [], seen

    run_dir = run.result.run_dir
    follows_the_level(run_dir, seen["level_at"])  # the achieved rate follows the level

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


async def window_under_way(http: httpx.AsyncClient, url: str, index: int) -> None:
    """Until GET /v1/status says campaign window `index` is being held."""
    deadline = time.monotonic() + 60
    while (window := (await http.get(url, headers=AUTH)).json()["window"]) is None or (
        window["index"] < index
    ):
        assert time.monotonic() < deadline, f"never window {index}"
        await asyncio.sleep(0.05)
    assert window["index"] == index, window


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
                await window_under_way(http, url, 0)
                await Ticks(run).after(0, 1)  # its first tick: window 0 starts on it
                assert (await http.patch(url, json={"level": 2.5}, headers=AUTH)).is_success
                await window_under_way(http, url, 2)
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
    assert (second.outcome, second.level) == ("pass", 1.0), second
    assert third.outcome == "void" and "(stopped); window 3 not held" in (third.void_reason or "")
    gate = json.loads((run.result.run_dir / "gate.json").read_text())
    assert gate["verdict"] == "void" and gate["reason"].startswith("stopped by hand: ")
    assert gate["run"]["windows_planned"] == 4 and len(gate["windows"]) == 3


async def test_a_level_by_hand_over_the_json_wire(
    substrate: LocalSubstrateProcess, client: Substrate, tmp_path: Path
) -> None:
    fields = run_fields(substrate, tmp_path, "live-control-json")
    fields["target"] = {**fields["target"], "substrate": substrate.url, "protocol": "json"}
    del fields["target"]["router"]
    run = Run(RunParams(**fields), handle_signals=False)
    ticks = Ticks(run)
    seen: dict[str, Any] = {}

    async def steer(url: str) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            await ticks.after(0, 2)  # whole seconds at the base rate first
            assert (await http.patch(url, json={"level": 2}, headers=AUTH)).is_success
            seen["level_at"], at_level = time.time(), ticks.now()
            await ticks.after(at_level[0], 2)
            seen["asked_at_level"] = ticks.asked_per_tick(at_level)
            await ticks.closed_past(seen["level_at"], 2)  # the doubled seconds in the books
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
    assert seen["asked_at_level"] == 2 * BASE_RPS, seen
    follows_the_level(run.result.run_dir, seen["level_at"])
    assert await client.list_actors("live-control-json") == []
