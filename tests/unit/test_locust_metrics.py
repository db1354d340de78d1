"""The Locust exporter's names on the run's /metrics (docs/SPEC.md §5.7): the same requests as
the agentsession_* families, labelled as upstream's dashboards expect, latency in
milliseconds; the load's own rows and the generator's health are not requests."""

from __future__ import annotations

import time

import httpx

from agentsession_core.measure.prometheus import MetricsServer
from agentsession_core.measure.recorder import Recorder
from tests.promql_subset import parse_exposition


async def _scrape(rec: Recorder) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    server = MetricsServer(rec, 0, user_class="coding-session")
    await server.start()
    try:
        async with httpx.AsyncClient() as client:
            text = (await client.get(server.url)).text
    finally:
        await server.stop()
    return parse_exposition(text)


def _labels(**kw: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(kw.items()))


async def test_requests_users_and_actors_under_the_locust_names() -> None:
    rec = Recorder()
    now = time.monotonic_ns()
    step = rec.row("http", "Step_read")
    for _ in range(4):
        step.ok(now - 20_000_000, now - 15_000_000, now)  # 20 ms from the intended time
    step.fail(now - 3_000_000_000, now - 3_000_000_000, now, "DEADLINE_EXCEEDED")  # 3 s
    rec.row("rps", "TimeToWake").ok(now - 300_000_000, now - 200_000_000, now)
    rec.row("turnover", "Backlog").event(now)
    for state, n in (("parked", 6), ("idle", 2), ("stepping", 1), ("waking", 1)):
        rec.gauge("sessions", {"state": state}, n)
    got = await _scrape(rec)
    ok = _labels(method="http", name="Step_read", status="success", user_class="coding-session")
    bad = dict(ok) | {"status": "failure"}
    assert got[("locust_requests_total", ok)] == 4
    assert got[("locust_requests_total", tuple(sorted(bad.items())))] == 1
    # Milliseconds: the 20 ms requests sit at or below 32 but above 16; the failure at 3000.
    bucket = "locust_request_duration_milliseconds_bucket"
    assert got[(bucket, tuple(sorted((*ok, ("le", "32.0")))))] == 4
    assert got[(bucket, tuple(sorted((*ok, ("le", "16.0")))))] == 0
    assert 80 <= got[("locust_request_duration_milliseconds_sum", ok)] <= 81
    failed_sum = got[("locust_request_duration_milliseconds_sum", tuple(sorted(bad.items())))]
    assert 2999 <= failed_sum <= 3001
    wake = _labels(method="rps", name="TimeToWake", status="success", user_class="coding-session")
    assert got[("locust_requests_total", wake)] == 1
    assert not [k for k in got if k[0] == "locust_requests_total" and ("name", "Backlog") in k[1]]
    assert got[("locust_users", _labels(user_class="coding-session"))] == 10
    # The actors by state are the substrate's listing's (test_actor_census.py): no census,
    # no locust_actors, rather than the sessions' guess under upstream's names.
    assert not [k for k in got if k[0] == "locust_actors"]
    # Beside, not instead of, the agentsession_* families.
    assert any(k[0] == "agentsession_requests_total" for k in got)
