"""gate.json (docs/SPEC.md §6): the run's verdict, each window's outcome, the ramp, drift, each
headline figure with its interval (judge/uncertainty.py) and the comparison with a baseline
(judge/compare.py).

The verdict, from the judged windows, how the run ended and the comparison:

* ``void`` — the run did not finish (cancelled, refused, a lost shard), judged no window, or
  any window was void (a saturated generator makes the whole run suspect); a comparison never
  turns a void run into a fail;
* ``fail`` — a window broke or was aborted, the run was aborted or failed (e.g. the substrate
  died), or, in a run that would otherwise pass, a compared figure `regressed`;
* ``pass`` — otherwise. An `inconclusive` figure never decides anything.

The run's headline is the whole first-level judged hold's (``run["headline"]``, from
``judge.headline``) when the caller gives it; without it, each metric's worst value among
the judged windows at the first level (percentiles of different windows are never averaged).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from agentsession_core.errors import UsageError
from agentsession_core.judge import paired
from agentsession_core.judge.compare import (
    DEFAULT_NIGHT_SPREAD,
    compare,
    compare_capacity,
    describe_metric,
    figures_of,
    reference_of,
)
from agentsession_core.judge.conditions import differences
from agentsession_core.judge.decision import DEFAULT_RULE, Rule
from agentsession_core.judge.drift import drift, ramp_result
from agentsession_core.judge.false_discovery import DEFAULT_METHOD, Method, controlled
from agentsession_core.judge.gate_document import (
    GATE_SCHEMA,
    Baseline,
    GateDocument,
    GateInputError,
    JudgedFigure,
    Paired,
)
from agentsession_core.judge.judged_figure import counts, regressions, rejudged
from agentsession_core.judge.uncertainty import DEFAULT_CONFIDENCE
from agentsession_core.judge.verdict import WindowVerdict

EXIT_CODES = {"pass": 0, "fail": 1, "void": 2}
DEFAULT_MAX_REGRESSION = 0.2
# A baseline with one of these verdicts or run states measured nothing to compare against.
UNUSABLE_VERDICTS = ("void", "fail")


class StoredBaseline(Protocol):
    """What the comparison reads of a stored run (judge/stored_run.py `StoredRun`): where it
    is and its gate document (declared here: the stored run is read with this module's
    gate_document)."""

    @property
    def location(self) -> str: ...

    @property
    def gate(self) -> GateDocument: ...


# --------------------------------------------------------------------------- headline
def _worse(metric: str, a: float, b: float) -> float:
    return min(a, b) if metric == "achieved_rps" else max(a, b)


def worst_headline(verdicts: list[WindowVerdict]) -> dict[str, dict[str, float]]:
    if not verdicts:
        return {}
    first_level = verdicts[0].level
    judged = [v for v in verdicts if v.level == first_level and v.outcome in ("pass", "break")]
    out: dict[str, dict[str, float]] = {}
    for v in judged:
        for section, values in v.headline.items():
            mine = out.setdefault(section, {})
            for metric, value in values.items():
                mine[metric] = value if metric not in mine else _worse(metric, mine[metric], value)
    return out


# --------------------------------------------------------------------------- verdict
def decide(doc: dict[str, Any] | GateDocument) -> tuple[str, str]:
    """(verdict, reason) from a gate document's windows, run status and comparisons: a
    paired campaign's candidate against its reference arm (docs/SPEC.md §6.8), then the
    baseline. A document being written is read through its model like a stored one."""
    # The verdict is what this decides: a document without one yet is read as void.
    gate = (
        doc
        if isinstance(doc, GateDocument)
        else GateDocument.model_validate({"verdict": "void", **doc})
    )
    verdict, reason = _judged(gate)
    paired, comparison = gate.paired, gate.baseline
    if verdict == "pass" and paired is not None and paired.status == "void":
        return "void", f"the paired comparison is void: {paired.why}"
    # Only a run that would otherwise pass can fail on a comparison: a void run's figures
    # are the generator's as much as the substrate's.
    mine = [m for m in (paired.metrics if paired else []) if m.status == "regressed"]
    if verdict == "pass" and mine:
        named = "; ".join(describe_paired(m) for m in mine)
        return "fail", f"the candidate regressed against the reference arm: {named}"
    regressed = [m for m in (comparison.metrics if comparison else []) if m.status == "regressed"]
    if verdict == "pass" and regressed:
        named = "; ".join(describe_metric(m) for m in regressed)
        return "fail", f"regression against the baseline: {named}"
    notes = _paired_note(paired) + _comparison_note(comparison) + _capacity_note(gate)
    return verdict, reason + notes


def describe_paired(m: JudgedFigure) -> str:
    """One paired figure in a reason line: the candidate's change, its interval, blocks."""
    span = f" [{m.interval[0]:+.0%}, {m.interval[1]:+.0%}]" if m.interval else ""
    return f"{m.metric} {m.change or 0.0:+.0%}{span} (candidate/reference, {m.blocks} blocks)"


