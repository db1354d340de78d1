"""A run against a baseline, figure by figure, knowing the noise (docs/SPEC.md §6.3).

Each compared figure (judge/uncertainty.py: a latency percentile of a headline row, the
failure ratio, the achieved rate) is judged on a log scale, where a relative change is a
difference: d = log(current + floor) − log(baseline + floor), signed so that d > 0 is worse.
Its standard error adds up what moves a figure between two runs of the same build:

  se² = se_current² + se_baseline² + spread²

the first two from each run's own block bootstrap, the third the run-to-run ("night to
night") spread that no single run can see: measured across the baseline's nights when the
baseline is a history of at least MIN_NIGHTS runs (1.4826 × the median absolute deviation of
the nights' log figures: robust to one odd night), assumed otherwise (`gate.night_spread`,
measured by bench/gate_power.py). Then, at the configured confidence (two-sided z):

  regressed     the whole interval d ± z·se lies beyond the margin log(1 + max_regression):
                the change exceeds max_regression and is known to;
  improved      the whole interval lies beyond the margin on the better side;
  unchanged     otherwise;
  inconclusive  a side's figure cannot be estimated (too few samples beyond a percentile:
                judge/uncertainty.py) or has no interval (one block, or a schema-1 gate.json).

Only `regressed` can fail a run, and only one that would otherwise pass (judge/gate.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from agentsession_core.judge.decision import DEFAULT_RULE, Rule
from agentsession_core.judge.figures import figures_of as read_figures
from agentsession_core.judge.gate_document import GateDocument, JudgedFigure
from agentsession_core.judge.judged_figure import (
    CAPACITY,
    HIGHER_IS_BETTER,
    STATUSES,
    as_change,
    better,
    counts,
    decided,
    inconclusive,
    margin_of,
    normal_interval,
)
from agentsession_core.judge.uncertainty import FLOORS

DEFAULT_HISTORY = 5
MAX_HISTORY = 60
MIN_NIGHTS = 3
# The run-to-run spread (sd of a log figure's difference between two runs of one build)
# assumed for a single baseline run with no history to measure it over: TimeToWake.p50's,
# measured over A/A pairs of demo-length runs on this 2-core box with a CPU-bound loop
# beside them (bench/RESULTS.md, "busy box": 0.251). On a quiet box it was 0.093; 0.1, the
# default before, failed busy-box A/A pairs of one build (issue 36).
DEFAULT_NIGHT_SPREAD = 0.25
# 1.4826 × MAD estimates a standard deviation for normal data (the consistency constant).
MAD_TO_SD = 1.4826


# --------------------------------------------------------------------------- the reference
@dataclass
class Reference:
    """What a run is compared against: one run, or the median night of several."""

    locations: list[str]
    figures: dict[str, dict[str, Any]]
    spread: dict[str, float] = field(default_factory=dict)  # metric → sd of log figure
    spread_from: str = "assumed"
    # Why no figure can be judged against it (one run and no run-to-run spread to add).
    blind: str | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "locations": self.locations,
            "runs": len(self.locations),
            "spread_from": self.spread_from,
        }


def _scale(metric: str, figure: dict[str, Any]) -> float:
    unit = figure.get("unit") or ("1/s" if metric in HIGHER_IS_BETTER else "ms")
    return math.log(max(float(figure["value"]), 0.0) + FLOORS.get(unit, 0.0) + 1e-12)


def figures_of(gate: GateDocument) -> dict[str, dict[str, Any]]:
    """A gate document's figures as plain dicts (judge/figures.py reads both schemas; a
    schema-1 document's headline values come without intervals)."""
    return {metric: f.to_dict() for metric, f in read_figures(gate).items()}


def _spread(metric: str, nights: list[dict[str, Any]]) -> float:
    """1.4826 × the median absolute deviation of the nights' log figures."""
    logs = [_scale(metric, n) for n in nights]
    middle = statistics.median(logs)
    return MAD_TO_SD * statistics.median(abs(v - middle) for v in logs)


