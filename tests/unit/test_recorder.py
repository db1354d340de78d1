"""Recorder: per-second intervals, exact window arithmetic, totals, shard merge."""

import math
from fractions import Fraction

import numpy as np
import pytest

from agentsession_core.measure.recorder import NS_PER_S, Recorder

WALL0 = 1_700_000_000.0  # a whole unix second, so second boundaries are easy to reason about
MONO0 = 5 * NS_PER_S


class FakeClock:
    def __init__(self) -> None:
        self.now = MONO0

    def __call__(self) -> int:
        return self.now


def make_recorder(wall0: float = WALL0, mono0: int = MONO0) -> tuple[Recorder, FakeClock]:
    clock = FakeClock()
    clock.now = mono0
    return Recorder(clock_ns=clock, wall_clock=lambda: wall0), clock


def exact_quantile(values, q):
    s = sorted(values)
    return s[max(1, math.ceil(Fraction(str(q)) * len(s))) - 1]


def book_run(rec, seconds=20, per_second=200, seed=1):
    """Books a deterministic workload; returns the samples as (done_ns, response_ms, failed)."""
    rng = np.random.default_rng(seed)
    row_a = rec.row("http", "Step_a")
    row_b = rec.row("grpc", "ResumeActor")
    samples = []
    for s in range(seconds):
        for _ in range(per_second):
            done = MONO0 + s * NS_PER_S + int(rng.integers(0, NS_PER_S))
            response_ns = int(rng.lognormal(16, 1))  # ~ 9 ms median
            intended = done - response_ns
            sent = intended + int(rng.integers(0, 2_000_000))
            failed = rng.random() < 0.02
            row = row_a if rng.random() < 0.7 else row_b
            if failed:
                row.fail(intended, min(sent, done), done, "UNAVAILABLE")
            else:
                row.ok(intended, min(sent, done), done, nbytes=100)
            samples.append((row.name, done, response_ns / 1e6, failed))
    return samples


def test_row_handles_are_cached():
    rec, _ = make_recorder()
    assert rec.row("http", "x") is rec.row("http", "x")
    assert rec.row("http", "x") is not rec.row("grpc", "x")


def test_window_counts_and_percentiles_are_exact_by_done_second():
    rec, clock = make_recorder()
    samples = book_run(rec)
    clock.now = MONO0 + 25 * NS_PER_S
    start, end = MONO0 + 5 * NS_PER_S, MONO0 + 12 * NS_PER_S
    window = rec.window(start, end)
    assert window.duration_s == 7.0
    inside = [s for s in samples if start <= s[1] < end and s[0] == "Step_a"]
    stats = window.row("http", "Step_a")
    assert stats.count == len(inside)
    assert stats.failures == sum(1 for s in inside if s[3])
    assert stats.errors["UNAVAILABLE"] == stats.failures
    assert stats.bytes == 100 * (stats.count - stats.failures)
    responses = [s[2] for s in inside]
    for q in (0.5, 0.9, 0.99, 1.0):
        want = exact_quantile(responses, q)
        assert abs(stats.response.quantile(q) - want) <= 0.01 * want
    assert stats.rps(window.duration_s) == pytest.approx(len(inside) / 7)


def test_per_second_windows_sum_to_the_full_window():
    rec, clock = make_recorder()
    book_run(rec)
    clock.now = MONO0 + 30 * NS_PER_S
    full = rec.window(MONO0, MONO0 + 20 * NS_PER_S)
    key = ("http", "Step_a")
    total = None
    for s in range(20):
        w = rec.window(MONO0 + s * NS_PER_S, MONO0 + (s + 1) * NS_PER_S)
        part = w.rows.get(key)
        if part is None:
            continue
        if total is None:
            total = part.copy()
        else:
            total.merge(part)
    assert total is not None
    assert total.count == full.rows[key].count
    assert total.failures == full.rows[key].failures
    assert total.response == full.rows[key].response
    assert total.service == full.rows[key].service
    assert total.start_lag == full.rows[key].start_lag
    # Adjacent windows partition: [0,7) + [7,20) == [0,20).
    a = rec.window(MONO0, MONO0 + 7 * NS_PER_S).rows[key]
    b = rec.window(MONO0 + 7 * NS_PER_S, MONO0 + 20 * NS_PER_S).rows[key]
    a.merge(b)
    assert a.count == full.rows[key].count and a.response == full.rows[key].response