def _tally(counts: dict[str, int] | None) -> str:
    return ", ".join(f"{n} {status}" for status, n in (counts or {}).items() if n)


def _paired_note(paired: Paired | None) -> str:
    if paired is None:
        return ""
    if paired.status == "void":
        return f"; paired comparison void ({paired.why})"
    return (
        f"; against the reference arm ({paired.blocks} paired blocks): "
        f"{_tally(paired.counts) or 'nothing compared'}"
    )


def _capacity_note(gate: GateDocument) -> str:
    if gate.capacity is None:
        return ""
    return f"; capacity search {gate.capacity.status}: {gate.capacity.reason}"


def _judged(gate: GateDocument) -> tuple[str, str]:
    """The verdict of the windows and the run's end, without the comparison."""
    windows = gate.windows
    outcomes = [w.outcome for w in windows]
    status, why = gate.run_status, gate.abort_reason
    if status == "refused":
        # Refused before any load (unreachable substrate, bad credentials, a template too
        # small): nothing about the substrate's performance was judged.
        return "void", f"the campaign could not start: {why or 'refused'}"
    if status == "cancelled" and "break" not in outcomes:
        # Stopped by an operator or a scheduler: nothing says the substrate failed.
        return "void", f"the run was cancelled ({why or 'no reason given'})"
    if status == "void" and "break" not in outcomes:
        # The load generator itself failed (a shard was lost): the substrate was not judged.
        return "void", f"the load generator failed: {why or 'no reason'}"
    if ("aborted" in outcomes or why) and status != "cancelled":
        return "fail", f"aborted: {why or 'an abort rule tripped'}"
    if "break" in outcomes:
        broken = [w for w in windows if w.outcome == "break"]
        missed = broken[0].missed or []
        return "fail", (
            f"{len(broken)} window(s) broke; window {broken[0].index} missed "
            f"{'; '.join(missed) or 'a threshold'}"
        )
    if status in ("failed", "aborted"):
        return "fail", f"the run {status}"
    if stopped := (gate.run.stopped if gate.run else None):
        # Stopped by hand through the control API: what was held is not the plan.
        return "void", f"stopped by hand: {stopped}"
    if status not in (None, "completed"):
        return "void", f"the run did not finish ({status})"
    if not windows:
        return "void", "no window was judged"
    if "void" in outcomes:
        first = next(w for w in windows if w.outcome == "void")
        return "void", f"window {first.index} is void: {first.void_reason}"
    return "pass", f"{len(windows)} window(s) passed"


def _comparison_note(comparison: Baseline | None) -> str:
    if comparison is None:
        return ""
    if comparison.status == "not comparable":
        return f"; baseline not comparable ({', '.join(comparison.differences or [])})"
    if comparison.status == "none":
        return f"; no baseline: {comparison.why}"
    return f"; against the baseline: {_tally(comparison.counts) or 'nothing compared'}"


def _window_summary(v: WindowVerdict) -> dict[str, Any]:
    return {
        "index": v.index,
        "level": v.level,
        "outcome": v.outcome,
        "start_unix": v.start_unix,
        "end_unix": v.end_unix,
        "missed": [r.threshold for r in v.broken],
        "void_reason": v.void_reason,
        "abort_reason": v.abort_reason,
        "saturated_seconds": v.saturated_seconds,
        "left_out_seconds": v.left_out_seconds,
    }


