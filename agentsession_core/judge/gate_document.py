"""gate.json's shape (docs/SPEC.md §6): the typed document a release pipeline consumes.

judge/gate.py, judge/compare.py, judge/paired.py, judge/drift.py, campaign/capacity.py and
campaign/density.py build the document's sections; these models say what each section
holds. A stored gate.json is read by validating it against `GateDocument`
(`GateDocument.read`): a file that is not a gate document (a field of the wrong type, a
verdict or outcome not known, a figure without its value, a number that is not finite) is
refused in one line naming the file and the field's path, GateInputError, the gate's exit 2.
What the model declares is what the verdict, the comparison, the report and history read,
so a document that passes cannot make any of them fail halfway. The JSON Schema generated
from it is published as docs/reference/gate.schema.json (docs/gen/references.py writes it;
a test keeps it current).

**Schema version.** The document carries ``"schema": 2`` (GATE_SCHEMA). A field added to a
section stays within schema 2 as long as a document without it still reads (every new
field is optional: `capacity.density`, `paired`, a window's `saturated_seconds` all came
that way); a field that changes type or meaning takes a new number. Schema 1 documents
(only `headline`, no `figures`) still validate: history reads their values.

**Extra fields are allowed**, on every model, deliberately. Every known field is typed and
checked (types strict: "3" is not a number, true is not a count; no NaN or infinity), but a
field this version does not know is kept, not refused: a pipeline pinned to an older copy of
the published schema must still read a document a newer agentsession wrote, readers hand the
document on as a dict so nothing is lost, and a new field is additive by the rule above.
What keeps the models complete instead is a test: a gate.json the current code writes has no
field these models do not declare (tests/unit/test_gate_document.py).

**One judged figure.** The baseline comparison (`baseline.metrics[]`, judge/compare.py) and
the paired comparison (`paired.metrics[]`, judge/paired.py) record the same thing: a figure
of this run judged against the same figure of another side, on a log scale, by a decision
rule. Both are a `JudgedFigure`. They differ only in what the other side is and what each
comparison knows more of; those fields are optional and say which comparison writes them:
a baseline figure has `current`/`baseline` (its samples keyed the same), the run-to-run
`spread_log` and, for `capacity.rate`, the bracket's `half_width_log`; a paired figure has
`candidate`/`reference` (samples keyed the same), the `ratio` with its `ratio_interval`, and
the paired `blocks` it was judged over.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

from agentsession_core.errors import clip
from agentsession_core.judge.decision import Rule
from agentsession_core.output.run_reader import RunReadError

GATE_SCHEMA = 2

Verdict = Literal["pass", "fail", "void"]
Outcome = Literal["pass", "break", "void", "aborted"]
ComparisonStatus = Literal["regressed", "improved", "unchanged", "inconclusive"]
ProbeOutcome = Literal["held", "broke", "void", "aborted"]
ProbeStage = Literal["search", "confirm", "step-down"]
# What bound a capacity (campaign/capacity.py `_bound`): the SLO; another judged threshold;
# a failure rule (failure_ratio, failures); an abort rule; the load generator's saturation;
# a window too thin for the SLO's min; the search's own max_level; the run's stop.
BoundKind = Literal[
    "slo", "threshold", "failures", "abort", "generator", "samples", "max_level", "stopped"
]
CapacityStatus = Literal["found", "above", "below", "void", "aborted", "not run"]
VERDICTS: tuple[str, ...] = get_args(Verdict)
OUTCOMES: tuple[str, ...] = get_args(Outcome)


class GateInputError(RunReadError):
    """A run that cannot be gated (missing, unreadable or unverifiable files, a gate.json
    that is not a gate document): exit 2."""


def _fraction(value: float) -> float:
    if not 0 < value < 1:
        raise PydanticCustomError("fraction", "a fraction in (0, 1)")
    return value


Fraction = Annotated[
    float,
    AfterValidator(_fraction),
    Field(json_schema_extra={"exclusiveMinimum": 0, "exclusiveMaximum": 1}),
]
Interval = Annotated[list[float], Field(min_length=2, max_length=2)]
Probability = Annotated[float, Field(ge=0, le=1)]


class Section(BaseModel):
    """Every part of the document: known fields strictly typed, unknown ones kept."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="allow")


# --------------------------------------------------------------------------- the run
class RunInfo(Section):
    """`run`: which run this is (campaign/campaign_files.py)."""

    name: str | None = None
    tag: str | None = None
    location: str | None = Field(None, description="where the run's files went (local or s3)")
    local_dir: str | None = None
    windows_planned: int | None = None
    stopped: str | None = Field(None, description="stopped by hand through the control API")


