"""RunParams: every knob of one engine run, in sections, validated in one place.

`agentsession run` (its flags are generated from this model), the campaign's
CampaignParams (a subclass), the presets and `--set key.path=value` all resolve to it, so a
bad value is refused once, before any actor exists, with the parameter's dotted path in the
message (`parameter population.awake: ...`). Each rule lives on the section that owns the
field. Every `*_seconds` field also takes a Go-style duration ("2s", "10m", "1h30m"), and no
float field takes inf or nan.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentsession_core.engine.param_types import (
    _NAME,
    _SCHEDULER,
    DURATION,
    MAX_CONCURRENCY,
    MAX_NAME,
    MAX_RATE,
    MAX_SEED,
    MAX_SESSIONS,
    MAX_TEXT,
    MAX_THINK_SCALE,
    MAX_TURNS_PER_HOUR,
    MAX_WAIT_S,
    Flag,
    LifecycleMode,
    Number,
    OptionalSeconds,
    PopulationKind,
    ResumeMode,
    Seconds,
    Section,
    SwapPacing,
    WireForm,
    form_position,
)
from agentsession_core.engine.server_params import ServerParams
from agentsession_core.engine.target_params import TargetParams, wire_of
from agentsession_core.errors import UsageError
from agentsession_core.script.mix import check_spec

# The model and the vocabulary it is built from (param_types.py), importable from here.
__all__ = [
    "DURATION",
    "MAX_CONCURRENCY",
    "MAX_NAME",
    "MAX_RATE",
    "MAX_SEED",
    "MAX_SESSIONS",
    "MAX_TEXT",
    "MAX_THINK_SCALE",
    "MAX_TURNS_PER_HOUR",
    "MAX_WAIT_S",
    "CleanupParams",
    "Flag",
    "GeneratorParams",
    "LifecycleMode",
    "Number",
    "OptionalSeconds",
    "PopulationKind",
    "PopulationParams",
    "ResumeMode",
    "RunParams",
    "Seconds",
    "Section",
    "ServerParams",
    "SwapPacing",
    "TargetParams",
    "WireForm",
    "describe",
    "form_position",
    "parse",
    "parse_params",
    "wire_of",
]


COHORT_KINDS = ("spawn", "burst")
DEFAULT_COHORT_PERCENTILES = (50, 90, 99)
MAX_COHORT_PERCENTILES = 20


def _percent_list(value: Any) -> Any:
    """cohort_percentiles from the command line: "50,90,99" (a list passes on)."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if len(parts) > MAX_COHORT_PERCENTILES:
            raise ValueError(f"at most {MAX_COHORT_PERCENTILES} percentages, not {len(parts)}")
        try:
            return [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"{value[:60]!r}: whole percentages, comma-separated") from None
    return value


