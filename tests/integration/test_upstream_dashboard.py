"""Upstream's live dashboards read a running agentsession (docs/SPEC.md §5.7): a run on the
embedded local substrate is scraped twice through its /metrics, and the queries those
dashboards make of the Locust exporter's names (written here from what they show:
docs/guide/server-metrics.md) are evaluated over the two scrapes with tests/promql_subset.py.
Each answer is checked against the agentsession_* families of the same scrapes, so the names,
the label meanings and the unit (milliseconds against seconds) are what upstream expects.

The scrapes wait on the run's state, not on the clock: the first once the run books wakes and
the actor census (every 5 s) has seen every actor, the second once more wakes were booked;
then the run is stopped by hand (PATCH /v1/status), so its hold lasts as long as that takes."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.run.single import run as run_engine
from tests.integration.ports import fixed_port
from tests.promql_subset import evaluate, parse_exposition, scrapes_source

pytestmark = pytest.mark.timeout(90)
SESSIONS = 4
HOLD_CAP_S = 80  # the hold ends by hand once both scrapes are taken
Scrape = tuple[float, dict]
# What upstream's panels ask (the range is the two scrapes' distance, `$r`).
DASHBOARD = {
    "request rate by name": "sum by (name) (rate(locust_requests_total[$r]))",
    "failure ratio": 'sum (rate(locust_requests_total{status="failure"}[$r])) '
    "/ sum (rate(locust_requests_total[$r]))",
    "p99 by name (ms)": "histogram_quantile(0.99, sum by (le, name) "
    "(rate(locust_request_duration_milliseconds_bucket[$r])))",
    "wake heatmap": "sum by (le) (increase(locust_request_duration_milliseconds_bucket"
    '{name="TimeToWake"}[$r]))',
    "users": "sum by (user_class) (locust_users)",
    "actors by state": "sum by (state) (locust_actors)",
}
OURS = {
    "request rate by name": "sum by (name) (rate(agentsession_requests_total[$r]))",
    "p99 by name (ms)": "histogram_quantile(0.99, sum by (le, name) "
    '(rate(agentsession_request_duration_seconds_bucket{outcome="ok"}[$r])))',
}


def booked(scrape: dict, family: str, name: str = "TimeToWake") -> float:
    return sum(v for (f, labels), v in scrape.items() if f == family and ("name", name) in labels)


def wakes(scrape: dict) -> float:
    """Both views of the wakes (each collector reads the recorder on its own): the fewer."""
    return min(
        booked(scrape, "locust_requests_total"), booked(scrape, "agentsession_requests_total")
    )


def actors(scrape: dict) -> float:
    return sum(v for (family, _), v in scrape.items() if family == "locust_actors")


async def scrape_when(
    http: httpx.AsyncClient, url: str, run: asyncio.Task, ready: Callable[[dict], bool]
) -> Scrape:
    """The first scrape of `url` that `ready` accepts (the run may not serve it yet)."""
    while not run.done():
        try:
            scrape = (time.time(), parse_exposition((await http.get(url)).text))
        except httpx.HTTPError:
            scrape = (time.time(), {})
        if ready(scrape[1]):
            return scrape
        await asyncio.sleep(0.1)
    raise AssertionError(f"the run ended first: {run.result()}")


async def test_upstream_dashboard_queries_read_a_live_run(tmp_path: Path) -> None:
    port = fixed_port()
    params = RunParams(
        think_scale=0.05,
        seed=5,
        tag="test",
        script="smoke",
        name="upstream",
        out=str(tmp_path),
        metrics_port=port,
        population={
            "kind": "turnover",
            "sessions": SESSIONS,
            "awake": 1,
            "target_rps": 3,
            "registration_quiet_seconds": 0.5,
        },
        target={"local_workers": 2},
        cleanup={"timeout_seconds": 20.0, "stop_grace_seconds": 2.0},
        server={"enabled": False},
    )
    run = asyncio.create_task(run_engine(params, hold_seconds=HOLD_CAP_S))
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(timeout=10) as http:
        # Wakes booked and a census of every actor; then three more wakes.
        first = await scrape_when(
            http, f"{base}/metrics", run, lambda m: wakes(m) > 0 and actors(m) == SESSIONS
        )
        second = await scrape_when(
            http, f"{base}/metrics", run, lambda m: wakes(m) >= wakes(first[1]) + 3
        )
        stopped = await http.patch(f"{base}/v1/status", json={"stopped": True})
        assert stopped.status_code == 200, stopped.text
    result = await run
    assert result.status == "completed", result.reason  # a stop by hand ends the hold
    scrapes = [first, second]
    (t1, _), (t2, _) = scrapes
    source = scrapes_source(scrapes)
    r = f"{math.floor((t2 - t1) * 1000)}ms"  # reaches back to the first scrape, not before it

    def ask(query: str) -> dict[str, float]:
        found = evaluate(query.replace("$r", r), source, t2)
        return {",".join(v for _, v in labels): value for labels, value in found.items()}

    rate = ask(DASHBOARD["request rate by name"])
    assert rate["TimeToWake"] > 0 and any(name.startswith("Step_") for name in rate)
    assert rate == pytest.approx(
        {k: v for k, v in ask(OURS["request rate by name"]).items() if k in rate}
    )
    assert ask(DASHBOARD["failure ratio"]).get("", 0.0) == 0.0  # a healthy run
    p99 = ask(DASHBOARD["p99 by name (ms)"])
    ours = ask(OURS["p99 by name (ms)"])
    # The same requests in milliseconds against seconds; each histogram's own buckets. Each
    # estimate lies in the bucket that holds the true p99: a power of 2 ms wide (x2) and a
    # 1-2.5-5 s one (x2.5), so they agree within a factor of 5.
    assert 0.2 <= p99["TimeToWake"] / (ours["TimeToWake"] * 1000) <= 5
    heat = ask(DASHBOARD["wake heatmap"])
    assert heat["+Inf"] == pytest.approx(rate["TimeToWake"] * (t2 - t1), rel=1e-3)
    assert ask(DASHBOARD["users"]) == {"smoke": SESSIONS}
    by_state = ask(DASHBOARD["actors by state"])
    # The substrate's listing (test_actor_census.py): each of the run's actors once.
    assert set(by_state) == {"hibernated", "running", "hibernate_pending", "crashed"}
    assert sum(by_state.values()) == SESSIONS
