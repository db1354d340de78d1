"""Each headline figure with its uncertainty, from the run's own seconds (docs/SPEC.md §6.2).

A figure (a latency percentile of a headline row, the failure ratio, the achieved rate) is
computed over the first level's judged hold; its interval is a block bootstrap over the
hold's seconds: the seconds are cut into consecutive blocks of about ∛S seconds (S seconds in
all), `scipy.stats.bootstrap` resamples blocks with replacement, and each replicate's figure
is computed from the sum of its seconds' histograms (percentiles are never averaged). Blocks,
not single seconds or single samples, because neighbouring seconds move together: a slow
restore stalls several wakes at once, and counting them as independent would make the
interval too narrow.

A percentile needs samples beyond it to be estimated at all: with fewer than MIN_BEYOND
samples above the quantile (p99 from fewer than 1,000 samples, p99.9 from fewer than 10,000)
the figure is kept but marked not `estimable`, and a comparison calls it `inconclusive`.

Each figure also carries `se_log`: the bootstrap standard deviation of log(figure + floor),
which the comparison with a baseline (judge/compare.py) combines across runs and nights.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from agentsession_core.judge.hold_seconds import HoldSeconds, SectionSeconds
from agentsession_core.measure.histogram import percentiles, quantile_of_counts

DEFAULT_CONFIDENCE = 0.99
COMPARED_LATENCIES = ("p50", "p90", "p99", "p99_9")
QUANTILES = percentiles(COMPARED_LATENCIES)
MIN_BEYOND = 10
RESAMPLES = 2000
BATCH = 250  # resamples evaluated at once: bounds memory on a week-long hold
# Added before taking a log, so that a zero (no failures, a sub-µs latency) has a scale:
# 1 ms of latency and 0.1 % of failures are below anything a comparison should act on.
FLOORS = {"ms": 1.0, "ratio": 0.001, "1/s": 0.0}

Statistic = Callable[[np.ndarray], np.ndarray]


def block_length(seconds: int) -> int:
    """About ∛S: long enough to keep a stall's seconds together, short enough for the hold
    to hold many blocks (60 s → 4, 600 s → 8, 3,600 s → 15)."""
    return max(1, round(seconds ** (1 / 3)))


class Blocks:
    """The hold's seconds summed into consecutive blocks: a replicate is a weighted sum of
    blocks (R × B), so memory grows with the blocks, not with the seconds × resamples."""

    def __init__(self, seconds: int, size: int | None = None) -> None:
        self.size = size if size is not None else block_length(seconds)
        self.of_second = np.arange(seconds) // self.size
        self.count = int(self.of_second[-1]) + 1 if seconds else 0

    def sum(self, per_second: np.ndarray) -> np.ndarray:
        """(S, …) → (B, …): each block's sum."""
        out = np.zeros((self.count, *per_second.shape[1:]), dtype=per_second.dtype)
        np.add.at(out, self.of_second, per_second)
        return out

    def reduce(self, per_second: np.ndarray, how: np.ufunc, empty: float) -> np.ndarray:
        out = np.full(self.count, empty)
        how.at(out, self.of_second, per_second)
        return out

    def weights(self, idx: np.ndarray) -> np.ndarray:
        """Resampled block ids (R, B) → how often each block is taken (R, B)."""
        idx = np.atleast_2d(idx)
        return np.stack([np.bincount(row, minlength=self.count) for row in idx]).astype(float)


def _latency(
    blocks: Blocks, section: SectionSeconds, q: float
) -> Callable[[np.ndarray], np.ndarray]:
    counts = blocks.sum(section.counts).astype(np.float64)
    lo = blocks.reduce(section.lo, np.minimum, np.inf)
    hi = blocks.reduce(section.hi, np.maximum, -np.inf)

    def figure(w: np.ndarray) -> np.ndarray:
        taken = w > 0
        return quantile_of_counts(
            np.rint(w @ counts).astype(np.int64),
            section.slots,
            q,
            np.where(taken, lo, np.inf).min(axis=1),
            np.where(taken, hi, -np.inf).max(axis=1),
        )

    return figure


