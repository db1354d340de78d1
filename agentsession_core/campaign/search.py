"""The capacity search's decisions (docs/SPEC.md §6.7): from the probes so far, the next
level to probe or the search's end and its result. Pure: no clock, no I/O, no engine, so
every path is a unit test; `campaign/campaign.py` runs the probes it asks for.

The search starts once the campaign's first level held (the `anchor`, a level that held).
It grows: `start`, then each held level × `factor` (never past `max_level`), until a probe
breaks. Then it bisects between the highest level that held below the lowest that broke
and that broken level, until they are within `resolution` of each other (relative to the
held one) or the next midpoint would load the population no differently from one of them
(a count of sessions or residents moves in whole steps). The capacity is the last level
that held: the true knee lies in [capacity, broke_at_level), so it is known to within
`resolution` of the capacity.

A void probe (the generator saturated) or an aborted one ends the search at once; so does
a probe that held at `max_level` (the knee lies above what the search may try).

**Confirmation.** A search that converged (`found`) holds the capacity once more, one
window (the `confirm` probe), before it ends: a level held once may have held by luck.
Held again, the capacity is confirmed. Broken, the confirmed level becomes the broken end
and the search steps down once, to one resolution below it (`step-down`): when a level at
or above that step was already held (the anchor, a probe of the bisection) the step down
lands there with no further probe, since no level is held a second time; when none was, it
probes the step-down level once, and if that breaks too the capacity is the last level
held below it. Either way the search then ends, `confirmed` false. A void confirmation
(the generator saturated, a window too thin for the SLO's min) is no break: the capacity
stands, unconfirmed (`confirmed` None).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

ProbeOutcome = Literal["held", "broke", "void", "aborted"]
PROBE_OUTCOMES: tuple[str, ...] = ("held", "broke", "void", "aborted")
# search: growth and bisection; confirm: the found level held once more; step-down: one
# resolution below a confirmation that broke.
ProbeStage = Literal["search", "confirm", "step-down"]
PROBE_STAGES: tuple[str, ...] = ("search", "confirm", "step-down")
# The probes a search may add after it converged: the confirmation and one step down.
AFTER_CONVERGING = 2
# found: bracketed within resolution; above: held at max_level; below: broke with nothing
# held beneath it; void: the generator was the limit; aborted: an abort rule ended it.
SearchStatus = Literal["found", "above", "below", "void", "aborted"]
_EPS = 1e-9


@dataclass(frozen=True)
class Probe:
    level: float
    outcome: ProbeOutcome
    stage: ProbeStage = "search"


@dataclass(frozen=True)
class NextProbe:
    """The level the search asks for next, and why."""

    level: float
    stage: ProbeStage = "search"


@dataclass(frozen=True)
class SearchPlan:
    start: float
    factor: float
    resolution: float
    max_level: float
    # The load a level makes (e.g. round(awake × level) residents): two levels that make the
    # same load are one probe. None: levels are continuous.
    load_of: Callable[[float], float] | None = None

    def load(self, level: float) -> float:
        return self.load_of(level) if self.load_of is not None else level


@dataclass(frozen=True)
class SearchEnd:
    status: SearchStatus
    capacity: float | None  # the highest level that held below broke_at (None: unknown)
    broke_at: float | None
    why: str
    # found: True held again, False the confirmation broke (the search stepped down), None
    # not confirmed (void or cut short). Any other status: None.
    confirmed: bool | None = None


def bracket(anchor: float | None, probes: Sequence[Probe]) -> tuple[float | None, float | None]:
    """(highest held level below the lowest broken one, the lowest broken level)."""
    broke = [p.level for p in probes if p.outcome == "broke"]
    hi = min(broke) if broke else None
    held = [p.level for p in probes if p.outcome == "held"]
    if anchor is not None:
        held.append(anchor)
    below = [level for level in held if hi is None or level < hi]
    return (max(below) if below else None), hi


def decide(
    plan: SearchPlan, anchor: float | None, probes: Sequence[Probe]
) -> NextProbe | SearchEnd:
    """The next probe, or how the search ended."""
    confirmation = next((p for p in probes if p.stage == "confirm"), None)
    if confirmation is not None:
        return _after_confirmation(plan, anchor, probes, confirmation)
    lo, hi = bracket(anchor, probes)
    if probes and probes[-1].outcome in ("void", "aborted"):
        last = probes[-1]
        status: SearchStatus = "void" if last.outcome == "void" else "aborted"
        return SearchEnd(status, lo, hi, f"the probe at {last.level:g}x was {last.outcome}")
    if hi is None:  # still growing
        if not probes:
            return NextProbe(min(plan.start, plan.max_level))
        top = max(p.level for p in probes)
        if top >= plan.max_level - _EPS:
            return SearchEnd("above", lo, None, f"held at max_level {plan.max_level:g}x")
        return NextProbe(min(top * plan.factor, plan.max_level))
    if lo is None:
        return SearchEnd("below", None, hi, f"broke at {hi:g}x with no level held below it")
    mid = (lo + hi) / 2
    converged = hi - lo <= plan.resolution * lo + _EPS
    if converged or plan.load(mid) in (plan.load(lo), plan.load(hi)):
        return NextProbe(lo, "confirm")
    return NextProbe(mid)


def _after_confirmation(
    plan: SearchPlan, anchor: float | None, probes: Sequence[Probe], confirmation: Probe
) -> NextProbe | SearchEnd:
    lo, hi = bracket(anchor, probes)
    found = confirmation.level
    if confirmation.outcome == "held":
        return SearchEnd("found", found, hi, f"held {found:g}x again: confirmed", True)
    if confirmation.outcome == "void":  # the generator, or too thin a window: no break
        why = f"the confirmation at {found:g}x was void, not a break: the capacity is unconfirmed"
        return SearchEnd("found", found, hi, why)
    if confirmation.outcome == "aborted":
        return SearchEnd("aborted", lo, hi, f"the confirmation at {found:g}x was aborted")
    broke = f"the confirmation at {found:g}x broke"
    step = next((p for p in probes if p.stage == "step-down"), None)
    if step is None:
        target = found * (1 - plan.resolution)
        held = _held_below(anchor, probes, found)
        if target > 0 and plan.load(target) < plan.load(found):
            already = [h for h in held if plan.load(h) >= plan.load(target)]
            if not already:
                return NextProbe(target, "step-down")
        else:  # no lower load within a resolution: the step down is the last level held
            already = held[-1:]
        if not already:
            return SearchEnd("below", None, found, f"{broke}, with no level held below it")
        level = max(already)
        why = f"{broke}; stepped down once to {level:g}x, held already: not held a second time"
        return SearchEnd("found", level, found, why, False)
    if step.outcome == "held":
        why = f"{broke}; stepped down once to {step.level:g}x: held"
        return SearchEnd("found", step.level, found, why, False)
    below = _held_below(anchor, probes, step.level)
    said = "broke too" if step.outcome == "broke" else f"was {step.outcome}"
    what = f"{broke}; the step down to {step.level:g}x {said}"
    if not below:
        return SearchEnd("below", None, step.level, f"{what}, with no level held below it")
    level = below[-1]
    why = f"{what}: the capacity is the last level held below it, {level:g}x (held once)"
    return SearchEnd("found", level, min(found, step.level), why, False)


def _held_below(anchor: float | None, probes: Sequence[Probe], level: float) -> list[float]:
    """The levels held below `level`, lowest first."""
    held = [p.level for p in probes if p.outcome == "held"]
    if anchor is not None:
        held.append(anchor)
    return sorted(h for h in held if h < level - _EPS)


def most_probes(plan: SearchPlan, anchor: float) -> int:
    """An upper bound on the probes a search from `anchor` makes (what bounds its duration):
    the growth from start to max_level, then the halvings of the first bracket down to
    resolution, then the confirmation and its step down (docs/guide/capacity-search.md)."""
    steps = math.log(plan.max_level / plan.start) / math.log(plan.factor)
    grow = 1 + max(0, math.ceil(steps - _EPS))
    # The first bracket is at most (factor − 1) of its held end wide, or start/anchor − 1
    # when the first probe breaks; each bisection halves it and its held end only rises.
    width = max(plan.factor, plan.start / anchor) - 1.0
    halvings = max(0, math.ceil(math.log2(width / plan.resolution) - _EPS))
    return grow + halvings + AFTER_CONVERGING


__all__ = [
    "AFTER_CONVERGING",
    "PROBE_OUTCOMES",
    "PROBE_STAGES",
    "NextProbe",
    "Probe",
    "ProbeStage",
    "SearchEnd",
    "SearchPlan",
    "bracket",
    "decide",
    "most_probes",
]
