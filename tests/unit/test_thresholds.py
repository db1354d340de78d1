"""The threshold language: what parses to what, and bad lines named by place."""

import pytest

from agentsession_core.errors import UsageError
from agentsession_core.judge.thresholds import parse_threshold, parse_thresholds


@pytest.mark.parametrize(
    ("text", "rows", "stat", "op", "value"),
    [
        ("TimeToWake: p99 < 2s", "TimeToWake", "p99", "<", 2000.0),
        ("TimeToWake: p99 < 2000", "TimeToWake", "p99", "<", 2000.0),
        ("WakeFirstTouch:p90<=500ms", "WakeFirstTouch", "p90", "<=", 500.0),
        ("Step_*: failure_ratio < 0.01", "Step_*", "failure_ratio", "<", 0.01),
        ("Step_*: failure_ratio < 1%", "Step_*", "failure_ratio", "<", 0.01),
        ("p(99.9) < 1.5m", None, "p99_9", "<", 90_000.0),
        ("ResumeActor: p(95) > 0", "ResumeActor", "p95", ">", 0.0),
        ("Step_0?_*: avg < 1s", "Step_0?_*", "mean", "<", 1000.0),
        ("TimeToWake: count >= 100", "TimeToWake", "count", ">=", 100.0),
    ],
)
def test_lines_parse(text, rows, stat, op, value):
    t = parse_threshold(text)
    assert (t.rows, t.stat, t.op) == (rows, stat, op)
    assert t.value == pytest.approx(value)
    assert t.target_factor is None
    assert not t.abort


def test_target_factor_and_options():
    t = parse_threshold("achieved_rps >= 0.95 * target (min 10, abort)")
    assert (t.rows, t.stat, t.op, t.target_factor, t.min_samples, t.abort) == (
        None,
        "achieved_rps",
        ">=",
        0.95,
        10,
        True,
    )
    assert t.bound(4.0) == pytest.approx(3.8)
    assert t.bound(None) is None
    assert t.holds(3.8, 4.0) is True
    assert t.holds(3.7, 4.0) is False


def test_default_minimums_and_abort_list():
    assert parse_threshold("TimeToWake: p99 < 2s").min_samples == 1
    assert parse_threshold("Step_*: failure_ratio < 0.01 (min 50)").min_samples == 50
    assert parse_threshold("achieved_rps >= 1").min_samples == 0
    rules = parse_thresholds(
        ["TimeToWake: p99 < 10s", "achieved_rps > 0"], where="abort", abort=True
    )
    assert all(r.abort for r in rules)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("TimeToWake: p98 << 2s", "expected"),
        ("TimeToWake: p97 < 2s", "unknown statistic 'p97'"),
        ("TimeToWake: p99 = 2s", "operator '='"),
        ("TimeToWake: p99 < 2 parsecs", "expected"),
        ("TimeToWake: p99 < 2parsecs", "unknown unit"),
        ("TimeToWake: p99 < fast", "bad duration"),
        ("Step_*: failure_ratio < lots", "not a number"),
        ("TimeToWake: achieved_rps > 1", "run-level"),
        ("achieved_rps > 0.9 * goal", "only '* target'"),
        ("TimeToWake: p99 < 2 * target", "latency cannot be scaled"),
        ("Step_*: failure_ratio < -0.1", "negative"),
        ("Step_*: failure_ratio < 0.1 (max 3)", "unknown option 'max 3'"),
        ("   ", "empty threshold"),
    ],
)
def test_malformed_lines_name_the_parameter_and_the_text(text, fragment):
    with pytest.raises(UsageError) as info:
        parse_thresholds(["TimeToWake: p99 < 2s", text], where="thresholds")
    message = str(info.value)
    assert message.startswith("thresholds[1]: ")
    assert fragment in message
    if text.strip():
        assert repr(text) in message
    assert info.value.exit_code == 2
