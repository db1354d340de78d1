"""CampaignParams: one model for every way a campaign is started.

The Prefect UI form (the flow's parameter schema), `deployments/prefect.yaml`, the presets in
`deployments/presets/` and `agentsession campaign --set key=value` all produce this model.
A CampaignParams IS the engine's RunParams (same fields, same sections, same rules) plus the
campaign's own fields, so `Run(campaign_params)` runs it. It validates everything a campaign
can get wrong before any actor exists — hold and window arithmetic, the script, every
threshold and abort rule.

A campaign holds the load for `hold_minutes` at the first level of `levels`, then for
`ramp_minutes` (default: `hold_minutes`) at each further level, cut into windows of
`window_seconds`; each window is judged on its own. Load never pauses between windows.

Defaults documented where they differ: a campaign's population is a turnover of 1000
sessions, 100 awake, 5 swaps/s (`agentsession run`: closed, 10 sessions).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from agentsession_core.campaign.search import SearchPlan, most_probes
from agentsession_core.engine.live_control import MAX_LEVEL  # a live change's bound too
from agentsession_core.engine.param_types import SIZE
from agentsession_core.engine.params import (
    MAX_RATE,
    MAX_SESSIONS,
    MAX_TEXT,
    MAX_WAIT_S,
    Flag,
    Number,
    PopulationKind,
    PopulationParams,
    RunParams,
    Seconds,
    Section,
    TargetParams,
    form_position,
    reference_value,
)
from agentsession_core.errors import UsageError, clip
from agentsession_core.judge.compare import (
    DEFAULT_HISTORY,
    DEFAULT_NIGHT_SPREAD,
    MAX_HISTORY,
)
from agentsession_core.judge.decision import DEFAULT_PAIRED_RULE, DEFAULT_RULE, DecisionRule
from agentsession_core.judge.paired import (
    DEFAULT_BLOCK_SECONDS,
    DEFAULT_MIN_BLOCKS,
    PAIRED_MIN_BEYOND,
)
from agentsession_core.judge.uncertainty import DEFAULT_CONFIDENCE
from agentsession_core.script.mix import ScriptSpec

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
}
DEFAULT_THRESHOLDS = DEFAULT_THRESHOLDS_BY_KIND["turnover"]  # the campaign's default kind
DEFAULT_ABORT_RULES = ("Step_*: failure_ratio < 0.5 (min 20)",)
# Float arithmetic must not turn 0.3 min / 6 s into 2.9999 windows.
_WHOLE = 1e-9
# Upper bounds (issue #11, docs/SPEC.md §6; RunParams has the engine's): `hold_minutes=1e7` once
# hung building the window list, so the count is checked from the arithmetic before any list exists.
MAX_HOLD_MINUTES = 7 * 24 * 60.0  # a week at one level
MAX_WINDOW_SECONDS = 7 * 86_400.0
MAX_WINDOWS = 10_000  # per campaign, all levels
# The capacity search's own bound (docs/SPEC.md §6.7): its worst case (campaign/search.py's
# most_probes × each probe's settle + window) must fit in a week, as a hold at one level
# must, and in MAX_PROBES probes (one Prefect task each). `factor 1.0001` with
# `resolution 1e-9` was once taken: tens of thousands of probes, weeks of them.
MAX_SEARCH_SECONDS = MAX_HOLD_MINUTES * 60.0
MAX_PROBES = 1_000
MAX_LEVELS = 100
# Bounds on the density frontier's node figures: past them a value is a typo, not a fleet.
MAX_NODES = 100_000
MAX_NODE_VCPUS = 100_000.0
MAX_NODE_MEMORY = 1 << 60  # an exbibyte
MAX_RULES = 100  # thresholds, abort rules
MAX_RULE_CHARS = 500
MAX_ABORT_DELAY_S = 7 * 86_400.0
MAX_RETRY_DELAY_S = 300.0  # the first; it doubles per attempt
Rule = Annotated[str, Field(max_length=MAX_RULE_CHARS)]
# Prefect's own rule for a block document's name: refused here, in one line, rather than
# found when the flow looks the block up.
_BLOCK_NAME = re.compile(r"^[a-z0-9-]+$")
MAX_BLOCK_NAME = 255


class CampaignTargetParams(TargetParams):
    """TargetParams with the campaign's own credential source, a Prefect Secret block.

    A flow run's parameters are stored in Prefect's database and shown in its UI, so the
    campaign flow refuses `token` as a parameter; it takes the token when it starts from the
    block named here, from `token_file`, or from AGENTSESSION_TOKEN in its environment
    (flows/credentials.py, docs/SPEC.md §6 "Credentials"). Only the flow reads the block:
    agentsession_core never imports Prefect."""

    # Redeclared for its description, which the flow's form shows.
    token: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="bearer token; the campaign flow refuses it as a parameter (Prefect stores "
        "parameters): use token_secret, or AGENTSESSION_TOKEN where the flow runs",
    )
    token_secret: str | None = Field(
        None,
        max_length=MAX_BLOCK_NAME,
        description="campaign flow: name of the Prefect Secret block holding the bearer token, "
        "read when the flow starts (a token given as a flow parameter is refused: Prefect "
        "stores parameters; or set AGENTSESSION_TOKEN where the flow runs)",
    )

    @field_validator("token_secret")
    @classmethod
    def _token_secret(cls, value: str | None, info: ValidationInfo) -> str | None:
        if not value:
            return None
        if info.data.get("token") or info.data.get("token_file"):
            raise ValueError("give one of token, token_file and token_secret")
        if not _BLOCK_NAME.match(value):
            raise ValueError(
                f"{clip(value)} is not a Prefect block name (lowercase letters, digits, dashes)"
            )
        return value


class CampaignPopulationParams(PopulationParams):
    """PopulationParams with the campaign's defaults (a turnover, not a closed loop)."""

    kind: Annotated[PopulationKind, Flag("--population")] = Field(
        "turnover", description="population (campaign default: turnover; run: closed)"
    )
    sessions: int = Field(
        1000,
        ge=1,
        le=MAX_SESSIONS,
        description="sessions registered (campaign default: 1000; run: 10)",
    )
    awake: int = Field(
        100,
        ge=0,
        le=MAX_SESSIONS,
        validate_default=True,
        description="turnover: sessions kept resident, at most sessions (campaign default: 100; "
        "run: 0)",
    )
    target_rps: Number = Field(
        5.0,
        ge=0,
        le=MAX_RATE,
        description="turnover: swaps per second at 1x (campaign default: 5; run: 1)",
    )