def gate_document(
    verdicts: list[WindowVerdict],
    *,
    abort_reason: str | None,
    run_status: str,
    run: dict | None = None,
    figures: dict[str, dict[str, Any]] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    conditions: dict[str, Any] | None = None,
    capacity: dict[str, Any] | None = None,
    paired: dict[str, Any] | None = None,
) -> dict:
    """gate.json without a comparison (with_baseline adds one). `run` describes this run
    (name, tag, location …) and may carry its whole-hold "headline"; `conditions` are the
    parameters a baseline must share (judge/conditions.py); `capacity` the capacity
    search's result (campaign/capacity.py), which informs the verdict only through a
    comparison: a probe that broke above the capacity is the search working; `paired` a
    paired campaign's comparison of its arms (judge/paired.py)."""
    run = dict(run or {})
    current = run.pop("headline", None) or worst_headline(verdicts)
    doc: dict[str, Any] = {
        "schema": GATE_SCHEMA,
        "verdict": "void",
        "reason": "",
        "run": run,
        "run_status": run_status,
        "abort_reason": abort_reason,
        "windows": [_window_summary(v) for v in verdicts],
        "ramp": ramp_result(verdicts),
        "drift": drift(verdicts),
        "headline": current,
        "confidence": confidence,
        "figures": figures or {},
        "conditions": conditions or {},
        "baseline": None,
    }
    if capacity is not None:
        doc["capacity"] = capacity
    if paired is not None:
        doc["paired"] = paired
    doc["verdict"], doc["reason"] = decide(doc)
    return doc


def refusal(baseline: StoredBaseline) -> str | None:
    """Why a run cannot serve as a baseline (None when it can): it measured nothing to
    compare against, or failed itself and nobody accepted it (a run read with its
    acceptance, judge/acceptance.py, carries it as `acceptance`: its failure was an
    accepted change, docs/SPEC.md §6.3)."""
    gate = baseline.gate
    if gate.run_status == "refused":
        return "it was refused before any load"
    if gate.verdict == "fail" and getattr(baseline, "acceptance", None) is not None:
        return None
    if gate.verdict in UNUSABLE_VERDICTS:
        return f"its verdict is {gate.verdict} ({gate.reason or 'no reason'})"
    return None


def baseline_refusal(run: StoredBaseline) -> str | None:
    """The one line the gate refuses a readable baseline with (None: it is one), as
    `gate --baseline`, a campaign's `baseline` and the report all say it."""
    why = refusal(run)
    if why is None:
        return None
    return f"baseline {run.location or 'baseline'}: not a baseline: {why}"