def _ratio(blocks: Blocks, num: np.ndarray, den: np.ndarray) -> Statistic:
    top_blocks, bottom_blocks = blocks.sum(num), blocks.sum(den)

    def figure(w: np.ndarray) -> np.ndarray:
        top, bottom = w @ top_blocks, w @ bottom_blocks
        return np.divide(top, bottom, out=np.zeros_like(top), where=bottom > 0)

    return figure


def block_figures(
    hold: HoldSeconds, blocks: Blocks
) -> dict[str, tuple[Statistic, str, int, float | None]]:
    """metric → (figure of block weights, unit, samples, quantile or None)."""
    out: dict[str, tuple[Statistic, str, int, float | None]] = {}
    for name, section in hold.sections.items():
        for key, q in QUANTILES.items():
            out[f"{name}.{key}"] = (_latency(blocks, section, q), "ms", section.samples, q)
    requests = hold.requests.astype(np.float64)
    out["requests.failure_ratio"] = (
        _ratio(blocks, hold.request_failures.astype(np.float64), requests),
        "ratio",
        int(hold.requests.sum()),
        None,
    )
    out["requests.achieved_rps"] = (
        _ratio(blocks, hold.achieved.astype(np.float64), np.ones(len(hold))),
        "1/s",
        int(hold.achieved.sum()),
        None,
    )
    return out


def figures(
    hold: HoldSeconds,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> dict[str, dict[str, Any]]:
    """gate.json's `figures`: each headline figure with its samples and interval."""
    if not len(hold):
        return {}
    blocks = Blocks(len(hold))
    out: dict[str, dict[str, Any]] = {}
    for metric, (figure, unit, samples, q) in block_figures(hold, blocks).items():
        value = float(figure(np.ones((1, blocks.count)))[0])
        doc: dict[str, Any] = {"value": value, "n": samples, "unit": unit}
        doc.update(estimability(samples, unit, q))
        doc.update(_interval(figure, blocks, unit, confidence, seed, resamples))
        out[metric] = doc
    return out


def estimability(
    samples: int, unit: str, q: float | None, min_beyond: int = MIN_BEYOND
) -> dict[str, Any]:
    """`beyond` (a percentile's samples above it) and whether the figure can be estimated."""
    if q is not None:
        beyond = math.floor(samples * (1 - q) + 1e-9)
        return {"beyond": beyond, "estimable": beyond >= min_beyond}
    return {"estimable": samples > 0 or unit == "ratio"}


def block_bootstrap(
    figure: Statistic, blocks: Blocks, *, confidence: float, seed: int, resamples: int
) -> tuple[float, float, np.ndarray]:
    """(low, high, replicates) of `figure` (of block weights) by `scipy.stats.bootstrap`
    resampling whole blocks (percentile method, seeded). Needs two blocks or more."""

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        flat = np.moveaxis(np.asarray(idx), axis, -1)
        shape = flat.shape[:-1]
        return figure(blocks.weights(flat.reshape(-1, flat.shape[-1]))).reshape(shape)

    # scipy.stats takes ~0.4 s to import: only a run's end (or a re-judge) pays for it, not
    # every `agentsession gate`.
    from scipy.stats import bootstrap

    # The same seed for every figure: one set of resamples, so figures stay consistent.
    result = bootstrap(
        (np.arange(blocks.count),),
        statistic,
        n_resamples=resamples,
        batch=BATCH,
        vectorized=True,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    interval = result.confidence_interval
    return float(interval.low), float(interval.high), np.asarray(result.bootstrap_distribution)


def _interval(
    figure: Statistic,
    blocks: Blocks,
    unit: str,
    confidence: float,
    seed: int,
    resamples: int,
) -> dict[str, Any]:
    if blocks.count < 2:  # one block: nothing to resample
        return {"low": None, "high": None, "se_log": None, "blocks": blocks.count}
    low, high, distribution = block_bootstrap(
        figure, blocks, confidence=confidence, seed=seed, resamples=resamples
    )
    replicates = np.log(distribution + FLOORS[unit] + 1e-12)
    return {
        "low": low,
        "high": high,
        "se_log": float(np.std(replicates, ddof=1)),
        "blocks": blocks.count,
    }


__all__ = [
    "COMPARED_LATENCIES",
    "DEFAULT_CONFIDENCE",
    "FLOORS",
    "MIN_BEYOND",
    "Blocks",
    "block_bootstrap",
    "block_figures",
    "block_length",
    "estimability",
    "figures",
]