def reference_of(
    gates: list[GateDocument],
    *,
    night_spread: float,
    history: list[GateDocument] | None = None,
) -> Reference:
    """`gates`: the baseline runs' gate documents, as read back (oldest first; each with its
    `location`). Several: each figure's median across them, with their measured spread once
    there are MIN_NIGHTS of them (fewer nights say too little about it: the assumed spread
    then). One run: its figures, and the spread it cannot see alone measured over
    `history` (its campaign's good runs up to it) when that holds MIN_NIGHTS runs — times
    √2, for it is one run against one, not against a median —, else assumed."""
    locations = [g.location or "?" for g in gates]
    per_run = [figures_of(g) for g in gates]
    if len(gates) == 1:
        only = per_run[0]
        past = [figures_of(g) for g in history or []]
        if len(past) < MIN_NIGHTS:
            # A single run's own interval cannot see how far two runs of one build differ:
            # without a spread to add, no figure is judged on it alone (docs/SPEC.md §6.3).
            blind = (
                "one baseline run, no history to measure the run-to-run spread over and "
                "gate.night_spread 0: its own interval alone cannot judge a change"
                if night_spread <= 0
                else None
            )
            assumed = {m: night_spread for m in only}
            return Reference(locations, only, assumed, "assumed", blind)
        between: dict[str, float] = {}
        for metric in only:
            theirs = [n[metric] for n in past if metric in n]
            enough = len(theirs) >= MIN_NIGHTS
            between[metric] = math.sqrt(2) * _spread(metric, theirs) if enough else night_spread
        source = f"measured over {len(past)} runs of the baseline's history (x sqrt 2)"
        return Reference(locations, only, between, source)
    figures: dict[str, dict[str, Any]] = {}
    spread: dict[str, float] = {}
    for metric in sorted({m for f in per_run for m in f}):
        nights = [f[metric] for f in per_run if metric in f]
        ses = [n.get("se_log") for n in nights]
        known = [float(se) for se in ses if se is not None]
        figures[metric] = {
            "value": statistics.median(float(n["value"]) for n in nights),
            "unit": nights[0].get("unit"),
            "n": statistics.median(int(n.get("n") or 0) for n in nights),
            "estimable": all(n.get("estimable") is not False for n in nights),
            "se_log": statistics.median(known) if len(known) == len(ses) else None,
            "nights": len(nights),
        }
        if len(nights) >= MIN_NIGHTS:
            spread[metric] = _spread(metric, nights)
        else:
            spread[metric] = night_spread
    measured = len(gates) >= MIN_NIGHTS
    source = f"measured over {len(gates)} runs" if measured else "assumed"
    return Reference(locations, figures, spread, source)


# --------------------------------------------------------------------------- one figure
def _why_not_estimable(side: str, figure: dict[str, Any]) -> str | None:
    if figure.get("estimable") is False:
        beyond = figure.get("beyond")
        extra = f", {beyond} beyond the percentile" if beyond is not None else ""
        return f"{side}: {figure.get('n', 0)} samples{extra} (needs 10 beyond it)"
    if figure.get("se_log") is None:
        return f"{side}: no interval"
    return None


def compare_figure(
    metric: str,
    current: dict[str, Any],
    base: dict[str, Any],
    *,
    spread: float,
    max_regression: float,
    confidence: float,
    rule: Rule = DEFAULT_RULE,
    blind: str | None = None,
) -> dict[str, Any]:
    """One figure against the baseline's; `blind`: why the baseline cannot judge it (its
    change is still recorded)."""
    sign = -1.0 if metric in HIGHER_IS_BETTER else 1.0
    d = sign * (_scale(metric, current) - _scale(metric, base))
    out: dict[str, Any] = {
        "metric": metric,
        "better": better(metric),
        "baseline": float(base["value"]),
        "current": float(current["value"]),
        "change": as_change(metric, d),
        "samples": {"current": current.get("n"), "baseline": base.get("n")},
        "log_change": d,
    }
    why = _why_not_estimable("current", current) or _why_not_estimable("baseline", base)
    why = why or blind
    if why is not None:
        return {**out, **inconclusive(why)}
    se = math.sqrt(float(current["se_log"]) ** 2 + float(base["se_log"]) ** 2 + spread**2)
    out.update(se_log=se, spread_log=spread)
    return {**out, **judge(out, max_regression, confidence, rule)}


def judge(
    metric: dict[str, Any], max_regression: float, confidence: float, rule: Rule = DEFAULT_RULE
) -> dict[str, Any]:
    """status, interval and regression of a compared figure from its log change and se by
    the decision rule (judge/decision.py; also to re-judge a stored comparison with another
    max_regression or rule)."""
    name, d, se = metric["metric"], float(metric["log_change"]), float(metric["se_log"])
    # A figure known only to within a bracket (a capacity) widens its interval by it.
    half = float(metric.get("half_width_log") or 0.0)
    low, high = normal_interval(d, se, confidence, half)
    return decided(
        name,
        d,
        low,
        high,
        se=se,
        half=half,
        max_regression=max_regression,
        confidence=confidence,
        rule=rule,
    )