def with_baseline(
    doc: dict,
    baselines: StoredBaseline | Sequence[StoredBaseline],
    max_regression: float,
    *,
    night_spread: float = DEFAULT_NIGHT_SPREAD,
    confidence: float | None = None,
    refuse: bool = True,
    rule: Rule = DEFAULT_RULE,
    false_discovery: Method = DEFAULT_METHOD,
    spread_runs: Sequence[StoredBaseline] = (),
) -> dict:
    """A copy of a gate document compared against one baseline run or several (oldest
    first), verdict recomputed. A baseline that cannot be one is refused (GateInputError;
    `refuse=False` only to show figures side by side, as the report does); one whose
    conditions differ is `not comparable`. `spread_runs`: a single baseline's history
    (judge/baselines.py `spread_history`), over which the run-to-run spread one run cannot
    see is measured."""
    if not (max_regression >= 0 and math.isfinite(max_regression)):
        raise UsageError(f"--max-regression: {max_regression} is not a fraction >= 0")
    runs = list(baselines) if isinstance(baselines, Sequence) else [baselines]
    for run in runs:
        line = baseline_refusal(run)
        if line is not None and refuse:
            raise GateInputError(line)
    level = confidence if confidence is not None else doc.get("confidence") or DEFAULT_CONFIDENCE
    out = dict(doc)
    locations: list[str | None] = [r.location for r in runs]
    differing = sorted(
        {d for r in runs for d in differences(doc.get("conditions"), r.gate.conditions)}
    )
    if differing:
        out["baseline"] = {
            "status": "not comparable",
            "locations": locations,
            "location": locations[-1] if locations else None,
            "differences": differing,
            "metrics": [],
            "regressions": [],
        }
    else:
        current = GateDocument.model_validate({"verdict": "void", **doc})
        reference = reference_of(
            [r.gate for r in runs],
            night_spread=night_spread,
            history=[r.gate for r in spread_runs],
        )
        metrics = compare(
            figures_of(current),
            reference,
            max_regression=max_regression,
            confidence=level,
            rule=rule,
        )
        # The capacity beside the figures, by the same rule (known to its bracket).
        capacity = compare_capacity(
            current,
            [r.gate for r in runs],
            night_spread=night_spread,
            max_regression=max_regression,
            confidence=level,
            rule=rule,
        )
        if capacity is not None:
            metrics.append(capacity)
        metrics, family = controlled(  # the figures judged together (false_discovery.py)
            metrics,
            rule=rule,
            confidence=level,
            max_regression=max_regression,
            method=false_discovery,
        )
        out["baseline"] = {
            "status": "compared",
            **reference.describe(),
            "location": locations[-1] if locations else None,
            "max_regression": max_regression,
            "confidence": level,
            "rule": rule,
            "false_discovery": family,
            "night_spread": night_spread,
            "counts": counts(metrics),
            "metrics": metrics,
            "regressions": regressions(metrics),
        }
    out["verdict"], out["reason"] = decide(out)
    return out


def without_baseline(doc: dict, why: str) -> dict:
    """A gate document that asked for a baseline and found none (baseline: auto on the first
    nights): said in the document and the reason, nothing else changes."""
    out = dict(doc, baseline={"status": "none", "why": why, "metrics": [], "regressions": []})
    out["verdict"], out["reason"] = decide(out)
    return out


def rejudge_regressions(
    doc: dict,
    max_regression: float,
    rule: Rule | None = None,
    false_discovery: Method = DEFAULT_METHOD,
) -> dict:
    """Re-apply a different max_regression (and decision rule) to the comparison already
    stored in `doc`."""
    stored = doc.get("baseline")
    if not stored or not stored.get("metrics"):
        return doc
    level = stored.get("confidence") or doc.get("confidence") or DEFAULT_CONFIDENCE
    rule = rule or stored.get("rule") or DEFAULT_RULE  # stored before rules were named: that one
    again = rejudged(
        stored,
        max_regression=max_regression,
        confidence=level,
        rule=rule,
        method=false_discovery,
    )
    out = dict(doc, baseline=again)
    out["verdict"], out["reason"] = decide(out)
    return out


def rejudge_paired(
    doc: dict, max_regression: float, rule: Rule, false_discovery: Method = DEFAULT_METHOD
) -> dict:
    """A paired campaign's stored comparison judged again with another margin or rule."""
    again = paired.rejudge(doc["paired"], max_regression, rule, false_discovery)
    out = dict(doc, paired=again)
    out["verdict"], out["reason"] = decide(out)
    return out


def exit_code(doc: dict) -> int:
    return EXIT_CODES.get(doc.get("verdict", "void"), 2)


def summary(doc: dict) -> str:
    """One line for humans."""
    line = f"gate: {doc.get('verdict', 'void').upper()} — {doc.get('reason', '')}"
    ramp = doc.get("ramp") or {}
    if ramp.get("first_broken_level") is not None or ramp.get("last_held_level") is not None:
        line += (
            f" (ramp: held {ramp.get('last_held_level')}, broke {ramp.get('first_broken_level')})"
        )
    return line


__all__ = [
    "EXIT_CODES",
    "StoredBaseline",
    "baseline_refusal",
    "decide",
    "describe_paired",
    "exit_code",
    "gate_document",
    "refusal",
    "rejudge_paired",
    "rejudge_regressions",
    "summary",
    "with_baseline",
    "without_baseline",
    "worst_headline",
]