class AbortParams(Section):
    """Rules checked every second on a sliding window; a trip ends the campaign at once."""

    rules: list[Rule] = Field(
        default_factory=lambda: list(DEFAULT_ABORT_RULES),
        max_length=MAX_RULES,
        description="threshold expressions that abort when missed",
    )
    sliding_seconds: Seconds = Field(
        30.0, gt=0, le=MAX_WAIT_S, description="window the rules are judged on"
    )
    delay_seconds: Seconds = Field(
        60.0, ge=0, le=MAX_ABORT_DELAY_S, description="warm-up before rules are checked"
    )


class GateParams(Section):
    """How the gate compares this run with a baseline (docs/SPEC.md §6.3)."""

    confidence: Number = Field(
        DEFAULT_CONFIDENCE,
        gt=0.5,
        lt=1,
        description="of every figure's interval and of a regression (0.99 = 99 %)",
    )
    history: int = Field(
        DEFAULT_HISTORY, ge=1, le=MAX_HISTORY, description="earlier runs `baseline: auto` reads"
    )
    night_spread: Number = Field(
        DEFAULT_NIGHT_SPREAD,
        ge=0,
        le=5,
        description="run-to-run spread (sd of log figure) assumed for a single-run baseline",
    )
    rule: DecisionRule = Field(
        DEFAULT_RULE,
        description="against a baseline: when a change is a regression: whole-interval (the "
        "whole interval beyond max_regression), significant (the interval excludes no change "
        "and the estimate exceeds max_regression) or margin-test (a one-sided test at "
        "max_regression)",
    )
    paired_rule: DecisionRule = Field(
        DEFAULT_PAIRED_RULE,
        description="a paired campaign: when the candidate regressed against its reference "
        "arm (the same rules as rule)",
    )
    block_seconds: int = Field(
        DEFAULT_BLOCK_SECONDS,
        ge=1,
        le=3600,
        description="a paired campaign: seconds per paired block of the hold (a block the "
        "generator saturated in is dropped from both arms)",
    )
    min_blocks: int = Field(
        DEFAULT_MIN_BLOCKS,
        ge=2,
        le=1_000_000,
        description="a paired campaign: fewest paired blocks left to judge; fewer: void",
    )
    min_beyond: int = Field(
        PAIRED_MIN_BEYOND,
        ge=1,
        le=1_000_000,
        description="a paired campaign: samples past a percentile each arm needs for it to "
        "be compared (fewer: inconclusive)",
    )