def test_boundaries_are_whole_seconds_end_exclusive():
    rec, clock = make_recorder()
    row = rec.row("http", "p")
    row.ok(MONO0 + NS_PER_S - 2, MONO0 + NS_PER_S - 2, MONO0 + NS_PER_S - 1)  # last ns of s0
    row.ok(MONO0 + NS_PER_S, MONO0 + NS_PER_S, MONO0 + NS_PER_S)  # first ns of s1
    clock.now = MONO0 + 3 * NS_PER_S
    assert rec.window(MONO0, MONO0 + NS_PER_S).row("http", "p").count == 1
    assert rec.window(MONO0 + NS_PER_S, MONO0 + 2 * NS_PER_S).row("http", "p").count == 1
    # A mid-second start includes its whole second; a mid-second end excludes its second.
    w = rec.window(MONO0 + NS_PER_S // 2, MONO0 + NS_PER_S + NS_PER_S // 2)
    assert (w.start_s, w.end_s) == (WALL0, WALL0 + 1)
    assert w.row("http", "p").count == 1


def test_open_second_is_not_in_windows_but_is_in_totals():
    rec, clock = make_recorder()
    row = rec.row("http", "p")
    row.ok(MONO0, MONO0, MONO0 + 10)
    clock.now = MONO0 + NS_PER_S // 2
    rec.flush()
    assert rec.window(MONO0, MONO0 + NS_PER_S).row("http", "p").count == 0
    assert rec.totals().row("http", "p").count == 1
    clock.now = MONO0 + NS_PER_S
    assert rec.window(MONO0, MONO0 + NS_PER_S).row("http", "p").count == 1
    assert rec.totals().row("http", "p").count == 1  # not double counted


def test_flush_is_idempotent_and_late_samples_join_their_second():
    rec, clock = make_recorder()
    row = rec.row("http", "p")
    row.ok(MONO0, MONO0, MONO0 + 1)
    clock.now = MONO0 + 2 * NS_PER_S
    rec.flush()
    rec.flush()
    assert rec.intervals[int(WALL0)][("http", "p")].count == 1
    row.ok(MONO0, MONO0, MONO0 + 2)  # booked after its second closed
    rec.flush()
    assert rec.intervals[int(WALL0)][("http", "p")].count == 2
    assert rec.totals().row("http", "p").count == 2


def test_events_cancellations_and_gauges():
    rec, clock = make_recorder()
    crash = rec.row("actor", "CrashCount")
    crash.event(MONO0 + 10, 2)
    crash.event(MONO0 + NS_PER_S + 10)
    step = rec.row("http", "Step_a")
    step.cancelled(MONO0, MONO0 + 5)
    rec.gauge("turnover_sessions", {"state": "awake"}, 4)
    clock.now = MONO0 + NS_PER_S
    rec.flush()
    rec.gauge("turnover_sessions", {"state": "awake"}, 6)
    clock.now = MONO0 + 2 * NS_PER_S
    w = rec.window(MONO0, MONO0 + 2 * NS_PER_S)
    assert w.row("actor", "CrashCount").events == 3
    assert w.row("actor", "CrashCount").count == 0
    assert w.row("http", "Step_a").cancelled == 1
    assert w.row("http", "Step_a").failures == 0
    assert w.gauge_series("turnover_sessions") == [
        (WALL0, {"state": "awake"}, 4.0),
        (WALL0 + 1, {"state": "awake"}, 6.0),
    ]


def test_latency_views_are_from_intended_and_from_sent():
    rec, clock = make_recorder()
    rec.row("rps", "TimeToWake").ok(MONO0, MONO0 + 40_000_000, MONO0 + 100_000_000)
    clock.now = MONO0 + NS_PER_S
    stats = rec.window(MONO0, MONO0 + NS_PER_S).row("rps", "TimeToWake")
    assert stats.response.quantile(0.5) == 100.0
    assert stats.service.quantile(0.5) == 60.0
    assert stats.start_lag.quantile(0.5) == 40.0
    m = stats.measurements(1.0)
    assert m["p99"] == 100.0 and m["service_p99"] == 60.0 and m["start_lag_p99"] == 40.0
    assert {"p50", "p66", "p75", "p80", "p90", "p95", "p98", "p99", "p99_9"} <= m.keys()


def test_server_time_is_booked_beside_client_times_where_the_answer_gave_it():
    rec, clock = make_recorder()
    row = rec.row("control", "SuspendActor")
    row.ok(MONO0, MONO0, MONO0 + 9_000_000, server_us=2_000)  # 2 ms of the 9 ms on the server
    row.ok(MONO0, MONO0, MONO0 + 9_000_000, server_us=4_000)
    row.ok(MONO0, MONO0, MONO0 + 9_000_000)  # no x-server-elapsed-us: not a zero
    row.fail(MONO0, MONO0, MONO0 + 9_000_000, "UNAVAILABLE")
    other = rec.row("control", "CreateActor")
    other.ok(MONO0, MONO0, MONO0 + 1_000_000)
    clock.now = MONO0 + NS_PER_S
    stats = rec.window(MONO0, MONO0 + NS_PER_S).row("control", "SuspendActor")
    assert (stats.count, stats.server.count) == (4, 2)
    assert stats.server.quantile(0.5) == pytest.approx(2.0, rel=0.01)
    m = stats.measurements(1.0)
    assert m["server_count"] == 2
    assert m["server_max"] == pytest.approx(4.0, rel=0.01)
    assert m["server_p50"] == pytest.approx(2.0, rel=0.01)
    assert m["service_p50"] == 9.0  # the client's view is unchanged
    # A row whose answers never said has no server keys at all (not zeros).
    silent = rec.window(MONO0, MONO0 + NS_PER_S).row("control", "CreateActor").measurements(1.0)
    assert not {k for k in silent if k.startswith("server")}
    # Totals and merged shards carry it too.
    assert rec.totals().row("control", "SuspendActor").server.count == 2
    shard, _ = make_recorder()
    shard.row("control", "SuspendActor").ok(MONO0, MONO0, MONO0 + 1, server_us=1_000)
    rec.merge(shard)
    assert rec.totals().row("control", "SuspendActor").server.count == 3


def test_merge_of_shards_is_a_plain_sum_even_with_different_clocks():
    whole, clock_w = make_recorder()
    shard_a, clock_a = make_recorder()
    # Shard b's monotonic clock has another origin; its wall anchor lines it up.
    shard_b, clock_b = make_recorder(mono0=MONO0 + 777 * NS_PER_S)
    shift = 777 * NS_PER_S
    rng = np.random.default_rng(4)
    for i in range(3000):
        done = MONO0 + int(rng.integers(0, 10 * NS_PER_S))
        intended = done - int(rng.integers(1, 50_000_000))
        whole.row("http", "s").ok(intended, intended, done)
        if i % 2:
            shard_a.row("http", "s").ok(intended, intended, done)
        else:
            shard_b.row("http", "s").ok(intended + shift, intended + shift, done + shift)
    clock_w.now = clock_a.now = MONO0 + 6 * NS_PER_S
    clock_b.now = MONO0 + shift + 6 * NS_PER_S
    shard_a.flush()
    shard_b.flush()  # seconds 0..5 closed; 6..9 still buffered in both shards
    shard_a.merge(shard_b)
    clock_a.now = clock_w.now = MONO0 + 11 * NS_PER_S
    merged = shard_a.window(MONO0, MONO0 + 10 * NS_PER_S).rows[("http", "s")]
    expected = whole.window(MONO0, MONO0 + 10 * NS_PER_S).rows[("http", "s")]
    assert merged.count == expected.count == 3000
    assert merged.response == expected.response


def test_unix_time_mapping():
    rec, _ = make_recorder(wall0=WALL0 + 0.25)
    assert rec.unix_s(MONO0) == pytest.approx(WALL0 + 0.25)
    assert rec.second_of(MONO0 + 800_000_000) == int(WALL0) + 1
