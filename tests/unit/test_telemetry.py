"""Generator health rules and the /metrics endpoint over a real socket."""

import asyncio
import subprocess
import sys
import time

import httpx

from agentsession_core.measure.health import (
    CPU_GAUGE,
    DISPATCH_LAG_ROW,
    LOOP_LAG_ROW,
    GeneratorHealth,
)
from agentsession_core.measure.prometheus import MetricsServer
from agentsession_core.measure.recorder import NS_PER_S, Recorder

WALL0 = 1_700_000_000.0
MONO0 = 10 * NS_PER_S


def fake_recorder():
    now = [MONO0]
    return Recorder(clock_ns=lambda: now[0], wall_clock=lambda: WALL0), now


def heartbeat(rec, second, lag_ms, n=100):
    row = rec.row(*LOOP_LAG_ROW)
    base = MONO0 + second * NS_PER_S
    for i in range(n):
        woke = base + i * (NS_PER_S // n)  # lag is booked in the second the beat woke in
        row.ok(woke - int(lag_ms * 1e6), woke, woke)


def test_saturation_rules_per_second():
    rec, now = fake_recorder()
    health = GeneratorHealth(rec)
    health.monitored.append([int(WALL0), int(WALL0) + 10])
    for s in range(10):
        if s != 6:  # second 6: the heartbeat never ran (a stall)
            heartbeat(rec, s, 80.0 if s == 2 else 0.5)
    dispatch = rec.row(*DISPATCH_LAG_ROW)
    for i in range(100):  # second 4: dispatch releases 30 ms late
        t = MONO0 + 4 * NS_PER_S + i * 1_000_000
        dispatch.ok(t, t + 30_000_000, t + 30_000_000)
    now[0] = MONO0 + 8 * NS_PER_S + 1
    rec.gauge(CPU_GAUGE, {}, 40.0)
    rec.flush()
    rec.gauge(CPU_GAUGE, {}, 97.0)  # second 8 runs hot
    now[0] = MONO0 + 9 * NS_PER_S
    rec.flush()
    now[0] = MONO0 + 11 * NS_PER_S
    rec.flush()
    found = dict(health.saturated_in(int(WALL0), int(WALL0) + 10))
    assert sorted(s - int(WALL0) for s in found) == [2, 4, 6, 8, 9]
    assert "loop lag" in found[int(WALL0) + 2]
    assert "dispatch" in found[int(WALL0) + 4]
    assert "stalled" in found[int(WALL0) + 6]
    assert "cpu" in found[int(WALL0) + 8]
    assert health.saturated_seconds(MONO0, MONO0 + 2 * NS_PER_S) == 0
    assert health.saturated_seconds(MONO0, MONO0 + 10 * NS_PER_S) == 5
    assert not health.is_void(rec.window(MONO0, MONO0 + 2 * NS_PER_S))
    assert health.is_void(rec.window(MONO0, MONO0 + 10 * NS_PER_S))


def test_void_tolerates_one_percent_of_a_long_window():
    rec, now = fake_recorder()
    health = GeneratorHealth(rec)
    for s in range(200):
        heartbeat(rec, s, 90.0 if s in (5, 6) else 0.2, n=10)
    now[0] = MONO0 + 201 * NS_PER_S
    window = rec.window(MONO0, MONO0 + 200 * NS_PER_S)
    assert health.saturated_seconds(MONO0, MONO0 + 200 * NS_PER_S) == 2
    assert not health.is_void(window)  # 2 ≤ floor(1 % × 200)
    assert health.void_reason(window) is None
    heartbeat(rec, 7, 90.0, n=100)
    rec.flush()
    assert health.is_void(window)
    reason = health.void_reason(window)
    # The reason says how many seconds, the allowance, and the first offending rule.
    assert "3 of 200 s" in reason and "allowed 2" in reason and "loop lag p99" in reason


async def test_heartbeat_measures_a_blocked_loop():
    rec = Recorder()
    health = GeneratorHealth(rec, interval=0.005)
    await health.start()

    def beats() -> int:
        return rec.totals().row(*LOOP_LAG_ROW).response.count

    async def until_beats(n: int) -> None:
        """A count of beats, however long they take; the cap only catches a hang."""
        deadline = time.monotonic() + 60
        while beats() < n:
            assert time.monotonic() < deadline, beats()
            await asyncio.sleep(0.001)

    await until_beats(5)
    before = beats()
    # The beat due within 5 ms cannot run while the loop is blocked: it is at least 115 ms late.
    time.sleep(0.12)  # noqa: ASYNC251 -- blocking the loop is what this test measures
    await until_beats(before + 1)
    await health.stop()
    lag = rec.totals().row(*LOOP_LAG_ROW).response
    assert lag.count > before >= 5
    assert lag.max >= 100.0


async def test_metrics_endpoint_serves_rows_and_gauges():
    rec = Recorder()
    now = time.monotonic_ns()
    step = rec.row("http", "Step_01_read_task")
    for _ in range(10):
        step.ok(now - 20_000_000, now - 15_000_000, now)
    step.fail(now - 3_000_000_000, now - 3_000_000_000, now, "DEADLINE_EXCEEDED")
    step.cancelled(now, now)
    rec.row("actor", "CrashCount").event(now)
    rec.row("grpc", "CreateActor").ok(now - 5_000_000, now - 5_000_000, now)
    rec.row("rps", "TimeToWake").ok(now - 50_000_000, now - 40_000_000, now)
    for state, n in (("awake", 5), ("parked", 95), ("waking", 1), ("parking", 0)):
        rec.gauge("turnover_sessions", {"state": state}, n)
    rec.gauge("sessions", {"state": "thinking"}, 7)
    server = MetricsServer(rec, 0)
    await server.start()
    try:
        assert server.port != 0
        async with httpx.AsyncClient() as client:
            resp = await client.get(server.url)
    finally:
        await server.stop()
    assert resp.status_code == 200
    text = resp.text
    label = 'name="Step_01_read_task",outcome="ok",type="http"'
    assert f"agentsession_requests_total{{{label}}} 10.0" in text
    assert (
        'agentsession_requests_total{name="Step_01_read_task",outcome="fail",type="http"} 1.0'
        in text
    )
    assert 'outcome="cancelled"' in text
    assert f'agentsession_request_duration_seconds_bucket{{le="0.025",{label}}} 10.0' in text
    assert f'agentsession_request_duration_seconds_bucket{{le="0.01",{label}}} 0.0' in text
    assert 'agentsession_turnover_sessions{state="parked"} 95.0' in text
    assert 'agentsession_sessions{state="thinking"} 7.0' in text
    assert 'agentsession_events_total{name="CrashCount",type="actor"} 1.0' in text
    # The upstream runner's row kinds are the `type` label (docs/SPEC.md §5.1, §5.7).
    assert 'agentsession_requests_total{name="CreateActor",outcome="ok",type="grpc"} 1.0' in text
    assert 'agentsession_requests_total{name="TimeToWake",outcome="ok",type="rps"} 1.0' in text


def test_health_does_not_import_the_prometheus_view():
    # Sessions import health for DISPATCH_LAG_ROW; the Prometheus stack is ~1 s of import.
    probe = (
        "import sys; import agentsession_core.measure.health; "
        "print(sorted(m for m in ('prometheus_client', 'aiohttp.web') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