class UploadParams(Section):
    """How artifacts reach `dest` when it is s3:// (the AWS chain supplies credentials)."""

    endpoint_url: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)",
    )
    region: str | None = Field(None, description="default: the AWS chain's region")
    attempts: int = Field(3, ge=1, le=10, description="upload attempts before giving up")
    retry_delay_seconds: Seconds = Field(
        2.0, ge=0, le=MAX_RETRY_DELAY_S, description="first retry delay (doubles)"
    )


SearchDimension = Literal["rate", "awake"]


class SearchParams(Section):
    """The capacity search (docs/SPEC.md §6.7): after the first level's judged hold, probe
    ever higher levels until the SLO breaks, then bisect to the knee (campaign/search.py).
    No threshold: no search."""

    threshold: Rule | None = Field(
        None,
        description="the SLO, e.g. 'TimeToWake: p99 < 2s' (none: no search); a probe also "
        "breaks on any judged threshold",
    )
    start: Number | None = Field(
        None,
        gt=0,
        le=MAX_LEVEL,
        description="first probe's level (default: factor × the first level)",
    )
    factor: Number = Field(2.0, le=MAX_LEVEL, description="growth while the SLO holds (> 1)")
    resolution: Number = Field(
        0.1, le=10, description="relative width the knee is bracketed to (> 0; 0.1 = 10 %)"
    )
    max_level: Number = Field(16.0, gt=0, le=MAX_LEVEL, description="highest level probed")
    settle_seconds: Seconds = Field(
        30.0, ge=0, le=MAX_WINDOW_SECONDS, description="after each level change, not judged"
    )
    window_seconds: Seconds | None = Field(
        None,
        ge=1,
        le=MAX_WINDOW_SECONDS,
        description="each probe's judged window (default: the campaign's window_seconds)",
    )
    dimension: SearchDimension = Field(
        "rate",
        description="rate: the population's rate (as levels); awake: turnover's resident set",
    )
    # The nodes the substrate's workers run on, for the density frontier's per-node, per-vCPU
    # and per-GiB figures (campaign/density.py): the worker listing does not say them.
    nodes: int | None = Field(
        None,
        ge=1,
        le=MAX_NODES,
        description="nodes the substrate's workers run on, for the density frontier "
        "(default: 1 for the embedded local substrate, unknown for a remote target)",
    )
    node_vcpus: Number | None = Field(
        None,
        gt=0,
        le=MAX_NODE_VCPUS,
        description="vCPUs of each node (default: this machine's os.cpu_count() for the "
        "embedded local substrate, unknown for a remote target)",
    )
    node_memory: Annotated[int | None, SIZE] = Field(
        None,
        gt=0,
        le=MAX_NODE_MEMORY,
        description="memory of each node, a size such as 64Gi (default: this machine's "
        "physical memory for the embedded local substrate, unknown for a remote target)",
    )

    @field_validator("factor")
    @classmethod
    def _factor(cls, value: float) -> float:
        if not value > 1:
            raise ValueError(f"{value:g}: the growth factor must be > 1")
        return value

    @field_validator("resolution")
    @classmethod
    def _resolution(cls, value: float) -> float:
        if not value > 0:
            raise ValueError(f"{value:g}: must be > 0 (a relative width, 0.1 = 10 %)")
        return value

    @field_validator("threshold", mode="before")
    @classmethod
    def _one_line(cls, value: Any) -> Any:
        """`--set search.threshold=TimeToWake: p99 < 2s` reads as YAML, i.e. a one-entry
        mapping: it is the rule it was typed as."""
        if isinstance(value, dict) and len(value) == 1:
            ((rows, rule),) = value.items()
            if isinstance(rows, str) and isinstance(rule, str):
                return f"{rows}: {rule}"
        return value

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        _parse_all([value], "search.threshold")
        return value

    @model_validator(mode="after")
    def _start_below_max(self) -> SearchParams:
        if self.start is not None and self.start > self.max_level:
            raise ValueError(f"start {self.start:g} is above max_level {self.max_level:g}")
        return self

    @property
    def enabled(self) -> bool:
        return self.threshold is not None


