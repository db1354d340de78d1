"""When a measured change is a regression: the decision rule (docs/SPEC.md §6.3).

A change d (on the log scale, d > 0 worse) is known with an interval [low, high] at the
gate's confidence and a standard error se; the margin m = max_regression on the log scale
is the smallest change that matters. Three rules, measured against each other on real A/A
and A/B runs in bench/gate_power.py (bench/RESULTS.md, "decision rules"):

  significant     the interval excludes no change (low > 0) and the estimate exceeds the
                  margin (d > m): a real change that is large enough. Its false-fail rate
                  on an A/A pair is at most the interval's own miss rate, (1 − confidence)/2,
                  and it calls a change of size m about half the time;
  whole-interval  the whole interval lies beyond the margin (low > m): the change is known
                  to exceed m. Strictest: a change must be about m + z·se before it is called;
  margin-test     a one-sided test that the change exceeds m at the gate's confidence
                  (d − z₁·se > m, z₁ the one-sided quantile): between the two.

`improved` is each rule's mirror image below −m. `regressed` fails a run that would
otherwise pass; `unchanged` and `improved` never do.
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

Rule = Literal["significant", "whole-interval", "margin-test"]
DecisionRule = Rule  # by this name where "rule" means a threshold expression
RULES: tuple[Rule, ...] = ("significant", "whole-interval", "margin-test")
# Each kind of comparison has the default its own measurement picked (bench/RESULTS.md,
# "decision rules"): against a baseline run or history, whose run-to-run spread is only
# estimated, the strictest rule (significant made 3 false fails of 30 A/A pairs there); a
# paired campaign's arms share that spread, and significant keeps its A/A pairs clean.
DEFAULT_RULE: Rule = "whole-interval"
DEFAULT_PAIRED_RULE: Rule = "significant"


CAPACITY = "capacity.rate"
HIGHER_IS_BETTER = ("requests.achieved_rps", CAPACITY)


def margin_of(metric: str, max_regression: float) -> float:
    """max_regression on the log scale, on the worse side."""
    if metric in HIGHER_IS_BETTER:  # worse = lower: a fall of max_regression or more
        return math.inf if max_regression >= 1 else -math.log(1 - max_regression)
    return math.log1p(max_regression)


def z_two_sided(confidence: float) -> float:
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


def classify(
    d: float,
    low: float,
    high: float,
    *,
    se: float,
    half: float = 0.0,
    margin: float,
    confidence: float,
    rule: Rule = DEFAULT_RULE,
) -> str:
    """`regressed`, `improved` or `unchanged` for a change d with interval [low, high];
    `half`: a bracket the change is known only to within (a capacity's), beyond se."""
    if rule == "whole-interval":
        worse, better = low > margin, high < -margin
    elif rule == "margin-test":
        z1 = statistics.NormalDist().inv_cdf(confidence)
        worse = d - half - z1 * se > margin
        better = d + half + z1 * se < -margin
    else:
        worse, better = low > 0 and d > margin, high < 0 and d < -margin
    return "regressed" if worse else "improved" if better else "unchanged"


__all__ = [
    "CAPACITY",
    "DEFAULT_PAIRED_RULE",
    "DEFAULT_RULE",
    "HIGHER_IS_BETTER",
    "RULES",
    "DecisionRule",
    "Rule",
    "classify",
    "margin_of",
    "z_two_sided",
]
