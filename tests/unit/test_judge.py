"""Judging windows built from a real Recorder fed with synthetic samples at chosen times."""

import json

import numpy as np
import pytest

from agentsession_core.judge.abort import AbortMonitor
from agentsession_core.judge.artifacts import step_window_row, windows_jsonl
from agentsession_core.judge.drift import drift, ramp_result
from agentsession_core.judge.thresholds import parse_threshold, parse_thresholds
from agentsession_core.judge.verdict import WindowVerdict, headline, judge_window
from agentsession_core.measure.recorder import NS_PER_S, Recorder

WALL0 = 1_700_000_000.0
MONO0 = 5 * NS_PER_S
MS = 1_000_000


class Clock:
    def __init__(self) -> None:
        self.now = MONO0

    def __call__(self) -> int:
        return self.now


def recorder() -> tuple[Recorder, Clock]:
    clock = Clock()
    return Recorder(clock_ns=clock, wall_clock=lambda: WALL0), clock


def book(rec, kind, name, *, second, n, latency_ms, fail_every=0, seed=0):
    """n samples done inside `second` (seconds after the recorder's start)."""
    rng = np.random.default_rng(seed)
    row = rec.row(kind, name)
    for i in range(n):
        done = MONO0 + second * NS_PER_S + int(rng.integers(1, NS_PER_S - 1))
        lat = int(latency_ms * MS * rng.uniform(0.9, 1.1))
        if fail_every and i % fail_every == 0:
            row.fail(done - lat, done - lat, done, "UNAVAILABLE")
        else:
            row.ok(done - lat, done - lat, done)


def window(rec, clock, first, last):
    clock.now = MONO0 + (last + 1) * NS_PER_S
    return rec.window(MONO0 + first * NS_PER_S, MONO0 + last * NS_PER_S)


def turnover_window(wake_ms=100.0, wakes_per_s=4, seconds=10, step_fail_every=0):
    rec, clock = recorder()
    for s in range(seconds):
        book(rec, "rps", "TimeToWake", second=s, n=wakes_per_s, latency_ms=wake_ms, seed=s)
        book(
            rec,
            "http",
            "WakeFirstTouch",
            second=s,
            n=wakes_per_s,
            latency_ms=wake_ms / 2,
            seed=100 + s,
        )
        book(
            rec,
            "http",
            "Step_01_read",
            second=s,
            n=3,
            latency_ms=20,
            seed=200 + s,
            fail_every=step_fail_every,
        )
        book(
            rec,
            "http",
            "Step_02_edit",
            second=s,
            n=3,
            latency_ms=40,
            seed=300 + s,
            fail_every=step_fail_every,
        )
        book(rec, "generator", "LoopLag", second=s, n=50, latency_ms=5000, seed=400 + s)
    return window(rec, clock, 0, seconds)


def test_a_threshold_met_passes_and_one_missed_breaks():
    w = turnover_window(wake_ms=100)
    rate = "achieved_rps >= 0.95 * target"
    ok = judge_window(
        w, parse_thresholds(["TimeToWake: p99 < 2s", rate]), index=0, level=4.0, target=4.0
    )
    assert ok.outcome == "pass"
    assert [r.passed for r in ok.results] == [True, True]
    assert ok.results[1].observed == pytest.approx(4.0)
    assert ok.results[0].samples == 40

    bad = judge_window(
        w, parse_thresholds(["TimeToWake: p99 < 50ms", rate]), index=0, level=5.0, target=5.0
    )
    assert bad.outcome == "break"
    assert [r.passed for r in bad.results] == [False, False]
    assert "missed" in bad.results[0].detail and "TimeToWake p99" in bad.results[0].detail


def test_generator_rows_never_count_as_requests():
    # LoopLag is booked at 5 s; an "all requests" p99 rule must not see it.
    w = turnover_window(wake_ms=100)
    v = judge_window(w, [parse_threshold("max < 1s")], index=0, level=1, target=1)
    assert v.outcome == "pass"
    assert v.headline["requests"]["count"] == 10 * (4 + 4 + 6)


def test_step_pattern_merges_rows_across_kinds_and_counts_failures():
    w = turnover_window(step_fail_every=3)  # 1 of every 3 step requests fails
    v = judge_window(
        w, [parse_threshold("Step_*: failure_ratio < 0.01 (min 50)")], index=0, level=1, target=1
    )
    result = v.results[0]
    assert result.samples == 60
    assert result.observed == pytest.approx(20 / 60)
    assert v.outcome == "break"


