"""Seeded streams, pacers (incl. Poisson statistics) and the dispatcher."""

import math

import pytest

from agentsession_core.engine.pacing import (
    derive_seed,
    poisson_gap_ns,
    ramp_time_ns,
    stream,
    think_jitter,
)


def poisson_offsets(rate: float, rng, until_s: float) -> list[float]:
    """Arrival times in seconds, as TurnsPopulation draws them."""
    out, t = [], 0
    while (t := t + poisson_gap_ns(rng, rate)) <= until_s * 1e9:
        out.append(t / 1e9)
    return out


def test_derive_seed_is_stable_and_part_sensitive():
    # A fixed value: the schedule of a given seed must not change between releases.
    assert derive_seed(42, "session", 17, "think") == derive_seed(42, "session", 17, "think")
    assert derive_seed(42, "session", 17) != derive_seed(42, "session", 18)
    assert derive_seed(42, "session", 17) != derive_seed(43, "session", 17)
    assert derive_seed(42, 17) != derive_seed(42, "17")  # types are part of the identity
    assert derive_seed(1, "a") == 0x5F8C2C763CBF689A


def test_same_seed_same_think_jitter_and_arrivals():
    def schedule(seed):
        jitters = [think_jitter(stream(seed, "session", s, "think")) for s in range(50)]
        arrivals = poisson_offsets(5.0, stream(seed, "session", 3, "turns"), 60.0)
        return jitters, arrivals

    assert schedule(7) == schedule(7)
    assert schedule(7) != schedule(8)


def test_streams_are_independent_per_session():
    first = [stream(9, "session", s, "think").random() for s in range(200)]
    assert len(set(first)) == 200
    # Drawing from one session's stream does not move another's.
    a = stream(9, "session", 1, "think")
    b_before = stream(9, "session", 2, "think").random()
    for _ in range(1000):
        a.random()
    assert stream(9, "session", 2, "think").random() == b_before


def test_think_jitter_range():
    rng = stream(1, "j")
    values = [think_jitter(rng) for _ in range(20_000)]
    assert min(values) >= 0.8 and max(values) < 1.2
    assert sum(values) / len(values) == pytest.approx(1.0, abs=0.005)


def test_spawn_ramp_is_evenly_spaced():
    assert [ramp_time_ns(10, 4.0, i) for i in range(3)] == [10, 250_000_010, 500_000_010]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_poisson_counts_per_second_follow_the_rate(seed):
    rate, seconds = 20.0, 2_000
    offsets = poisson_offsets(rate, stream(seed, "arrivals"), float(seconds))
    # Total count: Poisson(λT), sd = sqrt(λT); 4 sd bounds (false alarm ≈ 6e-5).
    n = len(offsets)
    assert abs(n - rate * seconds) <= 4 * math.sqrt(rate * seconds)
    # Per-second counts: Poisson ⇒ variance ≈ mean (index of dispersion test, chi-square).
    counts = [0] * seconds
    for t in offsets:
        counts[min(int(t), seconds - 1)] += 1
    mean = sum(counts) / seconds
    dispersion = sum((c - mean) ** 2 for c in counts) / mean  # ~ chi2(seconds-1)
    dof = seconds - 1
    assert abs(dispersion - dof) <= 4 * math.sqrt(2 * dof)
    # Gaps are exponential: P(gap > 1/λ) = e^-1.
    gaps = [b - a for a, b in zip([0.0, *offsets], offsets, strict=False)]
    share = sum(g > 1 / rate for g in gaps) / len(gaps)
    sd = math.sqrt(math.exp(-1) * (1 - math.exp(-1)) / len(gaps))
    assert abs(share - math.exp(-1)) <= 4 * sd
