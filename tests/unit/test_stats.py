"""LogHistogram against exact sorted-sample percentiles."""

import math
import pickle
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsession_core.measure.histogram import (
    PERCENTILES,
    LogHistogram,
    SparseHistogram,
    merge_sparse,
    percentiles,
    percentiles_through,
)

QUANTILES = [
    0.0,
    0.001,
    0.01,
    0.1,
    0.25,
    0.5,
    0.66,
    0.75,
    0.8,
    0.9,
    0.95,
    0.98,
    0.99,
    0.995,
    0.999,
    0.9999,
    1.0,
]


def exact_quantile(sorted_values: np.ndarray, q: float) -> float:
    """The sample at rank ceil(q·n) (1-based), q=0 → the minimum."""
    n = len(sorted_values)
    rank = max(1, math.ceil(Fraction(str(q)) * n))
    return float(sorted_values[rank - 1])


def distributions(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "lognormal": rng.lognormal(3.0, 1.0, 50_000),
        "exponential": rng.exponential(2.0, 50_000),
        "uniform_wide": rng.uniform(0.01, 60_000.0, 50_000),
        "bimodal": np.concatenate(
            [rng.normal(5.0, 0.5, 40_000).clip(0.01), rng.normal(2_000.0, 100.0, 10_000)]
        ),
        "pareto_tail": (rng.pareto(1.5, 50_000) + 1.0) * 3.0,
    }


@pytest.mark.parametrize("name", list(distributions(0)))
def test_quantiles_within_one_percent_of_exact(name):
    values = distributions(7)[name]
    hist = LogHistogram()
    hist.add_many(values)
    exact = np.sort(values)
    for q in QUANTILES:
        want = exact_quantile(exact, q)
        got = hist.quantile(q)
        assert abs(got - want) <= 0.01 * want, (name, q, got, want)
    assert hist.count == len(values)
    assert hist.min == exact[0] and hist.max == exact[-1]
    assert hist.mean() == pytest.approx(values.mean(), rel=1e-9)


def test_add_and_add_many_agree():
    values = distributions(3)["lognormal"][:5_000]
    one_by_one = LogHistogram()
    for v in values:
        one_by_one.add(float(v))
    bulk = LogHistogram()
    bulk.add_many(values)
    assert one_by_one == bulk
    for q in QUANTILES:
        assert one_by_one.quantile(q) == bulk.quantile(q)


def test_merge_of_splits_equals_the_whole():
    values = distributions(11)["bimodal"]
    whole = LogHistogram()
    whole.add_many(values)
    parts = np.array_split(np.random.default_rng(1).permutation(values), 7)
    merged = LogHistogram()
    for part in parts:
        h = LogHistogram()
        h.add_many(part)
        merged.merge(h)
    assert merged == whole
    assert merged.total == pytest.approx(whole.total)
    for key, q in PERCENTILES.items():
        assert merged.quantile(q) == whole.quantile(q), key
    sparse = merge_sparse(SparseHistogram.of_values(p) for p in parts)
    assert sparse == whole
    pairwise = SparseHistogram.of_values(parts[0])
    for p in parts[1:]:
        pairwise = pairwise.merged(SparseHistogram.of_values(p))
    assert pairwise.to_histogram() == whole


def test_of_rows_matches_of_values():
    rng = np.random.default_rng(5)
    block = rng.exponential(10.0, (3, 2_000))
    for row, sparse in zip(block, SparseHistogram.of_rows(block), strict=True):
        assert sparse.to_histogram() == SparseHistogram.of_values(row).to_histogram()


def test_a_sparse_second_is_small_and_survives_pickling():
    """The recorder keeps one per second, row and view for the whole run (docs/SPEC.md §5.4):
    its size is what a long hold grows by (bench/RESULTS.md, fault soak)."""
    values = np.array([0.0, 3.2, 3.2, 12.0, 250.0])
    sparse = SparseHistogram.of_values(values)
    assert (sparse.count, sparse.zero, sparse.size) == (5, 1, 3)
    assert (sparse.min, sparse.max, sparse.total) == (0.0, 250.0, pytest.approx(268.4))
    # One bytes object (a subclass's GC header beside it): 32 bytes of head, 10 a bucket.
    assert len(sparse) == 32 + 10 * 3
    assert sys.getsizeof(sparse) <= sys.getsizeof(bytes(sparse)) + 16
    again = pickle.loads(pickle.dumps(sparse))
    assert type(again) is SparseHistogram and again == sparse
    assert again.to_histogram() == sparse.to_histogram()
    assert list(again.slots) == list(sparse.slots) and not again.counts.flags.writeable


def test_zero_bucket_and_empty():
    empty = LogHistogram()
    assert empty.quantile(0.99) == 0.0 and empty.mean() == 0.0
    h = LogHistogram()
    h.add_many([0.0, -0.2, 0.0005, 10.0])
    assert h.zero == 3
    assert h.quantile(0.5) == 0.0
    assert h.quantile(1.0) == 10.0
    assert h.quantile(0.0) == -0.2  # the exact min is kept
    with pytest.raises(ValueError, match="outside"):
        h.quantile(1.5)


def test_values_beyond_the_top_bucket_are_clamped_not_lost():
    h = LogHistogram()
    h.add_many([1.0, 5e9])
    assert h.count == 2
    assert h.quantile(1.0) == 5e9


def test_dict_round_trip_is_compact_and_exact():
    h = LogHistogram()
    h.add_many(distributions(2)["exponential"])
    d = h.to_dict()
    assert len(d["slots"]) < 1300
    back = LogHistogram.from_dict(d)
    assert back == h
    assert back.quantile(0.999) == h.quantile(0.999)
    bad = dict(d, alpha=0.05)
    with pytest.raises(ValueError, match="layout"):
        LogHistogram.from_dict(bad)


def test_subtract_recovers_the_other_part():
    rng = np.random.default_rng(9)
    ok, failed = rng.exponential(5, 1000), rng.exponential(500, 50)
    whole, fail = LogHistogram(), LogHistogram()
    whole.add_many(np.concatenate([ok, failed]))
    fail.add_many(failed)
    only_ok = LogHistogram()
    only_ok.add_many(ok)
    diff = whole.subtract(fail)
    assert diff.count == 1000
    assert diff.count_at_or_below(1e9) == only_ok.count_at_or_below(1e9)
    for bound in (1.0, 5.0, 20.0):
        assert diff.count_at_or_below(bound) == only_ok.count_at_or_below(bound)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.floats(min_value=0.002, max_value=1e7, allow_nan=False), min_size=1, max_size=300),
    st.sampled_from(QUANTILES),
)
def test_any_sample_any_quantile(values, q):
    hist = LogHistogram()
    hist.add_many(values)
    want = exact_quantile(np.sort(np.array(values)), q)
    assert abs(hist.quantile(q) - want) <= 0.01 * want


def test_percentile_subsets_come_from_the_one_table():
    assert list(percentiles_through("p99_9")) == [
        "p50",
        "p66",
        "p75",
        "p80",
        "p90",
        "p95",
        "p98",
        "p99",
        "p99_9",
    ]
    assert percentiles(("p99", "p50")) == {"p99": 0.99, "p50": 0.5}
    assert percentiles_through("p100") == PERCENTILES
    with pytest.raises(KeyError):
        percentiles(("p42",))