# --------------------------------------------------------------------------- a whole run
def compare(
    current: dict[str, dict[str, Any]],
    reference: Reference,
    *,
    max_regression: float,
    confidence: float,
    rule: Rule = DEFAULT_RULE,
) -> list[dict[str, Any]]:
    """Each figure both sides have, judged; in the current run's order."""
    out = []
    for metric, figure in current.items():
        base = reference.figures.get(metric)
        if base is None:
            continue
        out.append(
            compare_figure(
                metric,
                figure,
                base,
                spread=reference.spread.get(metric, 0.0),
                max_regression=max_regression,
                confidence=confidence,
                rule=rule,
                blind=reference.blind,
            )
        )
    return out


# --------------------------------------------------------------------------- a capacity
def _known_capacity(gate: GateDocument) -> tuple[float, float] | None:
    """(rate, log width of its bracket) of a gate document's capacity, when it found one:
    the knee lies in [rate, broke_at_rate), or within resolution of rate when the search
    stopped before a level broke it (docs/SPEC.md §6.7)."""
    capacity = gate.capacity
    if capacity is None or capacity.rate is None or capacity.rate <= 0:
        return None
    rate, broke = capacity.rate, capacity.broke_at_rate
    if broke is not None and broke > rate:
        return rate, math.log(broke / rate)
    return rate, math.log1p(capacity.resolution or 0.0)


def compare_capacity(
    current: GateDocument,
    baselines: list[GateDocument],
    *,
    night_spread: float,
    max_regression: float,
    confidence: float,
    rule: Rule = DEFAULT_RULE,
) -> dict[str, Any] | None:
    """The capacity of a gate document against its baselines', by the one rule above:
    d = log(baseline) − log(current) (a fall is worse), its interval widened by both
    brackets and z × the run-to-run spread (measured over MIN_NIGHTS baselines, else
    assumed). None when no side searched; inconclusive when a side found no capacity."""
    searched = [g for g in baselines if g.capacity]
    if not current.capacity and not searched:
        return None
    mine = _known_capacity(current)
    theirs = [c for c in (_known_capacity(g) for g in searched) if c is not None]
    out: dict[str, Any] = {
        "metric": CAPACITY,
        "better": "higher",
        "unit": current.capacity.unit if current.capacity else None,
        "current": mine[0] if mine else None,
        "baseline": statistics.median(r for r, _ in theirs) if theirs else None,
        "samples": {
            "current": len(current.capacity.probes) if current.capacity else 0,
            "baseline": len(theirs),
        },
    }
    if mine is None or not theirs:
        side = "current" if mine is None else "baseline"
        why = (current if mine is None else (searched[-1] if searched else None)) or None
        said = why.capacity.reason if why is not None and why.capacity else None
        reason = f"{side}: {said or 'no capacity search'}"
        out.update(status="inconclusive", why=reason, change=0.0)  # gate.json's order
        return {**out, **inconclusive(reason), "log_change": 0.0}
    rate, width = mine
    logs = [math.log(r) for r, _ in theirs]
    middle = statistics.median(logs)
    base_width = statistics.median(w for _, w in theirs)
    if len(theirs) >= MIN_NIGHTS:
        spread = MAD_TO_SD * statistics.median(abs(v - middle) for v in logs)
    else:
        spread = night_spread
    d = middle - math.log(rate)
    # The true capacities lie in [rate, rate·e^width) and [base, base·e^base_width): their
    # log difference in [d − width, d + base_width].
    out.update(
        change=as_change(CAPACITY, d),
        log_change=d + (base_width - width) / 2,
        half_width_log=(base_width + width) / 2,
        se_log=spread,
        spread_log=spread,
    )
    return {**out, **judge(out, max_regression, confidence, rule)}


def describe_metric(m: JudgedFigure) -> str:
    """One compared figure in a reason line: change, interval and samples."""
    span = f" [{m.interval[0]:+.0%}, {m.interval[1]:+.0%}]" if m.interval else ""
    samples = {side: _count(n) for side, n in (m.samples or {}).items()}
    return (
        f"{m.metric} {m.change or 0.0:+.0%}{span} "
        f"({samples.get('current')} vs {samples.get('baseline')} samples)"
    )


def _count(n: float | None) -> int | float | None:
    """A sample count as gate.json has it (the model reads every number as a float)."""
    return int(n) if n is not None and float(n).is_integer() else n


__all__ = [
    "CAPACITY",
    "DEFAULT_HISTORY",
    "DEFAULT_NIGHT_SPREAD",
    "HIGHER_IS_BETTER",
    "MAX_HISTORY",
    "STATUSES",
    "Reference",
    "as_change",
    "compare",
    "compare_capacity",
    "compare_figure",
    "counts",
    "describe_metric",
    "figures_of",
    "judge",
    "margin_of",
    "reference_of",
]
