"""The rules a campaign is judged by: each population kind's default thresholds, the default
abort rule, and the parameter types that parse them once, at validation, into
judge/thresholds.py's Threshold (naming the entry that is wrong); everything after reads
the parsed rules, and their JSON form is their text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, PlainValidator, WithJsonSchema

from agentsession_core.campaign.bounds import MAX_RULE_CHARS
from agentsession_core.errors import UsageError
from agentsession_core.judge.thresholds import Threshold, parse_threshold

# The default thresholds per population kind (docs/SPEC.md §6), used when a campaign names
# none. achieved_rps and its target share a unit for every kind (judge/verdict.py): swaps per
# second against target_rps; steps per second against the steps the think model put due;
# turns per second against the turns the schedule made arrive. The wake headline differs:
# turnover's wakes are TimeToWake (from the tick), closed and turns wake on WakeFirstTouch
# (from the end of the think or the turn's start). A turnover must also hold its resident set:
# the mean gap may not exceed 2 % of awake.
_STEPS_AND_RATE = ("Step_*: failure_ratio < 0.01", "achieved_rps >= 0.95 * target")
DEFAULT_THRESHOLDS_BY_KIND: dict[str, tuple[str, ...]] = {
    "turnover": (
        "TimeToWake: p99 < 2s",
        *_STEPS_AND_RATE,
        "ResidentShortfall: events_per_s <= 0.02 * awake",
    ),
    "closed": ("WakeFirstTouch: p99 < 2s", *_STEPS_AND_RATE),
    "turns": ("WakeFirstTouch: p99 < 2s", *_STEPS_AND_RATE),
    # Cohorts (docs/SPEC.md §4.5, §4.6) have no rate to achieve: a window must hold a
    # cohort's end (count >= 1, the rule a stalled load misses), the cohorts must come up
    # whole, and each actor in time. Only rules that hold whatever the cohort's size and
    # spawn rate (its marks grow with the ramp), so a healthy substrate passes them.
    "spawn": (
        "ActorTimeToReady: p99 < 10s",
        "ActorTimeToReady: failure_ratio < 0.01",
        "TimeToAllReady: failure_ratio < 0.01",
        "TimeToAllReady: count >= 1",
        "CrashCount: events < 1",
    ),
    "burst": (
        "ActorTimeToResume: p99 < 5s",
        "TimeToAllResumed: failure_ratio < 0.01",
        "TimeToAllSuspended: failure_ratio < 0.01",
        "TimeToAllResumed: count >= 1",
        "Step_*: failure_ratio < 0.01",
    ),
    # Resumes at a rate (docs/SPEC.md §4.7): no step, so the wake is the whole figure, and
    # the rate is resumes per second against target_rps (a second whose fleet ran out is
    # void, never judged).
    "cold-resume": (
        "TimeToWake: p99 < 2s",
        "TimeToWake: failure_ratio < 0.01",
        "achieved_rps >= 0.95 * target",
    ),
}
DEFAULT_THRESHOLDS = DEFAULT_THRESHOLDS_BY_KIND["turnover"]  # the campaign's default kind
DEFAULT_ABORT_RULES = ("Step_*: failure_ratio < 0.5 (min 20)",)


def parse_rule(text: str, where: str, *, abort: bool = False) -> Threshold:
    """One rule's text parsed; refused naming `where` (`thresholds[2]: …`)."""
    if len(text) > MAX_RULE_CHARS:
        raise ValueError(f"{where}: at most {MAX_RULE_CHARS} characters, not {len(text)}")
    try:
        return parse_threshold(text, where=where, abort=abort)
    except UsageError as exc:  # already names the entry
        raise ValueError(str(exc)) from None


def parse_rules(texts: Iterable[str], field: str, *, abort: bool = False) -> list[Threshold]:
    """Each text parsed; the first bad one refused naming it."""
    return [parse_rule(text, f"{field}[{i}]", abort=abort) for i, text in enumerate(texts)]


def _parsed(field: str, abort: bool) -> Callable[[Any], Any]:
    """A list of rules as given, each text parsed at its index (a rule parsed already, as
    a model built in Python may hold, passes on)."""

    def before(value: Any) -> Any:
        if not isinstance(value, list | tuple):
            return value  # the list type refuses it
        return [
            parse_rule(v, f"{field}[{i}]", abort=abort) if isinstance(v, str) else v
            for i, v in enumerate(value)
        ]

    return before


def _rule(value: Any) -> Threshold:
    if isinstance(value, Threshold):
        return value
    raise ValueError(f"{value!r}: a threshold rule (text, e.g. 'TimeToWake: p99 < 2s')")


# One rule in a parameter model: parsed once, when the model is validated (the list's
# validator, which names the entry), written back as its text (model_dump, --print-params,
# campaign.json), and a string in the form's schema.
Rule = Annotated[
    Threshold,
    PlainValidator(_rule),
    PlainSerializer(lambda rule: rule.text, return_type=str),
    WithJsonSchema({"type": "string", "maxLength": MAX_RULE_CHARS}),
]
Thresholds = Annotated[list[Rule], BeforeValidator(_parsed("thresholds", False))]
AbortRules = Annotated[list[Rule], BeforeValidator(_parsed("abort.rules", True))]