@dataclass(frozen=True)
class WindowPlan:
    index: int
    level: float
    seconds: float


class CampaignParams(RunParams):
    """A benchmark campaign: a run (target, population, cleanup), its hold and ramp, judging,
    and where the artifacts go afterwards."""

    dest: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="where the run goes afterwards: s3://bucket/prefix; none: it stays in out "
        "(a local path or file:// URL here is where it is written, i.e. sets out)",
        json_schema_extra=form_position(2),
    )
    hold_minutes: Number = Field(
        60.0,
        gt=0,
        le=MAX_HOLD_MINUTES,
        description="hold at the first level",
        json_schema_extra=form_position(7),
    )
    window_seconds: Seconds = Field(
        600.0,
        ge=1,  # the recorder keeps one interval per second: a window is whole seconds
        le=MAX_WINDOW_SECONDS,
        description="each window is judged alone",
        json_schema_extra=form_position(8),
    )
    levels: list[Number] = Field(
        default_factory=lambda: [1.0],
        min_length=1,
        max_length=MAX_LEVELS,
        description="ramp of load multipliers",
        json_schema_extra=form_position(9),
    )
    ramp_minutes: Number | None = Field(
        None,
        gt=0,
        le=MAX_HOLD_MINUTES,
        description="hold at each level after the first (default: hold_minutes)",
        json_schema_extra=form_position(10),
    )
    thresholds: list[Rule] = Field(
        default_factory=lambda: list(DEFAULT_THRESHOLDS),
        max_length=MAX_RULES,
        description="judged per window, e.g. 'TimeToWake: p99 < 2s' (default: per population "
        "kind, listed in the parameter reference)",
        json_schema_extra=form_position(11),
    )
    baseline: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="earlier run (directory or s3:// prefix) to compare against, or 'auto': "
        "the last comparable runs of this name under dest/out",
        json_schema_extra=form_position(12),
    )
    max_regression: Number = Field(
        0.2,
        ge=0,
        le=100,
        description="allowed headline change vs baseline",
        json_schema_extra=form_position(13),
    )
    target: CampaignTargetParams = Field(
        default_factory=CampaignTargetParams, json_schema_extra=form_position(15)
    )
    reference: Annotated[CampaignTargetParams | None, BeforeValidator(reference_value)] = Field(
        None,
        description="a paired campaign's reference arm (the release in production), run side "
        "by side with target (the candidate) and judged against it: the same fields as "
        "target, or 'embedded' for a local substrate of its own",
        json_schema_extra=form_position(15),
    )
    population: CampaignPopulationParams = Field(
        default_factory=CampaignPopulationParams,
        description="campaign defaults: turnover, 1000 sessions, 100 awake, 5 swaps/s",
        json_schema_extra=form_position(16),
    )
    abort: AbortParams = Field(default_factory=AbortParams, json_schema_extra=form_position(18))
    upload: UploadParams = Field(default_factory=UploadParams, json_schema_extra=form_position(19))
    gate: GateParams = Field(default_factory=GateParams, json_schema_extra=form_position(22))
    search: SearchParams = Field(default_factory=SearchParams, json_schema_extra=form_position(23))

    @field_validator("search")
    @classmethod
    def _search_bound(cls, search: SearchParams, info: ValidationInfo) -> SearchParams:
        """A search that may not finish within its own bound is refused here, before
        anything starts, in one line: how many probes, how long, which fields to change.
        (A field validator, so the line names `search`; levels and window_seconds, the
        start's and the window's defaults, come before it.)"""
        levels, window = info.data.get("levels"), info.data.get("window_seconds")
        if not search.enabled or not levels or window is None:
            return search
        probes, seconds = search_bound(search, levels[0], window)
        if probes <= MAX_PROBES and seconds <= MAX_SEARCH_SECONDS:
            return search
        settle = search.settle_seconds
        each = f"{settle:g} s settle + {search.window_seconds or window:g} s window"
        raise ValueError(
            f"search.factor {search.factor:g}, search.resolution {search.resolution:g} and "
            f"max_level {search.max_level:g}x make up to {_count(probes)} probes of {each}: "
            f"{_span(seconds)}; a search may take at most {MAX_PROBES:,} probes and "
            f"{_span(MAX_SEARCH_SECONDS)}: raise search.factor or search.resolution, lower "
            "search.max_level, or shorten search.window_seconds or search.settle_seconds"
        )

    @model_validator(mode="before")
    @classmethod
    def _local_dest(cls, values: Any) -> Any:
        """A local dest (path or file:// URL) is where the run is written: it sets out."""
        if not isinstance(values, dict):
            return values
        dest = values.get("dest")
        if not isinstance(dest, str) or not _is_local(dest):
            return values
        out = values.get("out")
        if out is None:
            return {**values, "out": dest}
        if out != dest:
            raise ValueError(
                f"dest {dest!r} is local, so the run is written there; it cannot differ from "
                f"out {out!r} (set one of them)"
            )
        return values

    @model_validator(mode="before")
    @classmethod
    def _kind_thresholds(cls, values: Any) -> Any:
        """No thresholds given: the population kind's defaults (DEFAULT_THRESHOLDS_BY_KIND)."""
        if not isinstance(values, dict) or "thresholds" in values:
            return values
        population = values.get("population")
        if isinstance(population, dict):
            kind = population.get("kind")
        else:
            kind = getattr(population, "kind", None)
        defaults = DEFAULT_THRESHOLDS_BY_KIND.get(str(kind), DEFAULT_THRESHOLDS)
        return {**values, "thresholds": list(defaults)}

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: list[float]) -> list[float]:
        for i, level in enumerate(value):
            if not (level > 0 and math.isfinite(level)):
                raise ValueError(f"levels[{i}] = {level}: must be a positive multiplier")
            if level > MAX_LEVEL:
                raise ValueError(f"levels[{i}] = {level:g}: at most {MAX_LEVEL:g}x")
        return value

    @field_validator("script")
    @classmethod
    def _script(cls, value: ScriptSpec) -> ScriptSpec:
        from agentsession_core.script import ScriptError
        from agentsession_core.script.mix import load_mix

        try:
            load_mix(value)
        except ScriptError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("dest")
    @classmethod
    def _dest(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value:
            raise ValueError("empty; use a local path, file:// URL or s3://bucket/prefix")
        if value.startswith("s3://"):
            if not value[len("s3://") :].split("/", 1)[0]:
                raise ValueError(f"{value!r} names no bucket (s3://bucket/prefix)")
        elif "://" in value and not value.startswith("file://"):
            raise ValueError(f"{value!r}: unsupported scheme (local path, file:// or s3://)")
        return value

    @model_validator(mode="after")
    def _whole(self) -> CampaignParams:
        per_hold, per_level = self.windows_per_hold(), self.windows_per_ramp_level()
        total = per_hold + per_level * (len(self.levels) - 1)
        if total > MAX_WINDOWS:
            raise ValueError(
                f"hold_minutes, ramp_minutes, levels and window_seconds make {total} windows; "
                f"at most {MAX_WINDOWS} per campaign (use longer windows)"
            )
        self._server_rules(self.parsed_thresholds())
        self._cohort_rules()
        self.parsed_abort_rules()
        self._search()
        return self

    def _cohort_rules(self) -> None:
        """A spawn or burst has no rate to achieve, and no search dimension: refused in one
        line rather than judged as a meaningless pass (docs/SPEC.md §4.5)."""
        population = self.population
        if not population.cohorts:
            return
        for i, rule in enumerate(self.parsed_thresholds()):
            if rule.stat == "achieved_rps":
                raise ValueError(
                    f"thresholds[{i}] {rule.text!r}: a {population.kind} population has no "
                    "rate to achieve; judge its cohorts (TimeToAllReady: count >= 1, "
                    "TimeToAllResumed: count >= 1)"
                )
        if self.search.enabled:
            raise ValueError(
                f"search.enabled: the capacity search moves a rate or a resident set; a "
                f"{population.kind} population has neither (docs/limits.md)"
            )

    def _search(self) -> None:
        """What the search's fields can only get wrong together (each names its field)."""
        search = self.search
        if not search.enabled:
            return
        if self.reference is not None:
            raise ValueError(
                "search.enabled with reference: a paired capacity search is not built; "
                "search each arm in a campaign of its own (docs/limits.md)"
            )
        self._server_rules(_parse_all([search.threshold or ""], "search.threshold"))
        population = self.population
        if search.dimension == "awake":
            if population.kind != "turnover":
                raise ValueError(
                    f"search.dimension awake searches a turnover's resident set; the "
                    f"population is {population.kind}"
                )
            if self.generator.shards != 1:
                raise ValueError("search.dimension awake: one generator only (generator.shards 1)")
            most = round(population.awake * search.max_level)
            if most >= population.sessions:
                raise ValueError(
                    f"search.max_level {search.max_level:g}x makes {most} residents of "
                    f"population.sessions {population.sessions}: a swap needs parked ones"
                )

    @property
    def search_start(self) -> float:
        """The first probe's level: search.start, or factor × the first level."""
        if self.search.start is not None:
            return self.search.start
        return min(self.search.factor * self.levels[0], self.search.max_level)

    @property
    def search_window_seconds(self) -> float:
        return self.search.window_seconds or self.window_seconds

    def search_seconds_at_most(self) -> float:
        """The longest the capacity search may take after the hold (its bound, checked at
        validation): the most probes it can make × each probe's settle and window."""
        return search_bound(self.search, self.levels[0], self.window_seconds)[1]

    def _server_rules(self, thresholds: list[Any]) -> None:
        """A `server.` rule needs a source of server figures; against the embedded local
        substrate its series must be one the substrate exports (docs/SPEC.md §5.9), so a typo
        is refused here rather than left "not judged" in every window."""
        from agentsession_core.measure.server_metrics import split_figure
        from local_substrate.metric_names import FAMILIES

        for i, rule in enumerate(thresholds):
            if rule.server is None:
                continue
            if not self.server_metrics_source:
                raise ValueError(
                    f"thresholds[{i}] {rule.text!r} judges a server figure but the run has "
                    "none: set target.metrics_url, or target.prometheus_url with "
                    "server.queries (and server.enabled)"
                )
            target = self.target
            if target.substrate or target.metrics_url or target.prometheus_url:
                continue
            series = split_figure(rule.server)
            if series is None or not any(
                series[0] == f or series[0].startswith(f"{f}_") for f in FAMILIES
            ):
                raise ValueError(
                    f"thresholds[{i}] {rule.text!r}: the local substrate exports no such "
                    f"series (families: {', '.join(FAMILIES)})"
                )

    # ------------------------------------------------------------ the hold, in windows
    def windows_per_hold(self) -> int:
        # The count comes from arithmetic, never from a list (hold_minutes=1e7 once hung).
        return _whole_windows(self.hold_minutes, "hold_minutes", self.window_seconds)

    def windows_per_ramp_level(self) -> int:
        if self.ramp_minutes is None:
            return self.windows_per_hold()
        return _whole_windows(self.ramp_minutes, "ramp_minutes", self.window_seconds)

    def windows(self) -> list[WindowPlan]:
        """Every window of the campaign in order: its index, load level and length."""
        plan: list[WindowPlan] = []
        for position, level in enumerate(self.levels):
            count = self.windows_per_hold() if position == 0 else self.windows_per_ramp_level()
            for _ in range(count):
                plan.append(WindowPlan(len(plan), level, self.window_seconds))
        return plan

    @property
    def hold_seconds(self) -> float:
        return sum(w.seconds for w in self.windows())

    # ------------------------------------------------------------ judging
    def parsed_thresholds(self) -> list[Any]:
        return _parse_all(self.thresholds, "thresholds")

    def parsed_abort_rules(self) -> list[Any]:
        """`abort.rules` plus every threshold marked `(abort)`."""
        marked = [t for t in self.parsed_thresholds() if t.abort]
        return [*_parse_all(self.abort.rules, "abort.rules", abort=True), *marked]

    # ------------------------------------------------------------ where the run goes
    @property
    def is_s3(self) -> bool:
        return self.dest is not None and self.dest.startswith("s3://")

    @property
    def destination(self) -> str:
        """Where the run ends up: dest, or out when the run stays where it was written."""
        return self.dest or self.out


def search_bound(search: SearchParams, first_level: float, window: float) -> tuple[int, float]:
    """(the most probes a search from `first_level` makes, how long they take at most)."""
    start = search.start if search.start is not None else search.factor * first_level
    plan = SearchPlan(
        min(start, search.max_level), search.factor, search.resolution, search.max_level
    )
    probes = most_probes(plan, first_level)
    return probes, probes * (search.settle_seconds + (search.window_seconds or window))


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**12 else f"about {n:.2g}"


def _span(seconds: float) -> str:
    """A duration as a person reads it: 48 min, 5.3 h, 202 days."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86_400:
        return f"{seconds / 3600:.1f} h"
    days = seconds / 86_400
    return f"{days:,.0f} days" if days < 1e9 else f"about {days:.2g} days"


def _is_local(dest: str) -> bool:
    return bool(dest) and ("://" not in dest or dest.startswith("file://"))


def _whole_windows(minutes: float, field: str, window_seconds: float) -> int:
    exact = minutes * 60.0 / window_seconds
    if not math.isfinite(exact) or exact > 1e12:  # far past MAX_WINDOWS: refused as such
        return 10**12
    count = round(exact)
    if count < 1 or abs(exact - count) > _WHOLE * max(1.0, exact):
        raise ValueError(
            f"{field} ({minutes:g} min) must be a whole number of windows of window_seconds "
            f"({window_seconds:g} s); it is {exact:.4g} windows"
        )
    return count


def _parse_all(texts: Iterable[str], field: str, *, abort: bool = False) -> list[Any]:
    from agentsession_core.judge.thresholds import parse_threshold

    parsed = []
    for i, text in enumerate(texts):
        try:
            parsed.append(parse_threshold(text, where=f"{field}[{i}]", abort=abort))
        except UsageError as exc:  # already names the entry
            raise ValueError(str(exc)) from None
    return parsed
