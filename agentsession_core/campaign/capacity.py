"""A campaign's capacity search as it runs: the probes judged so far, what a level means
in the population's unit, and gate.json's `capacity` section (docs/SPEC.md §6.7).

The decisions are campaign/search.py's; Campaign.probe holds and judges each probe and
samples the worker listing at it; this module keeps the record between them and says what it
found, with the density frontier at the capacity (campaign/density.py), how the found level's
confirmation went (`confirmed`, `confirmation`) and what bound the capacity (`bound_by`, the
text a person reads, and `bound_kind`, what a pipeline branches on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentsession_core.campaign.density import DensityFrontier, node_resources
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.search import (
    NextProbe,
    Probe,
    ProbeOutcome,
    ProbeStage,
    SearchEnd,
    SearchPlan,
    decide,
)
from agentsession_core.engine.population_params import TurnoverParams, settings_of
from agentsession_core.judge.gate_document import BoundKind
from agentsession_core.judge.thresholds import LATENCY_STATS, RATIO_STATS, Threshold
from agentsession_core.judge.verdict import WindowVerdict

# A probe window's outcome → the search's word for it.
_PROBE_OUTCOME: dict[str, ProbeOutcome] = {
    "pass": "held",
    "break": "broke",
    "void": "void",
    "aborted": "aborted",
}
_FAILURE_STATS = (*RATIO_STATS, "failures")


@dataclass(frozen=True)
class Dimension:
    """What a level is in the population's own unit."""

    base: float  # the load at 1x
    unit: str
    whole: bool  # a count (sessions, residents): a level loads round(base × level)

    def load(self, level: float) -> float:
        if self.whole:
            return float(max(1, round(self.base * level)))
        return round(self.base * level, 9)  # 0.3 × 3 is 0.9, not 0.8999999999999999


def dimension_of(params: CampaignParams) -> Dimension:
    population = params.population
    if params.search.dimension == "awake":
        residents = settings_of(population, TurnoverParams).awake  # validated: a turnover
        return Dimension(float(residents), "residents", True)
    if population.kind == "turnover":
        return Dimension(population.target_rps, "swaps/s", False)
    if population.kind == "cold-resume":
        return Dimension(population.target_rps, "resumes/s", False)
    if population.kind == "turns":
        return Dimension(population.turns_per_hour / 3600.0, "turns/s", False)
    return Dimension(float(population.sessions), "sessions", True)


@dataclass
class ProbeRecord:
    level: float
    rate: float
    outcome: ProbeOutcome
    figure: float | None
    verdict: WindowVerdict
    why: str | None = None  # a void or aborted probe's reason, an SLO not judged
    stage: ProbeStage = "search"
    # Cut short by the run's own stop (the substrate gone, a signal, a full disk), not by an
    # abort rule: it says nothing of the level, so it never counts as a break (issue 29).
    stopped: bool = False

    @property
    def stage_note(self) -> str:
        """What a probe line adds for a probe after the search converged."""
        return {"confirm": " (the confirmation)", "step-down": " (the step down)"}.get(
            self.stage, ""
        )

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "index": v.index,
            "level": self.level,
            "rate": self.rate,
            "outcome": self.outcome,
            "figure": self.figure,
            "start_unix": v.start_unix,
            "end_unix": v.end_unix,
            "missed": [r.threshold for r in v.broken],
            "why": self.why,
            "stage": self.stage,
        }


