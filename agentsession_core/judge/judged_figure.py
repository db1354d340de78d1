"""One figure of this run judged against the same figure of another side (docs/SPEC.md §6.3,
§6.8): the core the baseline comparison (judge/compare.py) and the paired comparison
(judge/paired.py) share, so a `JudgedFigure` (judge/gate_document.py) is decided one way.

Each side has its own way to the change d (> 0 worse, on a log scale) and its interval
[low, high]: the baseline comparison from both runs' standard errors and the run-to-run
spread (a normal interval), the paired one from a block bootstrap of the paired difference.
From there it is one rule: the margin log(1 + max_regression) on the worse side, the
decision rule (judge/decision.py), the interval written as the fraction worse. A stored
comparison is re-judged with another margin or rule by `rejudged`, its intervals kept.

The records are built as dicts in the order gate.json has always had them (a key a record
already holds keeps its place), so the bytes written do not move.
"""

from __future__ import annotations

import math
from typing import Any

from agentsession_core.judge.decision import (
    CAPACITY,
    HIGHER_IS_BETTER,
    Rule,
    classify,
    margin_of,
    z_two_sided,
)
from agentsession_core.judge.false_discovery import DEFAULT_METHOD, Method, controlled

STATUSES = ("regressed", "improved", "unchanged", "inconclusive")


def better(metric: str) -> str:
    return "higher" if metric in HIGHER_IS_BETTER else "lower"


def as_change(metric: str, d: float) -> float:
    """The log difference as the fraction worse (lower-is-better: current/baseline − 1;
    higher-is-better: 1 − current/baseline)."""
    d = max(min(d, 700.0), -700.0)
    return -math.expm1(-d) if metric in HIGHER_IS_BETTER else math.expm1(d)


def log_change_of(metric: str, fraction: float) -> float:
    """The log change of a fraction worse (the inverse of `as_change`)."""
    if metric in HIGHER_IS_BETTER:
        return -math.log(max(1 - fraction, 1e-300))
    return math.log(max(1 + fraction, 1e-300))


def normal_interval(
    d: float, se: float, confidence: float, half: float = 0.0
) -> tuple[float, float]:
    """d ± z·se, widened by `half` on both sides (a figure known only to within a bracket)."""
    z = z_two_sided(confidence)
    return d - half - z * se, d + half + z * se


def decided(
    metric: str,
    d: float,
    low: float,
    high: float,
    *,
    se: float,
    half: float = 0.0,
    max_regression: float,
    confidence: float,
    rule: Rule,
    **beside_interval: Any,
) -> dict[str, Any]:
    """status, interval (the fraction worse), what a comparison keeps beside it, regression."""
    status = classify(
        d,
        low,
        high,
        se=se,
        half=half,
        margin=margin_of(metric, max_regression),
        confidence=confidence,
        rule=rule,
    )
    return {
        "status": status,
        "interval": [as_change(metric, low), as_change(metric, high)],
        **beside_interval,
        "regression": status == "regressed",
    }


def inconclusive(why: str, **beside_interval: Any) -> dict[str, Any]:
    """A figure a side cannot estimate: judged nothing, and says why."""
    return {
        "status": "inconclusive",
        "why": why,
        "interval": None,
        **beside_interval,
        "se_log": None,
        "regression": False,
    }


def rejudge_figure(
    m: dict[str, Any], *, max_regression: float, confidence: float, rule: Rule
) -> dict[str, Any]:
    """A stored judged figure decided again with another margin or rule, its interval kept
    (one with no interval, an inconclusive one, stays as it is)."""
    if m.get("se_log") is None or m.get("interval") is None:
        return m
    # The stored interval already holds a capacity's bracket (`half_width_log`).
    low, high = (log_change_of(m["metric"], x) for x in m["interval"])
    half = float(m.get("half_width_log") or 0.0)
    status = classify(
        float(m["log_change"]),
        low,
        high,
        se=float(m["se_log"]),
        half=half,
        margin=margin_of(m["metric"], max_regression),
        confidence=confidence,
        rule=rule,
    )
    again = {k: v for k, v in m.items() if k not in ("why", "p_worse", "p_adjusted")}
    return {**again, "status": status, "regression": status == "regressed"}


def rejudged(
    section: dict[str, Any],
    *,
    max_regression: float,
    confidence: float,
    rule: Rule,
    method: Method = DEFAULT_METHOD,
) -> dict[str, Any]:
    """A stored comparison (gate.json's `baseline` or `paired`) judged again, its family
    controlled again (judge/false_discovery.py)."""
    metrics = [
        rejudge_figure(m, max_regression=max_regression, confidence=confidence, rule=rule)
        for m in section.get("metrics", [])
    ]
    metrics, family = controlled(
        metrics, rule=rule, confidence=confidence, max_regression=max_regression, method=method
    )
    return {
        **section,
        "max_regression": max_regression,
        "rule": rule,
        "false_discovery": family,
        "metrics": metrics,
        "counts": counts(metrics),
        "regressions": regressions(metrics),
    }


def counts(metrics: list[dict[str, Any]]) -> dict[str, int]:
    return {s: sum(1 for m in metrics if m.get("status") == s) for s in STATUSES}


def regressions(metrics: list[dict[str, Any]]) -> list[str]:
    return [m["metric"] for m in metrics if m.get("status") == "regressed"]


__all__ = [
    "CAPACITY",
    "HIGHER_IS_BETTER",
    "STATUSES",
    "as_change",
    "better",
    "counts",
    "decided",
    "inconclusive",
    "log_change_of",
    "margin_of",
    "normal_interval",
    "regressions",
    "rejudge_figure",
    "rejudged",
]
