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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

ProbeOutcome = Literal["held", "broke", "void", "aborted"]
PROBE_OUTCOMES: tuple[str, ...] = ("held", "broke", "void", "aborted")
# found: bracketed within resolution; above: held at max_level; below: broke with nothing
# held beneath it; void: the generator was the limit; aborted: an abort rule ended it.
SearchStatus = Literal["found", "above", "below", "void", "aborted"]
_EPS = 1e-9


@dataclass(frozen=True)
class Probe:
    level: float
    outcome: ProbeOutcome


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


def bracket(anchor: float | None, probes: Sequence[Probe]) -> tuple[float | None, float | None]:
    """(highest held level below the lowest broken one, the lowest broken level)."""
    broke = [p.level for p in probes if p.outcome == "broke"]
    hi = min(broke) if broke else None
    held = [p.level for p in probes if p.outcome == "held"]
    if anchor is not None:
        held.append(anchor)
    below = [level for level in held if hi is None or level < hi]
    return (max(below) if below else None), hi


def decide(plan: SearchPlan, anchor: float | None, probes: Sequence[Probe]) -> float | SearchEnd:
    """The next level to probe, or how the search ended."""
    lo, hi = bracket(anchor, probes)
    if probes and probes[-1].outcome in ("void", "aborted"):
        last = probes[-1]
        status: SearchStatus = "void" if last.outcome == "void" else "aborted"
        return SearchEnd(status, lo, hi, f"the probe at {last.level:g}x was {last.outcome}")
    if hi is None:  # still growing
        if not probes:
            return min(plan.start, plan.max_level)
        top = max(p.level for p in probes)
        if top >= plan.max_level - _EPS:
            return SearchEnd("above", lo, None, f"held at max_level {plan.max_level:g}x")
        return min(top * plan.factor, plan.max_level)
    if lo is None:
        return SearchEnd("below", None, hi, f"broke at {hi:g}x with no level held below it")
    if hi - lo <= plan.resolution * lo + _EPS:
        return SearchEnd("found", lo, hi, f"held {lo:g}x, broke {hi:g}x: within resolution")
    mid = (lo + hi) / 2
    if plan.load(mid) in (plan.load(lo), plan.load(hi)):
        return SearchEnd("found", lo, hi, f"held {lo:g}x, broke {hi:g}x: no load between them")
    return mid


def most_probes(plan: SearchPlan, anchor: float) -> int:
    """An upper bound on the probes a search from `anchor` makes (what bounds its duration):
    the growth from start to max_level, then the halvings of the first bracket down to
    resolution (docs/guide/capacity-search.md)."""
    steps = math.log(plan.max_level / plan.start) / math.log(plan.factor)
    grow = 1 + max(0, math.ceil(steps - _EPS))
    # The first bracket is at most (factor − 1) of its held end wide, or start/anchor − 1
    # when the first probe breaks; each bisection halves it and its held end only rises.
    width = max(plan.factor, plan.start / anchor) - 1.0
    halvings = max(0, math.ceil(math.log2(width / plan.resolution) - _EPS))
    return grow + halvings


__all__ = [
    "PROBE_OUTCOMES",
    "Probe",
    "SearchEnd",
    "SearchPlan",
    "bracket",
    "decide",
    "most_probes",
]
