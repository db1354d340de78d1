"""Upstream's live dashboards read a running agentsession (docs/SPEC.md §5.7): a short run on
the embedded local substrate is scraped twice through its /metrics, and the queries those
dashboards make of the Locust exporter's names (written here from what they show:
docs/guide/server-metrics.md) are evaluated over the two scrapes with tests/promql_subset.py.
Each answer is checked against the agentsession_* families of the same scrapes, so the names,
the label meanings and the unit (milliseconds against seconds) are what upstream expects."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import httpx
import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.single_run import run as run_engine
from tests.integration.ports import fixed_port
from tests.promql_subset import evaluate, parse_exposition, scrapes_source

pytestmark = pytest.mark.timeout(60)
SESSIONS = 4
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


async def _scrapes(url: str, gap: float) -> list[tuple[float, dict]]:
    """Two scrapes `gap` apart once the run books wakes."""
    out: list[tuple[float, dict]] = []
    async with httpx.AsyncClient(timeout=5) as http:
        for _ in range(200):
            try:
                text = (await http.get(url)).text
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
                continue
            # Both views of the wakes: each collector reads the recorder on its own.
            if 'agentsession_requests_total{name="TimeToWake"' in text and "locust_" in text:
                out.append((time.time(), parse_exposition(text)))
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(gap)
        out.append((time.time(), parse_exposition((await http.get(url)).text)))
    return out


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
    run = asyncio.create_task(run_engine(params, hold_seconds=4))
    scrapes = await _scrapes(f"http://127.0.0.1:{port}/metrics", gap=2.0)
    await run
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
    # The same requests in milliseconds against seconds; each histogram's own buckets.
    assert 0.4 <= p99["TimeToWake"] / (ours["TimeToWake"] * 1000) <= 2.5
    heat = ask(DASHBOARD["wake heatmap"])
    assert heat["+Inf"] == pytest.approx(rate["TimeToWake"] * (t2 - t1), rel=1e-3)
    assert ask(DASHBOARD["users"]) == {"smoke": SESSIONS}
    actors = ask(DASHBOARD["actors by state"])
    # The substrate's listing, every 5 s (test_actor_census.py): before the run's actors
    # exist, or each of them once.
    assert set(actors) == {"hibernated", "running", "hibernate_pending", "crashed"}
    assert sum(actors.values()) in (0, SESSIONS)