class Window(Section):
    """One judged hold window (judge/gate.py `_window_summary`)."""

    index: int
    outcome: Outcome
    level: float | None = None
    start_unix: float | None = None
    end_unix: float | None = None
    missed: list[str] | None = Field(None, description="the thresholds the window missed")
    void_reason: str | None = None
    abort_reason: str | None = None
    saturated_seconds: int | None = None
    left_out_seconds: int | None = None


class Ramp(Section):
    """`ramp` (judge/drift.py `ramp_result`): the levels in the order they ran."""

    last_held_level: float | None = None
    first_broken_level: float | None = None


class Figure(Section):
    """One headline figure with its uncertainty (judge/uncertainty.py, docs/SPEC.md §6.2)."""

    value: float
    low: float | None = Field(None, description="the interval's low end; null: none")
    high: float | None = None
    se_log: float | None = Field(None, description="bootstrap sd of log(figure + floor)")
    n: int | None = Field(None, description="samples")
    beyond: int | None = Field(None, description="a percentile's samples beyond it")
    blocks: int | None = Field(None, description="bootstrap blocks of seconds")
    estimable: bool | None = None
    unit: str | None = Field(None, description="ms, ratio or 1/s")


# --------------------------------------------------------------------------- comparisons
class JudgedFigure(Section):
    """A figure judged against another side's (docs/SPEC.md §6.3, §6.8): one record for the
    baseline comparison and the paired comparison (this module's docstring). `change` is
    the fraction worse, `interval` its interval, `log_change` d (> 0 worse)."""

    metric: str
    better: Literal["lower", "higher"] | None = None
    unit: str | None = Field(None, description="paired figures and capacity.rate")
    change: float | None = None
    interval: Interval | None = None
    log_change: float | None = None
    se_log: float | None = None
    samples: dict[str, float | None] | None = Field(
        None, description="per side: current/baseline, or candidate/reference"
    )
    status: ComparisonStatus | None = None
    why: str | None = Field(
        None, description="why inconclusive, or why a regression is no discovery of its family"
    )
    regression: bool | None = None
    p_worse: Probability | None = Field(
        None, description="the one-sided p-value of the rule's test that it got worse"
    )
    p_adjusted: Probability | None = Field(
        None, description="p_worse adjusted over the family (false_discovery)"
    )
    # the baseline comparison's (judge/compare.py)
    current: float | None = Field(None, description="baseline comparison: this run's value")
    baseline: float | None = Field(None, description="baseline comparison: the baseline's")
    spread_log: float | None = Field(None, description="baseline comparison: run-to-run sd")
    half_width_log: float | None = Field(
        None, description="baseline comparison, capacity.rate: its brackets' half width"
    )
    # the paired comparison's (judge/paired.py)
    candidate: float | None = Field(None, description="paired: the candidate arm's value")
    reference: float | None = Field(None, description="paired: the reference arm's value")
    ratio: float | None = Field(None, description="paired: (candidate+floor)/(reference+floor)")
    ratio_interval: Interval | None = Field(None, description="paired: the ratio's interval")
    blocks: int | None = Field(None, description="paired: the blocks judged")


class FalseDiscovery(Section):
    """`false_discovery`: how the figures one comparison judges were controlled together
    (judge/false_discovery.py)."""

    method: Literal["bh", "by", "none"]
    family: int = Field(description="the figures judged together (with an interval)")
    level: Probability = Field(description="the one-sided level each rule decides at")


class Baseline(Section):
    """`baseline`: the comparison with a baseline run or history (judge/gate.py
    `with_baseline`, `without_baseline`)."""

    status: Literal["compared", "not comparable", "none"]
    why: str | None = Field(None, description="status none: why there is no baseline")
    locations: list[str | None] | None = None
    location: str | None = None
    differences: list[str] | None = Field(None, description="not comparable: what differs")
    runs: int | None = None
    spread_from: str | None = None
    max_regression: float | None = None
    confidence: Fraction | None = None
    rule: Rule | None = Field(None, description="absent: stored before rules were named")
    false_discovery: FalseDiscovery | None = Field(
        None, description="absent: stored before the family was controlled"
    )
    night_spread: float | None = None
    counts: dict[str, int] | None = None
    metrics: list[JudgedFigure] = []
    regressions: list[str] | None = None


class Paired(Section):
    """`paired`: a paired campaign's candidate against its reference arm (judge/paired.py)."""

    status: Literal["compared", "void"]
    why: str | None = None
    arms: dict[str, str] | None = None
    block_seconds: int | None = None
    blocks: int | None = None
    blocks_planned: int | None = None
    blocks_dropped: int | None = None
    seconds: int | None = None
    saturated_seconds: int | None = None
    min_blocks: int | None = None
    min_beyond: int | None = None
    max_regression: float | None = None
    confidence: Fraction | None = None
    rule: Rule | None = None
    false_discovery: FalseDiscovery | None = None
    method: str | None = None
    counts: dict[str, int] | None = None
    metrics: list[JudgedFigure] = []
    regressions: list[str] | None = None


