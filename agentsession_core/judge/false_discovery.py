"""The family of figures one comparison judges, controlled for false discoveries
(docs/SPEC.md §6.3, §6.8).

A comparison judges many figures at once (about ten for one script, forty with a mix and
pools), each at the gate's confidence: the chance that some A/A figure comes out
`regressed` grows with their number. So a figure's `regressed` stands only when it is also
a discovery of the whole family: each judged figure gets the one-sided p-value of its own
rule's test (`p_worse`), the family's p-values are adjusted together (scipy's
`false_discovery_control`: Benjamini–Hochberg by default, Benjamini–Yekutieli under any
dependence), and a figure stays `regressed` only when its adjusted p-value (`p_adjusted`) is
within the rule's level. A family of one is judged exactly as its own rule judges it.

The p-value of each rule, d the log change (> 0 worse), se its standard error, m the margin,
h a capacity's half bracket, Φ the normal distribution (judge/decision.py):

  whole-interval  H0: d ≤ m + h   p = 1 − Φ((d − m − h)/se), level (1 − confidence)/2
  margin-test     H0: d ≤ m + h   p = 1 − Φ((d − m − h)/se), level 1 − confidence
  significant     H0: d ≤ 0       p = 1 − Φ(d/se),           level (1 − confidence)/2

Only `regressed` is controlled: it alone fails a run; `improved` never does. Measured in
bench/false_discovery.py (bench/RESULTS.md, "false discoveries").
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Literal

from agentsession_core.judge.decision import Rule, margin_of

Method = Literal["bh", "by", "none"]
METHODS: tuple[Method, ...] = ("bh", "by", "none")
DEFAULT_METHOD: Method = "bh"
METHOD_NAMES = {
    "bh": "Benjamini-Hochberg",
    "by": "Benjamini-Yekutieli",
    "none": "none (each figure alone)",
}
_NORMAL = statistics.NormalDist()


def level(rule: Rule, confidence: float) -> float:
    """The one-sided level each rule's `regressed` is decided at."""
    return 1 - confidence if rule == "margin-test" else (1 - confidence) / 2


def p_worse(m: dict[str, Any], *, rule: Rule, max_regression: float) -> float | None:
    """The one-sided p-value of the rule's test that figure `m` got worse (None: a figure
    with no interval, which is judged nothing)."""
    se, d = m.get("se_log"), m.get("log_change")
    if se is None or d is None or m.get("status") == "inconclusive":
        return None
    se, d = float(se), float(d)
    if rule == "significant":
        bar = 0.0
    else:
        margin = margin_of(m["metric"], max_regression)
        if math.isinf(margin):
            return 1.0
        bar = margin + float(m.get("half_width_log") or 0.0)
    if se <= 0:
        return 0.0 if d > bar else 1.0
    return 1.0 - _NORMAL.cdf((d - bar) / se)


def _adjusted(ps: list[float], method: Method) -> list[float]:
    # scipy.stats costs ~0.75 s of CPU to import: only a family with p-values to adjust pays
    # for it, not every `gate`, `report` or `history` start (uncertainty.py does the same).
    from scipy.stats import false_discovery_control

    return [float(q) for q in false_discovery_control(ps, method=method)]


def controlled(
    metrics: list[dict[str, Any]],
    *,
    rule: Rule,
    confidence: float,
    max_regression: float,
    method: Method = DEFAULT_METHOD,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The family's figures with `p_worse` and `p_adjusted`, a `regressed` that is no
    discovery of the family turned `unchanged` (saying why), and the section's account."""
    ps = [p_worse(m, rule=rule, max_regression=max_regression) for m in metrics]
    judged = [p for p in ps if p is not None]
    alpha = level(rule, confidence)
    adjusted = iter(_adjusted(judged, method) if judged and method != "none" else judged)
    out = []
    for m, p in zip(metrics, ps, strict=True):
        if p is None:
            out.append(m)
            continue
        q = min(float(next(adjusted)), 1.0)
        m = {**m, "p_worse": p, "p_adjusted": q}
        # A family of one is its own rule's alone (a paired figure's interval is the
        # bootstrap's percentiles, which the normal p-value only approximates).
        if m.get("status") == "regressed" and len(judged) > 1 and q > alpha:
            m.update(
                status="unchanged",
                regression=False,
                why=f"not a discovery of the {len(judged)} figures judged together "
                f"({METHOD_NAMES[method]}: adjusted p {q:.3g} > {alpha:.3g})",
            )
        out.append(m)
    account = {"method": method, "family": len(judged), "level": round(alpha, 12)}
    return out, account


__all__ = [
    "DEFAULT_METHOD",
    "METHODS",
    "METHOD_NAMES",
    "Method",
    "controlled",
    "level",
    "p_worse",
]