def test_rows_are_selected_by_name_or_by_their_stats_jsonl_metric_name():
    w = turnover_window(wake_ms=100)
    by_name, by_metric, steps, http, grpc = judge_window(
        w,
        parse_thresholds(
            [
                "TimeToWake: p99 < 2s",
                "rps_TimeToWake: p99 < 2s",
                "http_Step_*: count > 0",
                "http_*: count > 0",
                "grpc_*: count >= 0",
            ]
        ),
        index=0,
        level=1,
        target=1,
    ).results
    assert by_name.samples == by_metric.samples == 40
    assert by_name.observed == by_metric.observed
    assert steps.samples == 60  # both http Step_ rows, not WakeFirstTouch
    assert http.samples == 40 + 60  # WakeFirstTouch and the steps, not rps/TimeToWake
    assert grpc.samples == 0  # no control-plane rows in this window


def test_too_few_samples_are_reported_not_judged():
    w = turnover_window(seconds=2)
    v = judge_window(
        w,
        [
            parse_threshold("TimeToWake: p99 < 1ms (min 50)"),
            parse_threshold("ResumeActor: p99 < 1ms"),
        ],
        index=0,
        level=1,
        target=1,
    )
    assert [r.passed for r in v.results] == [None, None]
    assert v.results[0].samples == 8 and "min 50" in v.results[0].detail
    assert v.outcome == "pass"


def test_void_and_aborted_override_thresholds():
    w = turnover_window(wake_ms=5000)
    rules = [parse_threshold("TimeToWake: p99 < 2s")]
    void = judge_window(w, rules, index=0, level=1, target=1, void_reason="loop lag")
    assert void.outcome == "void" and void.void_reason == "loop lag"
    assert void.results[0].passed is False  # still reported
    aborted = judge_window(
        w, rules, index=0, level=1, target=1, void_reason="x", abort_reason="abort rule tripped"
    )
    assert aborted.outcome == "aborted"


def test_achieved_rps_without_turnover_uses_http_steps_and_needs_a_target():
    rec, clock = recorder()
    for s in range(5):
        book(rec, "http", "Step_a", second=s, n=6, latency_ms=10, seed=s)
        book(rec, "grpc", "ResumeActor", second=s, n=6, latency_ms=10, seed=9 + s)
    w = window(rec, clock, 0, 5)
    v = judge_window(
        w, [parse_threshold("achieved_rps >= 0.5 * target")], index=0, level=1, target=None
    )
    assert v.results[0].passed is None and "target" in v.results[0].detail
    assert v.headline["requests"]["achieved_rps"] == pytest.approx(6.0)
    assert "TimeToWake" not in v.headline


def test_a_dead_turnover_window_misses_achieved_rps():
    rec, clock = recorder()
    rec.gauge("turnover_sessions", {"state": "awake"}, 4)
    w = window(rec, clock, 0, 5)
    v = judge_window(
        w, [parse_threshold("achieved_rps >= 0.95 * target")], index=0, level=2, target=2
    )
    assert v.results[0].observed == 0.0
    assert v.outcome == "break"


def test_headline_sections():
    h = headline(turnover_window(wake_ms=100))
    assert set(h) == {"TimeToWake", "WakeFirstTouch", "Step_*", "requests"}
    assert 90 <= h["TimeToWake"]["p50"] <= 111
    assert 45 <= h["WakeFirstTouch"]["p99"] <= 56
    assert h["Step_*"]["count"] == 60
    assert h["TimeToWake"]["p50"] <= h["TimeToWake"]["p99"] <= h["TimeToWake"]["max"]


def verdict(index, level, outcome, p99=100.0):
    return WindowVerdict(
        index=index,
        level=level,
        start_unix=index * 10.0,
        end_unix=index * 10.0 + 10,
        outcome=outcome,
        headline={"TimeToWake": {"p50": p99 / 2, "p90": p99 * 0.8, "p99": p99}},
    )


def test_drift_is_the_least_squares_slope_at_the_first_level():
    vs = [
        verdict(0, 1, "pass", 100),
        verdict(1, 1, "break", 110),
        verdict(2, 1, "void", 999),
        verdict(3, 1, "pass", 130),
        verdict(4, 2, "pass", 900),
    ]
    d = drift(vs)
    assert d["TimeToWake.p99"] == pytest.approx(10.0)
    assert d["TimeToWake.p50"] == pytest.approx(5.0)
    assert drift([verdict(0, 1, "pass")]) == {}
    assert drift([]) == {}


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([(1, "pass"), (1.5, "pass"), (2, "break")], (1.5, 2)),
        ([(1, "pass"), (1.5, "void"), (2, "pass")], (2, None)),
        ([(1, "break"), (1.5, "pass")], (None, 1)),
        ([(1, "pass"), (1, "aborted")], (None, 1)),
        ([(1, "void")], (None, None)),
        ([], (None, None)),
    ],
)
def test_ramp_result(outcomes, expected):
    vs = [verdict(i, level, o) for i, (level, o) in enumerate(outcomes)]
    r = ramp_result(vs)
    assert (r["last_held_level"], r["first_broken_level"]) == expected