# --------------------------------------------------------------------------- capacity
class Probe(Section):
    """One probe of the capacity search (campaign/capacity.py `ProbeRecord`)."""

    level: float
    index: int | None = None
    rate: float | None = None
    outcome: ProbeOutcome | None = None
    figure: float | None = Field(None, description="the SLO's observed value")
    start_unix: float | None = None
    end_unix: float | None = None
    missed: list[str] | None = None
    why: str | None = None
    stage: ProbeStage | None = Field(
        None,
        description="search (growth, bisection), confirm (the found level held once more) or "
        "step-down (below a confirmation that broke); absent before confirmations: search",
    )


class StepDown(Section):
    """`confirmation.step_down`: where the search went when its confirmation broke."""

    level: float
    rate: float | None = None
    index: int | None = Field(
        None,
        description="the probe's window index (already held: the one that held it; null: "
        "the anchor's hold)",
    )
    outcome: ProbeOutcome | None = None
    why: str | None = None
    already_held: bool | None = Field(
        None, description="the step landed on a level the search held before: not held again"
    )


class Confirmation(Section):
    """`capacity.confirmation`: the found level held once more (one search window)."""

    level: float
    rate: float | None = None
    index: int | None = Field(None, description="the confirmation probe's window index")
    outcome: ProbeOutcome | None = None
    why: str | None = None
    step_down: StepDown | None = None


class NodeResources(Section):
    """`density.node`: the nodes the workers run on (None: unknown)."""

    nodes: int | None = None
    vcpus_per_node: float | None = None
    memory_bytes_per_node: int | None = None
    source: dict[str, str] | None = None


class PodCounts(Section):
    """Actors per worker ("pod") over a listing's workers, by nearest rank."""

    actors_per_pod_p50: int | None = None
    actors_per_pod_p90: int | None = None
    actors_per_pod_p99: int | None = None


class Frontier(PodCounts):
    """`density.frontier`: the worker listing at the capacity (or the highest level held)."""

    level: float | None = None
    rate: float | None = None
    unit: str | None = None
    unix: float | None = None
    workers: int | None = None
    capacity: int | None = None
    actors: int | None = None
    actors_per_node: float | None = None
    actors_per_vcpu: float | None = None
    actors_per_gb_ram: float | None = None


class Prediction(Section):
    """`density.prediction`: what the template's memory predicts, beside what was found."""

    actors: int | None = None
    bound: Literal["memory", "capacity", "memory and capacity"] | None = None
    why: str | None = None
    found_from: str | None = None
    found: float | None = None
    ratio: float | None = None
    within_resolution: bool | None = None


class Peak(Section):
    """`density.peak`: the fullest listing sampled."""

    level: float | None = None
    actors: int | None = None
    probe: int | None = None


class DensitySample(PodCounts):
    """One worker listing taken (`probe` null: at the first level)."""

    probe: int | None = None
    level: float | None = None
    unix: float | None = None
    workers: int | None = None
    capacity: int | None = None
    actors: int | None = None
    error: str | None = None


class Density(Section):
    """`capacity.density`: the density frontier (campaign/density.py, docs/SPEC.md §6.7);
    absent in a gate.json written before it."""

    status: str | None = Field(None, description="measured, no worker listing, not sampled")
    why: str | None = None
    node: NodeResources | None = None
    template_memory_bytes: int | None = None
    frontier: Frontier | None = None
    prediction: Prediction | None = None
    peak: Peak | None = None
    samples: list[DensitySample] = []
    line: str | None = None


class Capacity(Section):
    """`capacity`: the capacity search's result (campaign/capacity.py, docs/SPEC.md §6.7)."""

    status: CapacityStatus | None = None
    dimension: str | None = Field(None, description="rate or awake")
    threshold: str | None = Field(None, description="the SLO")
    figure_unit: str | None = None
    slo_value: float | None = None
    unit: str | None = Field(None, description="swaps/s, turns/s, sessions, residents …")
    base_rate: float | None = Field(None, description="the load at 1x")
    resolution: float | None = None
    max_level: float | None = None
    level: float | None = Field(None, description="the capacity, as a level")
    rate: float | None = Field(None, description="the capacity, in unit")
    broke_at_level: float | None = None
    broke_at_rate: float | None = None
    held_level: float | None = None
    anchor_level: float | None = None
    reason: str | None = None
    confirmed: bool | None = Field(
        None,
        description="found: true, held again; false, the confirmation broke and the search "
        "stepped down; null, not confirmed (void or cut short, or no search found)",
    )
    confirmation: Confirmation | None = None
    bound_by: str | None = Field(
        None,
        description="what bound the capacity: the missed rule's text (the SLO first), the "
        "abort rule, the generator's saturation, max_level, or the run's stop",
    )
    bound_kind: BoundKind | None = None
    probes: list[Probe] = []
    density: Density | None = None