class PopulationParams(Section):
    """Who wakes when (docs/SPEC.md §4). Only the fields of the chosen kind matter."""

    kind: Annotated[PopulationKind, Flag("--population")] = Field(
        "closed", description="population"
    )
    sessions: int = Field(10, ge=1, le=MAX_SESSIONS, description="sessions registered")
    spawn_rate: Number = Field(10.0, gt=0, le=MAX_RATE, description="sessions started per second")
    awake: int = Field(
        0,
        ge=0,
        le=MAX_SESSIONS,
        validate_default=True,
        description="turnover: sessions kept resident (at most sessions)",
    )
    target_rps: Number = Field(
        1.0, ge=0, le=MAX_RATE, description="turnover: swaps per second at 1x"
    )
    registration_quiet_seconds: Annotated[
        Seconds, Flag("--registration-quiet-seconds", "--registration-quiet")
    ] = Field(
        60.0, ge=0, le=MAX_WAIT_S, description="registration ends after this long without a start"
    )
    fill_concurrency: int = Field(
        8, ge=1, le=MAX_CONCURRENCY, description="turnover: concurrent fill wakes"
    )
    turns_per_hour: Number = Field(
        6.0, gt=0, le=MAX_TURNS_PER_HOUR, description="turns: per session at 1x"
    )
    turn_mean_seconds: Annotated[Seconds, Flag("--turn-mean-seconds", "--turn-mean")] = Field(
        60.0, gt=0, le=MAX_WAIT_S, description="turns: mean turn length"
    )
    resume_mode: ResumeMode = Field("implicit", description="explicit: ResumeActor before a wake")
    lifecycle_mode: LifecycleMode = Field("suspend", description="how an actor is parked")
    registration_deadline_seconds: OptionalSeconds = Field(
        None,
        gt=0,
        description="registration gives up (the run fails) after this long "
        "(default: sessions / spawn_rate x 2 + 60 s)",
    )
    fill_deadline_seconds: OptionalSeconds = Field(
        None,
        gt=0,
        description="turnover: the fill stops retrying after this long "
        "(default: ceil(awake / fill_concurrency) x 10 s + 60 s)",
    )
    catch_up_ratio: Number = Field(
        0.5,
        gt=0,
        description="turnover: wakes owed to the resident set per tick, at most "
        "max(1, ceil(ratio x swaps per tick))",
    )
    swap_pacing: SwapPacing = Field(
        "tick",
        description="turnover: tick = a second's swaps start together on the tick; "
        "even = spread evenly over the second, each from its own intended time",
    )

    at_once: bool = Field(
        False,
        description="spawn: a cohort's CreateActors all go at its start (spawn_rate unused)",
    )
    cohort_period_seconds: Seconds = Field(
        10.0,
        gt=0,
        le=MAX_WAIT_S,
        description="spawn, burst: a cohort starts every this long (never while the last one runs)",
    )
    cohort_deadline_seconds: Seconds = Field(
        60.0,
        gt=0,
        le=MAX_WAIT_S,
        description="spawn, burst: an actor not ready (resumed, suspended) this long after "
        "its cohort's start failed",
    )
    cohort_percentiles: Annotated[list[int], BeforeValidator(_percent_list)] = Field(
        default_factory=lambda: list(DEFAULT_COHORT_PERCENTILES),
        description="spawn, burst: the k of the TimeToReady_<k>pct, TimeToFirstResume_<k>pct "
        "and TimeToSuspend_<k>pct rows (comma-separated, each 1-99)",
    )

    @field_validator("cohort_percentiles")
    @classmethod
    def _cohort_percentiles(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("name at least one percentage (e.g. 50,90,99)")
        if len(value) > MAX_COHORT_PERCENTILES:
            raise ValueError(f"at most {MAX_COHORT_PERCENTILES} percentages, not {len(value)}")
        for k in value:
            if not 1 <= k <= 99:
                raise ValueError(
                    f"{k}: each percentage is 1-99 (the whole cohort is TimeToAllReady, "
                    "TimeToAllResumed, TimeToAllSuspended)"
                )
        return sorted(set(value))

    @field_validator("awake")
    @classmethod
    def _awake(cls, value: int, info: ValidationInfo) -> int:
        sessions = info.data.get("sessions")
        if info.data.get("kind") == "turnover" and sessions is not None and value > sessions:
            raise ValueError(f"awake ({value}) exceeds sessions ({sessions})")
        return value

    @model_validator(mode="after")
    def _burst_parks(self) -> PopulationParams:
        if self.kind == "burst" and self.lifecycle_mode == "none":
            raise ValueError(
                "population.kind burst wakes parked actors and parks them again: "
                "lifecycle_mode none parks nothing (use suspend or pause)"
            )
        return self

    @property
    def level(self) -> float:
        """The population's load level (docs/SPEC.md §4.4) at 1×."""
        return {
            "closed": float(self.sessions),
            "turnover": self.target_rps,
            "turns": self.turns_per_hour,
            "spawn": float(self.sessions),
            "burst": float(self.sessions),
        }[self.kind]

    @property
    def cohorts(self) -> bool:
        """Whether the population measures cohorts (spawn, burst: docs/SPEC.md §4.5, §4.6)."""
        return self.kind in COHORT_KINDS

    def registration_deadline(self, sessions: int | None = None) -> float:
        """Seconds registration (of `sessions`, default all) may take (docs/SPEC.md §4):
        twice the spawn ramp plus a minute for the last sessions' first touch and step 1."""
        if self.registration_deadline_seconds is not None:
            return self.registration_deadline_seconds
        count = self.sessions if sessions is None else sessions
        return count / self.spawn_rate * 2.0 + 60.0

    def fill_deadline(self) -> float:
        """Seconds the turnover fill may take (docs/SPEC.md §4.2): ten seconds per round of
        fill_concurrency wakes, plus a minute."""
        if self.fill_deadline_seconds is not None:
            return self.fill_deadline_seconds
        return math.ceil(self.awake / self.fill_concurrency) * 10.0 + 60.0


class CleanupParams(Section):
    """The end of a run: stopping the load, deleting every actor it created."""

    concurrency: Annotated[int, Flag("--cleanup-concurrency")] = Field(
        16, ge=1, le=MAX_CONCURRENCY, description="actors deleted at once"
    )
    timeout_seconds: Annotated[Seconds, Flag("--cleanup-timeout-seconds")] = Field(
        120.0,
        gt=0,
        le=MAX_WAIT_S,
        description="for the whole cleanup; what is left is listed as leaked",
    )
    stop_grace_seconds: Seconds = Field(
        10.0, ge=0, le=MAX_WAIT_S, description="in-flight requests get this long at stop"
    )


def _shards(value: Any) -> Any:
    """generator.shards: a whole number >= 1 (also as text) or "auto"."""
    text = value.strip().lower() if isinstance(value, str) else None
    if text == "auto":
        return "auto"
    if text is not None and text.isdigit():
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r}: a number of shards (>= 1) or auto")
    if not 1 <= value <= 1024:
        raise ValueError(f"{value}: between 1 and 1024 shards, or auto")
    return value