@dataclass
class CapacitySearch:
    """The search of one campaign: started once the first level's hold held."""

    params: CampaignParams
    slo: Threshold
    anchor: float | None = None  # the level that held before the first probe
    not_run: str | None = None  # why there was no search, once that is known
    probes: list[ProbeRecord] = field(default_factory=list)
    end: SearchEnd | None = None
    density: DensityFrontier | None = None  # the worker listings sampled (set by `of`)
    pending: NextProbe | None = None  # what next_level asked for: the probe `record` books

    @classmethod
    def of(cls, params: CampaignParams, slo: Threshold) -> CapacitySearch:
        search = params.search
        node = node_resources(
            search.nodes,
            search.node_vcpus,
            search.node_memory,
            embedded=params.target.substrate is None,
        )
        return cls(params, slo, density=DensityFrontier(node))

    @property
    def dimension(self) -> Dimension:
        return dimension_of(self.params)

    @property
    def plan(self) -> SearchPlan:
        search = self.params.search
        load_of: Callable[[float], float] | None = (
            self.dimension.load if self.dimension.whole else None
        )
        return SearchPlan(
            start=self.params.search_start,
            factor=search.factor,
            resolution=search.resolution,
            max_level=search.max_level,
            load_of=load_of,
        )

    def start(self, anchor: float | None, why_not: str | None) -> None:
        """After the planned windows: `anchor` the first level when it held, else why the
        search does not run."""
        if anchor is None:
            self.not_run = why_not or "the first level did not hold"
        self.anchor = anchor

    @property
    def running(self) -> bool:
        return self.anchor is not None and self.end is None and self.not_run is None

    def next_level(self) -> float | None:
        """The next probe's level; None once the search has ended (self.end says how)."""
        if not self.running:
            return None
        probes = [Probe(p.level, p.outcome, p.stage) for p in self.probes]
        step = decide(self.plan, self.anchor, probes)
        if isinstance(step, SearchEnd):
            self.end, self.pending = step, None
            return None
        self.pending = step
        return step.level

    @property
    def next_stage(self) -> ProbeStage:
        """The stage of the probe next_level asked for (search, confirm, step-down)."""
        return self.pending.stage if self.pending is not None else "search"

    def _stage_of(self, level: float) -> ProbeStage:
        pending = self.pending
        return pending.stage if pending is not None and pending.level == level else "search"

    def record(
        self, level: float, verdict: WindowVerdict, *, stopped: str | None = None
    ) -> ProbeRecord:
        """Book a judged probe. `stopped`: why the run's own stop cut it short (the
        substrate unreachable, a signal, a full disk): the probe is `aborted` (or void),
        never `broke`, and the search ends without claiming a break at its level."""
        outcome = _PROBE_OUTCOME[verdict.outcome]
        mine = next((r for r in verdict.results if r.threshold == self.slo.text), None)
        why = verdict.void_reason or verdict.abort_reason
        stage = self._stage_of(level)
        self.pending = None
        if stopped is not None:
            record = ProbeRecord(
                level=level,
                rate=self.dimension.load(level),
                outcome="void" if outcome == "void" else "aborted",
                figure=mine.observed if mine is not None else None,
                verdict=verdict,
                why=why or stopped,
                stopped=True,
                stage=stage,
            )
            self.probes.append(record)
            self.stop(f"the probe at {level:g}x was cut short, not a break: {stopped}")
            return record
        if outcome == "held" and mine is not None and 0 < mine.samples < self.slo.min_samples:
            # The window was too short for the SLO's minimum: a shortfall of the plan, not of
            # the substrate. Booked broke, it stopped the density search short (issue 38).
            outcome = "void"
            why = (
                f"too few samples to judge the SLO: {mine.samples} < its min "
                f"{self.slo.min_samples} in the probe's {self.params.search_window_seconds:g} s "
                "window (lengthen search.window_seconds or lower the SLO's min)"
            )
        elif outcome == "held" and (mine is None or mine.passed is None):
            # An SLO that could not be judged (no wake answered) did not hold.
            outcome = "broke"
            why = f"the SLO was not judged: {mine.detail if mine else 'no result'}"
        record = ProbeRecord(
            level=level,
            rate=self.dimension.load(level),
            outcome=outcome,
            figure=mine.observed if mine is not None else None,
            verdict=verdict,
            why=why,
            stage=stage,
        )
        self.probes.append(record)
        return record

    def stop(self, why: str) -> None:
        """The campaign stopped (a signal, a dead substrate) before the search ended."""
        if self.anchor is None and self.not_run is None:
            self.not_run = why
        elif self.end is None and self.not_run is None:
            held = [p.level for p in self.probes if p.outcome == "held"] + [self.anchor or 0]
            last = self.probes[-1] if self.probes else None
            if last is not None and last.outcome == "aborted" and not last.stopped:
                # An abort rule tripped there: that level did not hold, even where it held
                # before (a confirmation's level), so the capacity lies below it.
                held = [level for level in held if level < last.level]
            self.end = SearchEnd("aborted", max(held, default=0) or None, None, why)

    # ------------------------------------------------------------ gate.json
    def document(self) -> dict[str, Any]:
        """gate.json's `capacity` (docs/SPEC.md §6.7)."""
        search, dim = self.params.search, self.dimension
        held_levels = [p.level for p in self.probes if p.outcome == "held"]
        if self.anchor is not None:
            held_levels.append(self.anchor)
        doc: dict[str, Any] = {
            "status": "not run",
            "dimension": search.dimension,
            "threshold": self.slo.text,
            "figure_unit": "ms" if self.slo.stat in LATENCY_STATS else "",
            "slo_value": self.slo.value,
            "unit": dim.unit,
            "base_rate": dim.base,
            "resolution": search.resolution,
            "max_level": search.max_level,
            "level": None,
            "rate": None,
            "broke_at_level": None,
            "broke_at_rate": None,
            "held_level": max(held_levels) if held_levels else None,
            "anchor_level": self.anchor,
            "reason": self.not_run or "the search did not end",
            "confirmed": None,
            "confirmation": self._confirmation(),
            "bound_by": None,
            "bound_kind": None,
            "probes": [p.to_dict() for p in self.probes],
        }
        end = self.end
        if self.not_run is not None or end is None:
            return self._with_density(doc)
        broke_at = end.broke_at
        last = self.probes[-1] if self.probes else None
        if end.status == "aborted" and last and last.outcome == "aborted" and not last.stopped:
            tripped = last.level  # an abort rule tripped there: the level did not hold
            broke_at = tripped if broke_at is None else min(broke_at, tripped)
        kind, bound_by = self._bound(end, broke_at)
        doc.update(
            status=end.status,
            broke_at_level=broke_at,
            broke_at_rate=dim.load(broke_at) if broke_at is not None else None,
            confirmed=end.confirmed,
            bound_by=bound_by,
            bound_kind=kind,
        )
        held = end.capacity
        if end.status in ("found", "aborted") and held is not None:
            reason = self._found(end, held, broke_at, bound_by)
            doc.update(level=held, rate=dim.load(held), reason=reason)
        else:
            doc["reason"] = self._unknown(end)
        return self._with_density(doc)

    def _confirmation(self) -> dict[str, Any] | None:
        """`confirmation`: the found level held once more, and the step down when it broke
        (`already_held`: the step landed on a level the search had held, not held again)."""
        confirm = next((p for p in self.probes if p.stage == "confirm"), None)
        if confirm is None:
            return None
        doc = self._probe_summary(confirm)
        step = next((p for p in self.probes if p.stage == "step-down"), None)
        end = self.end
        if step is not None:
            doc["step_down"] = {**self._probe_summary(step), "already_held": False}
        elif end is not None and end.confirmed is False and end.capacity is not None:
            level = end.capacity
            held = [p for p in self.probes if p.outcome == "held" and p.level == level]
            doc["step_down"] = {
                "level": level,
                "rate": self.dimension.load(level),
                "index": held[-1].verdict.index if held else None,  # None: the anchor's hold
                "outcome": "held",
                "why": "held already: a level is not held a second time",
                "already_held": True,
            }
        else:
            doc["step_down"] = None
        return doc

    @staticmethod
    def _probe_summary(probe: ProbeRecord) -> dict[str, Any]:
        return {
            "level": probe.level,
            "rate": probe.rate,
            "index": probe.verdict.index,
            "outcome": probe.outcome,
            "why": probe.why,
        }

    def _bound(self, end: SearchEnd, broke_at: float | None) -> tuple[BoundKind | None, str | None]:
        """What bound the capacity: the rule the lowest broken probe missed (the SLO first),
        the abort rule that tripped, the generator's saturation, the window's sample floor,
        max_level, or the run's stop."""
        last = self.probes[-1] if self.probes else None
        if end.status == "above":
            return "max_level", f"max_level {self.params.search.max_level:g}x"
        if end.status == "void" and last is not None:
            if last.verdict.void_reason is None:  # judged too thin, not saturated
                return "samples", f"the SLO's min {self.slo.min_samples} samples"
            return "generator", "the load generator's saturation"
        if end.status == "aborted":
            if last is None or last.stopped or last.outcome != "aborted":
                return "stopped", end.why  # an outage, a signal: not the substrate's capacity
            reason = last.verdict.abort_reason or ""  # an abort rule tripped at the last probe
            tripped = next(
                (r.text for r in self.params.abort_rules if repr(r.text) in reason), None
            )
            return "abort", tripped or reason or None
        broken = [p for p in self.probes if p.outcome == "broke" and p.level == broke_at]
        if not broken:
            return None, None
        missed = [r.threshold for r in broken[-1].verdict.broken]
        if self.slo.text in missed or not missed:  # missed, or not judged (no answer)
            return "slo", self.slo.text
        rules = {t.text: t for t in self.params.thresholds}
        first = rules.get(missed[0])
        failures = first is not None and first.stat in _FAILURE_STATS
        return ("failures" if failures else "threshold"), missed[0]

    def _with_density(self, doc: dict[str, Any]) -> dict[str, Any]:
        """`density`: the worker listing at the frontier — the capacity, or the highest
        level held when the search found none (a floor) — and the memory's prediction."""
        if self.density is None:
            return doc
        level = doc["level"] if doc["level"] is not None else doc["held_level"]
        dim = self.dimension
        awake = self.params.search.dimension == "awake"
        doc["density"] = self.density.document(
            level,
            frontier_rate=dim.load(level) if level is not None else None,
            unit=dim.unit,
            found_residents=dim.load(level) if awake and level is not None else None,
            resolution=self.params.search.resolution,
        )
        return doc

    def _found(
        self, end: SearchEnd, held: float, broke_at: float | None, bound_by: str | None
    ) -> str:
        dim = self.dimension
        line = f"capacity {dim.load(held):g} {dim.unit} ({held:g}x)"
        if end.status == "found" and end.confirmed:
            line += ", confirmed: held again"
        elif end.status == "found":
            line += f", not confirmed: {end.why}"
        if broke_at is not None:
            line += f"; broke at {dim.load(broke_at):g} {dim.unit} ({broke_at:g}x)"
            if bound_by is not None and end.status == "found":
                line += f", bound by {bound_by}"
        if end.status == "aborted":
            line += f"; the search ended early, the capacity is the last level held: {end.why}"
        return line

    def _unknown(self, end: SearchEnd) -> str:
        dim = self.dimension
        if end.status == "above":
            top = self.params.search.max_level
            return (
                f"the SLO held at every probe up to max_level {top:g}x "
                f"({dim.load(top):g} {dim.unit}): the capacity lies above it"
            )
        if end.status == "void":
            last = self.probes[-1]
            floor = f"; at least {dim.load(end.capacity):g} {dim.unit}" if end.capacity else ""
            if last.verdict.void_reason is None:  # judged too thin, not saturated
                where = f"the probe at {last.level:g}x ({last.rate:g} {dim.unit})"
                return f"void: {where} had {last.why}{floor}"
            return (
                f"void: the probe at {last.level:g}x ({last.rate:g} {dim.unit}) saturated the "
                f"load generator ({last.why}): the generator, not the substrate, was the "
                f"limit{floor}"
            )
        return f"the SLO never held: {end.why}"


__all__ = ["CapacitySearch", "Dimension", "ProbeRecord", "dimension_of"]