# --------------------------------------------------------------------------- the document
class GateDocument(Section):
    """gate.json (docs/SPEC.md §6.1): the verdict and everything it was decided from."""

    model_config = ConfigDict(
        title="gate.json",
        json_schema_extra={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "description": (
                "agentsession's gate document (docs/SPEC.md §6), schema "
                f"{GATE_SCHEMA}. Generated from "
                "agentsession_core/judge/gate_document.py; fields not listed are allowed."
            ),
        },
    )

    schema_version: Literal[1, 2] | None = Field(
        None, alias="schema", description="the document's schema version"
    )
    verdict: Verdict = Field(description="exit 0, 1, 2 of `agentsession gate`")
    reason: str | None = Field(None, description="the verdict's reason, one line")
    run: RunInfo | None = None
    run_status: str | None = Field(None, description="completed, refused, cancelled, …")
    abort_reason: str | None = Field(None, description="why the run stopped early")
    windows: list[Window] = Field(description="each judged hold window, in order")
    ramp: Ramp | None = None
    drift: dict[str, float] | None = Field(
        None, description="slope (ms per window) of each headline percentile"
    )
    headline: dict[str, dict[str, float | None]] | None = Field(
        None, description="each headline row's figures over the first level's judged hold"
    )
    confidence: Fraction | None = Field(None, description="the figures' intervals' level")
    figures: dict[str, Figure] | None = Field(
        None, description="each headline figure (`TimeToWake.p99` …) with its interval"
    )
    conditions: dict[str, Any] | None = Field(
        None, description="the parameters a baseline must share"
    )
    baseline: Baseline | None = Field(None, description="null: no baseline was asked for")
    capacity: Capacity | None = Field(None, description="a capacity search's result")
    paired: Paired | None = Field(None, description="a paired campaign's comparison")
    location: str | None = Field(None, description="where a reader found the run")

    @classmethod
    def read(cls, doc: dict[str, Any], place: str) -> GateDocument:
        """A stored gate.json as its model, or a GateInputError naming the first field that
        is wrong, in one line: `PLACE: windows[0].outcome is 'maybe', not pass, break, void
        or aborted (not a gate document)`."""
        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            raise GateInputError(_refusal(place, exc.errors()[0])) from None


# What a field should have been, by pydantic's error type (a custom error says it itself).
_WANTED = {
    "int_type": "a whole number",
    "float_type": "a number",
    "finite_number": "a finite number",
    "string_type": "text",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "too_short": "a [low, high] pair",
    "too_long": "a [low, high] pair",
}


def _refusal(place: str, error: ErrorDetails) -> str:
    field = _path(error["loc"])
    if error["type"] == "missing":
        return f"{place}: {field} is missing (not a gate document)"
    return f"{place}: {field} is {clip(error['input'])}, not {_wanted(error)} (not a gate document)"


def _path(loc: tuple[int | str, ...]) -> str:
    """('windows', 0, 'outcome') → windows[0].outcome; a map's key as it is
    (figures.TimeToWake.p50.value)."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f"{'.' if text else ''}{part}"
    return text or "the document"


def _wanted(error: ErrorDetails) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "literal_error":
        return str(ctx.get("expected", "")).replace("'", "")
    if kind in _WANTED:
        return _WANTED[kind]
    # A custom error's own words ("a fraction in (0, 1)"), or pydantic's.
    return error["msg"].removeprefix("Input should be ")


def gate_json_schema() -> dict[str, Any]:
    """The published JSON Schema of gate.json (docs/reference/gate.schema.json)."""
    return GateDocument.model_json_schema(by_alias=True)


__all__ = [
    "GATE_SCHEMA",
    "OUTCOMES",
    "VERDICTS",
    "Baseline",
    "BoundKind",
    "Capacity",
    "Confirmation",
    "Density",
    "DensitySample",
    "Figure",
    "Frontier",
    "GateDocument",
    "GateInputError",
    "JudgedFigure",
    "NodeResources",
    "Paired",
    "Peak",
    "PodCounts",
    "Prediction",
    "Probe",
    "Ramp",
    "RunInfo",
    "StepDown",
    "Window",
    "gate_json_schema",
]
