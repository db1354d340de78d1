"""Each headline figure's interval: a block bootstrap over the hold's seconds."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentsession_core.judge.hold_seconds import HoldSeconds, parse, render
from agentsession_core.judge.uncertainty import figures
from agentsession_core.measure.histogram import LogHistogram, quantile_of_counts
from tests.unit.gate_runs import seconds


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.floats(min_value=0.0, max_value=1e5, allow_nan=False), min_size=1, max_size=60
    ),
    q=st.sampled_from([0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0]),
)
def test_the_vectorised_quantile_is_the_histograms_own(values, q):
    hist = LogHistogram()
    hist.add_many(values)
    d = hist.to_dict()
    slots = np.asarray(d["slots"], dtype=np.int64)
    counts = np.asarray([[d["zero"], *d["counts"]]], dtype=np.int64)
    got = quantile_of_counts(counts, slots, q, np.array([hist.min]), np.array([hist.max]))
    assert got[0] == hist.quantile(q)


def test_a_figure_is_the_whole_holds_percentile_with_its_samples():
    records = seconds(p50_ms=40, seconds=120, per_second=5)
    whole = LogHistogram()
    for r in records:
        whole.merge(LogHistogram.from_dict(r["sections"]["TimeToWake"]))
    found = figures(HoldSeconds.of_records(records), seed=3)
    p50, p99 = found["TimeToWake.p50"], found["TimeToWake.p99"]
    assert p50["value"] == whole.quantile(0.5) and p99["value"] == whole.quantile(0.99)
    assert p50["n"] == 600 and p50["low"] < p50["value"] < p50["high"]
    # 600 samples leave 6 beyond p99: too few to estimate it (10 needed)
    assert p99["beyond"] == 6 and p99["estimable"] is False
    # blocks of round(∛120) = 5 seconds (docs/SPEC.md §6.2): 24 of them
    assert p50["estimable"] is True and p50["blocks"] == 24
    assert found["requests.achieved_rps"]["value"] == pytest.approx(5.0)


def test_p99_is_estimable_from_a_thousand_samples():
    found = figures(HoldSeconds.of_records(seconds(p50_ms=40, seconds=250, per_second=4)))
    assert found["TimeToWake.p99"]["n"] == 1000 and found["TimeToWake.p99"]["estimable"]
    assert not found["TimeToWake.p99_9"]["estimable"]


def test_seconds_that_move_together_widen_the_interval():
    """The same samples, once in runs of slow seconds (a restore stalls 10 s at a time) and
    once in a shuffled order: blocks keep the runs together, so the first interval is wider."""
    rng = np.random.default_rng(5)
    slow_runs = rng.random(60) < 0.5
    records = []
    for t in range(600):
        slow = slow_runs[t // 10]
        records += seconds(p50_ms=80 if slow else 40, seconds=1, per_second=4, seed=t)
    for t, r in enumerate(records):
        r["t"] = t
    shuffled = [records[i] for i in rng.permutation(len(records))]
    together = figures(HoldSeconds.of_records(records), seed=1)["TimeToWake.p50"]
    apart = figures(HoldSeconds.of_records(shuffled), seed=1)["TimeToWake.p50"]
    assert together["value"] == apart["value"]
    assert together["se_log"] > 1.3 * apart["se_log"]


def test_the_same_seed_gives_the_same_interval():
    hold = HoldSeconds.of_records(seconds(p50_ms=40, seconds=60))
    assert figures(hold, seed=9) == figures(hold, seed=9)


def test_hold_seconds_round_trip_and_a_bad_line_is_named():
    records = seconds(p50_ms=40, seconds=3)
    assert parse(render(records)) == records
    broken = render(records) + '{"t": 5}\n'
    with pytest.raises(ValueError, match="line 4"):
        parse(broken)