class GeneratorParams(Section):
    """The load generator: one process, or shards on a Dask cluster (engine/shards/)."""

    shards: Annotated[
        Annotated[int, Field(ge=1, le=1024)] | Literal["auto"], BeforeValidator(_shards)
    ] = Field(
        1,
        description="generator processes the population is split into: 1 = this process "
        "(no Dask), auto = one per core (of the cluster's workers, with cluster)",
    )
    cluster: str | None = Field(
        None,
        description="Dask scheduler address (tcp://host:8786); none: a local cluster of "
        "worker processes on this machine",
    )

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not _SCHEDULER.match(value):
            raise ValueError(f"{value!r} is not a Dask scheduler address (tcp://host:8786)")
        return value

    min_shards: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="shards a run goes on with after losing some (their sessions move to "
        "the survivors); fewer left and the run ends void. None: half the shards, rounded up",
    )

    @model_validator(mode="after")
    def _min_shards_within_shards(self) -> GeneratorParams:
        if isinstance(self.shards, int) and self.min_shards is not None:
            if self.min_shards > self.shards:
                raise ValueError(
                    f"generator.min_shards ({self.min_shards}) exceeds generator.shards "
                    f"({self.shards}): the run could never start"
                )
        return self

    def shards_needed(self, count: int) -> int:
        """How many of `count` shards must stay alive for the run to go on."""
        if self.min_shards is None:
            return max(1, math.ceil(count / 2))
        return min(self.min_shards, count)


EMBEDDED = "embedded"


def reference_value(value: Any) -> Any:
    """`reference`: 'embedded' (a local substrate of its own), a control URL, or the fields
    of a target."""
    if isinstance(value, str):
        text = value.strip()
        if text in ("", "none", "null"):
            return None
        return {} if text == EMBEDDED else {"substrate": text}
    return value


