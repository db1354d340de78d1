"""Candidate against reference, side by side in one campaign (docs/SPEC.md §6.8).

A paired campaign measures both arms over the same seconds with the same generator, so what
disturbs the machine or the cluster in a second disturbs both. Each headline figure
(judge/uncertainty.py: a headline row's p50 … p99.9, the failure ratio, the achieved rate) is
compared arm against arm over **paired blocks**: the judged hold's seconds cut into
consecutive blocks of `block_seconds`; a block in which the generator saturated in any
second is dropped from both arms (it disturbed both alike, and neither is judged on it). The
change is d = log(candidate + floor) − log(reference + floor), signed so that d > 0 is worse;
its interval comes from a block bootstrap (`scipy.stats.bootstrap`, percentile method,
seeded) that resamples the *same* blocks for both arms at once, so the interval is that of
the paired difference: the between-run noise a comparison of two nights cannot remove is
common to both arms here and cancels. The decision rule is the gate's (judge/decision.py).

With fewer than `min_blocks` blocks left the comparison cannot be judged: the section's
status is `void` and so is the campaign's verdict (judge/gate.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agentsession_core.judge.decision import DEFAULT_PAIRED_RULE, Rule
from agentsession_core.judge.false_discovery import DEFAULT_METHOD, Method, controlled
from agentsession_core.judge.hold_seconds import HoldSeconds
from agentsession_core.judge.judged_figure import (
    HIGHER_IS_BETTER,
    as_change,
    better,
    counts,
    decided,
    inconclusive,
    regressions,
    rejudged,
)
from agentsession_core.judge.uncertainty import (
    DEFAULT_CONFIDENCE,
    FLOORS,
    RESAMPLES,
    Blocks,
    block_bootstrap,
    block_figures,
    estimability,
)

DEFAULT_BLOCK_SECONDS = 5
DEFAULT_MIN_BLOCKS = 8
# A paired percentile needs more samples beyond it than a single run's figure (10, §6.2):
# a percentile bootstrap of the few samples past a high percentile is too narrow, and so
# confident about noise (measured: with 12 wakes past p99 in each arm, 1 of 6 A/A campaigns
# called p99 −28 % [−59 %, −2 %] "improved"; bench/RESULTS.md, the paired gate's power).
PAIRED_MIN_BEYOND = 50


def kept_blocks(
    seconds: list[int], saturated: set[int], block_seconds: int
) -> tuple[list[int], int, int]:
    """(the positions of the seconds of every kept block, blocks in all, blocks dropped): the
    hold's seconds cut into consecutive blocks of `block_seconds` (the last may be short),
    a block with a saturated second dropped."""
    positions: list[int] = []
    total = dropped = 0
    for start in range(0, len(seconds), block_seconds):
        block = range(start, min(start + block_seconds, len(seconds)))
        total += 1
        if any(seconds[i] in saturated for i in block):
            dropped += 1
            continue
        positions.extend(block)
    return positions, total, dropped


def _log(value: np.ndarray | float, unit: str) -> np.ndarray:
    return np.log(np.asarray(value, dtype=np.float64) + FLOORS[unit] + 1e-12)


def paired_comparison(
    candidate: HoldSeconds,
    reference: HoldSeconds,
    *,
    saturated: set[int],
    block_seconds: int = DEFAULT_BLOCK_SECONDS,
    min_blocks: int = DEFAULT_MIN_BLOCKS,
    max_regression: float,
    confidence: float = DEFAULT_CONFIDENCE,
    rule: Rule = DEFAULT_PAIRED_RULE,
    seed: int = 0,
    resamples: int = RESAMPLES,
    min_beyond: int = PAIRED_MIN_BEYOND,
    false_discovery: Method = DEFAULT_METHOD,
) -> dict[str, Any]:
    """gate.json's `paired` section: every headline figure both arms have, judged, the
    family controlled for false discoveries (judge/false_discovery.py)."""
    if candidate.seconds != reference.seconds:
        raise ValueError("the arms' hold seconds differ: not a pair")
    positions, total, dropped = kept_blocks(candidate.seconds, saturated, block_seconds)
    kept = total - dropped
    out: dict[str, Any] = {
        "status": "compared",
        "arms": {"candidate": "target", "reference": "reference"},
        "block_seconds": block_seconds,
        "blocks": kept,
        "blocks_planned": total,
        "blocks_dropped": dropped,
        "seconds": len(positions),
        "saturated_seconds": sum(1 for t in candidate.seconds if t in saturated),
        "min_blocks": min_blocks,
        "min_beyond": min_beyond,
        "max_regression": max_regression,
        "confidence": confidence,
        "rule": rule,
        "method": "paired block bootstrap (scipy.stats.bootstrap, percentile, "
        f"{resamples} resamples, seed {seed})",
        "metrics": [],
        "regressions": [],
    }
    if kept < min_blocks:
        out["status"] = "void"
        out["why"] = (
            f"{kept} of {total} paired blocks of {block_seconds} s left to judge "
            f"({dropped} dropped: the generator saturated in them); needs {min_blocks}"
        )
        return out
    index = np.asarray(positions, dtype=np.int64)
    mine, theirs = candidate.subset(index), reference.subset(index)
    blocks = Blocks(len(index), size=block_seconds)
    ours, others = block_figures(mine, blocks), block_figures(theirs, blocks)
    for metric, (figure_c, unit, samples_c, q) in ours.items():
        if metric not in others:
            continue
        figure_r, _, samples_r, _ = others[metric]
        out["metrics"].append(
            _compare(
                metric,
                (figure_c, samples_c),
                (figure_r, samples_r),
                unit=unit,
                q=q,
                blocks=blocks,
                max_regression=max_regression,
                confidence=confidence,
                rule=rule,
                seed=seed,
                resamples=resamples,
                min_beyond=min_beyond,
            )
        )
    out["metrics"], out["false_discovery"] = controlled(
        out["metrics"],
        rule=rule,
        confidence=confidence,
        max_regression=max_regression,
        method=false_discovery,
    )
    out["counts"] = counts(out["metrics"])
    out["regressions"] = regressions(out["metrics"])
    return out


def _compare(
    metric: str,
    candidate: tuple[Any, int],
    reference: tuple[Any, int],
    *,
    unit: str,
    q: float | None,
    blocks: Blocks,
    max_regression: float,
    confidence: float,
    rule: Rule,
    seed: int,
    resamples: int,
    min_beyond: int,
) -> dict[str, Any]:
    (figure_c, n_c), (figure_r, n_r) = candidate, reference
    sign = -1.0 if metric in HIGHER_IS_BETTER else 1.0
    everything = np.ones((1, blocks.count))
    value_c, value_r = float(figure_c(everything)[0]), float(figure_r(everything)[0])

    def difference(w: np.ndarray) -> np.ndarray:
        return sign * (_log(figure_c(w), unit) - _log(figure_r(w), unit))

    d = float(difference(everything)[0])
    floor = FLOORS[unit]
    out: dict[str, Any] = {
        "metric": metric,
        "unit": unit,
        "better": better(metric),
        "candidate": value_c,
        "reference": value_r,
        "ratio": (value_c + floor) / (value_r + floor) if value_r + floor > 0 else None,
        "change": as_change(metric, d),
        "log_change": d,
        "samples": {"candidate": n_c, "reference": n_r},
        "blocks": blocks.count,
    }
    for side, n in (("candidate", n_c), ("reference", n_r)):
        shape = estimability(n, unit, q, min_beyond)
        if not shape["estimable"]:
            beyond = shape.get("beyond")
            extra = f", {beyond} beyond the percentile (needs {min_beyond})" if q else ""
            return {**out, **inconclusive(f"{side}: {n} samples{extra}", ratio_interval=None)}
    low, high, replicates = block_bootstrap(
        difference, blocks, confidence=confidence, seed=seed, resamples=resamples
    )
    se = float(np.std(replicates, ddof=1))
    ratio_low, ratio_high = (math.exp(sign * low), math.exp(sign * high))
    return {
        **out,
        **decided(
            metric,
            d,
            low,
            high,
            se=se,
            max_regression=max_regression,
            confidence=confidence,
            rule=rule,
            ratio_interval=sorted([ratio_low, ratio_high]),
            se_log=se,
        ),
    }


def rejudge(
    section: dict[str, Any],
    max_regression: float,
    rule: Rule,
    false_discovery: Method = DEFAULT_METHOD,
) -> dict[str, Any]:
    """A stored paired section judged again with another margin or rule (its intervals kept)."""
    confidence = float(section.get("confidence") or DEFAULT_CONFIDENCE)
    return rejudged(
        section,
        max_regression=max_regression,
        confidence=confidence,
        rule=rule,
        method=false_discovery,
    )


__all__ = [
    "DEFAULT_BLOCK_SECONDS",
    "DEFAULT_MIN_BLOCKS",
    "PAIRED_MIN_BEYOND",
    "kept_blocks",
    "paired_comparison",
    "rejudge",
]
