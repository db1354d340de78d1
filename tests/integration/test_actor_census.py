"""`locust_actors{state}` on a live run's /metrics (docs/SPEC.md §5.7, measure/actor_census.py):
a short turnover run on the embedded local substrate, scraped while it holds; the gauge is the
substrate's own listing of the run's actors in upstream's four states, every session's actor
counted once: in a single process, and in a sharded run whose coordinator takes the one
census of the whole atespace (its shards take none, so nothing is counted twice)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.measure.actor_census import STATES
from agentsession_core.run.run import Run
from tests.integration.ports import fixed_port
from tests.promql_subset import parse_exposition

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]
SESSIONS, AWAKE = 6, 2


def params(tmp_path: Path, port: int, **extra: Any) -> RunParams:
    return RunParams(
        think_scale=0.05,
        seed=7,
        tag="test",
        script="smoke",
        name="census",
        out=str(tmp_path),
        metrics_port=port,
        population={
            "kind": "turnover",
            "sessions": SESSIONS,
            "awake": AWAKE,
            "target_rps": 2,
            "registration_quiet_seconds": 0.5,
        },
        target={"local_workers": 3},
        cleanup={"timeout_seconds": 20.0, "stop_grace_seconds": 2.0},
        server={"enabled": False},
        **extra,
    )


async def censuses(url: str, seen: list[dict[str, float]], until: asyncio.Event) -> None:
    """Every distinct locust_actors reading, scraped twice a second, into `seen`."""
    async with httpx.AsyncClient(timeout=5) as http:
        while not until.is_set():
            try:
                text = (await http.get(url)).text
            except httpx.HTTPError:
                text = ""
            got = {
                dict(labels)["state"]: value
                for (name, labels), value in parse_exposition(text).items()
                if name == "locust_actors"
            }
            if got and (not seen or seen[-1] != got):
                seen.append(got)
            await asyncio.sleep(0.5)


async def held(tmp_path: Path, **extra: Any) -> list[dict[str, float]]:
    """The censuses of a run held until one of them, taken in the hold, counted every
    session's actor (the census is taken every 5 s: when is the run's own business)."""
    port = fixed_port()
    run = Run(params(tmp_path, port, **extra), handle_signals=False)
    done = asyncio.Event()
    seen: list[dict[str, float]] = []
    async with run:
        url = f"http://127.0.0.1:{port}/metrics"
        scraping = asyncio.create_task(censuses(url, seen, done))
        assert await run.preflight()
        await run.register()
        await run.fill()
        in_hold = len(seen)

        def counted_all() -> str | None:
            return "enough" if any(sum(c.values()) == SESSIONS for c in seen[in_hold:]) else None

        _, _, reason = await run.hold(60.0, should_stop=counted_all)
        assert reason == "enough", f"no census counted every actor in 60 s: {seen}"
        run.finish()
        done.set()
        await scraping
    assert run.result is not None and run.result.status == "completed", run.result
    # The first census comes before preflight makes the atespace: no actor, not a failure.
    assert "actor census" not in (run.result.run_dir / "logs.txt").read_text()
    assert seen[0] == dict.fromkeys(STATES, 0.0), seen
    return seen


def assert_plausible(seen: list[dict[str, float]]) -> None:
    assert seen, "no locust_actors on /metrics"
    assert all(set(c) == set(STATES) for c in seen), seen  # the four, 0 included
    # Once every session's actor exists, each is counted once, in one state: the resident
    # set (and a swap or two in flight) running, the rest hibernated, none crashed.
    full = [c for c in seen if sum(c.values()) == SESSIONS]
    assert full, seen
    assert all(sum(c.values()) <= SESSIONS for c in seen), seen  # never counted twice
    last = full[-1]
    assert last["crashed"] == 0
    assert 1 <= last["running"] <= AWAKE + 2, last
    assert last["hibernated"] >= SESSIONS - AWAKE - 2, last


async def test_a_live_run_shows_its_actors_by_state(tmp_path: Path) -> None:
    assert_plausible(await held(tmp_path))


async def test_a_sharded_run_counts_each_actor_once(tmp_path: Path) -> None:
    assert_plausible(await held(tmp_path, generator={"shards": 2}))