class RunParams(Section):
    """One engine run. The hold is not a parameter: the caller holds (`agentsession run
    --hold`, the campaign's windows)."""

    name: str = Field(
        "agentsession",
        max_length=MAX_NAME,
        description="run name (artifact path)",
        json_schema_extra=form_position(0),
    )
    tag: str = Field(
        "adhoc",
        max_length=MAX_NAME,
        description="run tag (artifact path)",
        json_schema_extra=form_position(1),
    )
    out: str = Field(
        "./artifacts",
        max_length=MAX_TEXT,
        description="where the run directory is written (path or file:// URL)",
        json_schema_extra=form_position(3),
    )
    seed: int = Field(
        1,
        ge=0,
        le=MAX_SEED,
        description="one seed for every random choice",
        json_schema_extra=form_position(4),
    )
    script: Annotated[
        Annotated[str, Field(max_length=MAX_TEXT)] | dict[str, int], BeforeValidator(check_spec)
    ] = Field(
        "coding-session",
        description="built-in script name or YAML path, or a weighted mix of them "
        "({coding-session: 3, personal-assistant-light: 1})",
        json_schema_extra=form_position(5),
    )
    think_scale: Number = Field(
        1.0,
        ge=0,
        le=MAX_THINK_SCALE,
        description="multiplies every think time",
        json_schema_extra=form_position(6),
    )
    metrics_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="serve Prometheus /metrics and the live control API (/v1/status) on this "
        "loopback port",
        json_schema_extra=form_position(14),
    )
    target: TargetParams = Field(default_factory=TargetParams, json_schema_extra=form_position(15))
    reference: Annotated[TargetParams | None, BeforeValidator(reference_value)] = Field(
        None,
        description="a paired run's reference arm, run side by side with target (the "
        "candidate): the same fields as target, or 'embedded' for a local substrate of its "
        "own; none: an unpaired run",
        json_schema_extra=form_position(15),
    )
    population: PopulationParams = Field(
        default_factory=PopulationParams, json_schema_extra=form_position(16)
    )
    cleanup: CleanupParams = Field(
        default_factory=CleanupParams, json_schema_extra=form_position(17)
    )
    generator: GeneratorParams = Field(
        default_factory=GeneratorParams, json_schema_extra=form_position(20)
    )
    server: ServerParams = Field(default_factory=ServerParams, json_schema_extra=form_position(21))

    @model_validator(mode="after")
    def _shards_have_sessions(self) -> RunParams:
        shards, sessions = self.generator.shards, self.population.sessions
        if isinstance(shards, int) and shards > sessions:
            raise ValueError(
                f"generator.shards ({shards}) exceeds population.sessions ({sessions}): "
                "every shard needs at least one session"
            )
        return self

    @model_validator(mode="after")
    def _cohorts_in_one_process(self) -> RunParams:
        # A cohort's k % marks need every actor's ready time in one place: sharded cohorts
        # (and a paired run's two cohorts at once) are not built (docs/limits.md).
        population = self.population
        if population.cohorts and (
            self.generator.shards != 1 or self.generator.cluster is not None
        ):
            raise ValueError(
                f"population.kind {population.kind}: a cohort is measured by one generator "
                "process; generator.shards must be 1 and generator.cluster unset"
            )
        if population.cohorts and self.reference is not None:
            raise ValueError(
                f"population.kind {population.kind}: a paired run of cohorts is not built "
                "(docs/limits.md); run each target in a campaign of its own"
            )
        return self

    @property
    def paired(self) -> bool:
        """Whether a reference arm runs beside the candidate (docs/SPEC.md §6.8)."""
        return self.reference is not None

    @field_validator("name", "tag")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must match ^[a-z0-9][a-z0-9-]*$")
        return value

    @model_validator(mode="after")
    def _wire_has_the_lifecycle(self) -> RunParams:
        # ateapi.Control has SuspendActor and nothing asynchronous (the ate wire notes). Firing
        # SuspendActor unawaited would book our own send time as SuspendActorAsync and lose
        # its failures, so the mode is refused rather than imitated (docs/SPEC.md §3.3).
        if self.population.lifecycle_mode == "suspend-async" and self.target.wire == "ate":
            raise ValueError(
                "population.lifecycle_mode suspend-async needs SuspendActorAsync, which the ate "
                "wire (target.protocol ate) does not have: use suspend or pause, or the json wire"
            )
        return self

    @model_validator(mode="after")
    def _server_sources(self) -> RunParams:
        if self.server.preset and not self.target.prometheus_url:
            raise ValueError(
                f"server.preset {self.server.preset} reads Prometheus: set target.prometheus_url"
            )
        if self.server.queries and not self.target.prometheus_url:
            raise ValueError("server.queries need target.prometheus_url (a Prometheus server)")
        if self.target.prometheus_url and not self.server.all_queries:
            raise ValueError(
                "target.prometheus_url needs server.queries (name: PromQL) or server.preset"
            )
        return self

    @property
    def server_metrics_source(self) -> bool:
        """Whether the run will have server-side figures (docs/SPEC.md §5.9)."""
        target = self.target
        embedded = target.substrate is None  # the local substrate serves its own /metrics
        return self.server.enabled and bool(target.metrics_url or target.prometheus_url or embedded)


M = TypeVar("M", bound=BaseModel)


def describe(exc: ValidationError) -> str:
    """pydantic's report as one line naming the dotted parameter path."""
    first = exc.errors()[0]
    message = first["msg"].removeprefix("Value error, ")
    where = ".".join(str(p) for p in first["loc"])
    # A rule across fields has no single place; its message names the fields.
    return f"parameter {where}: {message}" if where else f"parameters: {message}"


def parse(model: type[M], values: dict[str, Any], *, source: str | None = None) -> M:
    """Build `model` from `values`; bad input is one UsageError line (prefixed by `source`,
    e.g. the file the values came from)."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        text = describe(exc)
        raise UsageError(f"{source}: {text}" if source else text) from None


def parse_params(values: dict[str, Any], *, source: str | None = None) -> RunParams:
    return parse(RunParams, values, source=source)