def test_windows_jsonl_round_trips_and_step_window_row_is_flat():
    w = turnover_window()
    v = judge_window(w, parse_thresholds(["TimeToWake: p99 < 2s"]), index=3, level=1.5, target=4)
    text = windows_jsonl([v, v])
    lines = text.splitlines()
    assert len(lines) == 2
    back = WindowVerdict.from_dict(json.loads(lines[0]))
    assert back == v
    row = step_window_row(v, tag="nightly", test_name="demo")
    assert row["metric"] == "step_window" and row["tag"] == "nightly"
    m = row["measurements"]
    assert m["index"] == 3 and m["outcome"] == "pass" and m["duration_s"] == 10
    assert m["time_to_wake_p99"] == v.headline["TimeToWake"]["p99"]
    assert m["requests_failure_ratio"] == 0.0
    assert all(not isinstance(x, dict) for x in m.values())


def test_abort_monitor_waits_for_warmup_then_trips_on_the_sliding_window():
    rec, clock = recorder()
    rules = parse_thresholds(["TimeToWake: failure_ratio < 0.5 (min 5)"], abort=True)
    monitor = AbortMonitor(rec, rules, sliding_s=3, delay_s=5, target=lambda _: 4.0, start_ns=MONO0)
    for s in range(4):  # healthy
        book(rec, "rps", "TimeToWake", second=s, n=4, latency_ms=50, seed=s)
    for s in range(4, 12):  # every wake fails from second 4 on
        book(rec, "rps", "TimeToWake", second=s, n=4, latency_ms=50, fail_every=1, seed=s)
    tripped_at = None
    for tenth in range(0, 130):
        clock.now = MONO0 + tenth * NS_PER_S // 10
        reason = monitor.check(clock.now)
        if reason and tripped_at is None:
            tripped_at = tenth / 10
    # Nothing before the 5 s warm-up; with a 3 s window of whole seconds, seconds 4..6 are
    # all failures once second 6 has closed (t = 7 s).
    assert tripped_at is not None and 5 <= tripped_at <= 7.0
    assert "TimeToWake: failure_ratio < 0.5" in monitor.reason
    assert monitor.check(clock.now) == monitor.reason  # sticky


def test_abort_monitor_stays_quiet_while_rules_hold_or_lack_samples():
    rec, clock = recorder()
    rules = parse_thresholds(
        ["TimeToWake: p99 < 1s (min 10)", "achieved_rps >= 0.5 * target"], abort=True
    )
    monitor = AbortMonitor(rec, rules, sliding_s=5, delay_s=0, target=lambda _: 4.0, start_ns=MONO0)
    for s in range(20):
        book(rec, "rps", "TimeToWake", second=s, n=3, latency_ms=100, seed=s)
    for tenth in range(0, 200, 3):
        clock.now = MONO0 + tenth * NS_PER_S // 10
        assert monitor.check(clock.now) is None
    assert [r.passed for r in monitor.last_results] == [True, True]


def test_abort_monitor_trips_on_collapsed_throughput():
    rec, clock = recorder()
    rules = parse_thresholds(["achieved_rps >= 0.5 * target"], abort=True)
    monitor = AbortMonitor(rec, rules, sliding_s=2, delay_s=2, target=lambda _: 4.0, start_ns=MONO0)
    for s in range(5):
        book(rec, "rps", "TimeToWake", second=s, n=4, latency_ms=100, seed=s)
    reasons = {}
    for s in range(1, 12):
        clock.now = MONO0 + s * NS_PER_S
        reasons[s] = monitor.check(clock.now)
    assert reasons[5] is None
    first = min(s for s, r in reasons.items() if r)
    assert first in (6, 7)  # the window [4, 6) is half empty: 2 wakes/s is still >= 2
    assert "achieved_rps" in reasons[first]


def test_failed_wakes_do_not_count_as_achieved():
    rec, clock = recorder()
    for s in range(5):  # 4 wakes a second, every second one fails
        book(rec, "rps", "TimeToWake", second=s, n=4, latency_ms=50, fail_every=2, seed=s)
    w = window(rec, clock, 0, 5)
    v = judge_window(
        w, [parse_threshold("achieved_rps >= 0.95 * target")], index=0, level=1, target=4
    )
    assert v.results[0].observed == pytest.approx(2.0)
    assert v.outcome == "break"
