"""Seeded streams, pacers (incl. Poisson statistics) and the dispatcher."""

import asyncio
import math
import time

import pytest

from agentsession_core.pacing import (
    ConstantPacer,
    Dispatcher,
    PoissonPacer,
    derive_seed,
    intended_offsets,
    stream,
    think_jitter,
)
from agentsession_core.recorder import Recorder


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
        arrivals = intended_offsets(PoissonPacer(5.0, stream(seed, "session", 3, "turns")), 60.0)
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


def test_constant_pacer_is_evenly_spaced():
    offsets = intended_offsets(ConstantPacer(4.0), 2.0)
    assert offsets == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_poisson_counts_per_second_follow_the_rate(seed):
    rate, seconds = 20.0, 2_000
    offsets = intended_offsets(PoissonPacer(rate, stream(seed, "arrivals")), float(seconds))
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


def test_poisson_per_hour_and_zero_rate():
    pacer = PoissonPacer.per_hour(3600.0, stream(1, "x"))
    assert pacer.rate_per_s == 1.0
    pacer.set_rate(0)
    assert pacer.next_after(5.0) == math.inf
    with pytest.raises(ValueError, match="rate_per_hour"):
        PoissonPacer.per_hour(-1, stream(1, "x"))


async def run_dispatcher(pacer, seconds, *, change=None):
    released: list[tuple[int, int]] = []
    stop = asyncio.Event()
    rec = Recorder()
    row = rec.row("generator", "DispatchLag")
    dispatcher = Dispatcher(lateness_row=row)
    start = time.monotonic_ns()

    def on_due(intended_ns):
        released.append((intended_ns, time.monotonic_ns()))

    loop = asyncio.get_running_loop()
    loop.call_later(seconds, stop.set)
    if change is not None:
        loop.call_later(change[0], change[1])
    await asyncio.wait_for(dispatcher.run(pacer, on_due, stop, start), seconds + 5)
    return start, released, rec


async def test_dispatcher_releases_in_order_never_early_and_all_due():
    pacer = PoissonPacer(400.0, stream(3, "d"))
    expected = intended_offsets(PoissonPacer(400.0, stream(3, "d")), 0.6)
    start, released, rec = await run_dispatcher(pacer, 0.8)
    intended = [i for i, _ in released]
    assert intended == sorted(intended)
    assert all(at >= i for i, at in released), "an arrival was released early"
    # Exactly the schedule (dispatch is open-loop: nothing skipped, nothing invented).
    assert intended[: len(expected)] == [start + round(t * 1e9) for t in expected]
    rec.flush(time.monotonic_ns() + 2_000_000_000)
    assert rec.totals().row("generator", "DispatchLag").count == len(released)


async def test_dispatcher_does_not_wait_for_released_work():
    pacer = ConstantPacer(200.0)
    tasks = []

    def slow(_intended):
        tasks.append(asyncio.ensure_future(asyncio.sleep(0.5)))

    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.3, stop.set)
    await Dispatcher().run(pacer, slow, stop, time.monotonic_ns())
    # 0.3 s at 200/s ≈ 60 releases although each piece of work takes 0.5 s.
    assert len(tasks) >= 50
    for t in tasks:
        t.cancel()


async def test_dispatcher_follows_a_rate_change_and_stops_promptly():
    pacer = ConstantPacer(0.0)
    t0 = time.monotonic()
    _, released, _ = await run_dispatcher(pacer, 0.6, change=(0.2, lambda: pacer.set_rate(100.0)))
    assert time.monotonic() - t0 < 1.5
    assert 25 <= len(released) <= 45  # ~0.4 s at 100/s
