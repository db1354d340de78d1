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
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
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
    union_form_position,
)
from agentsession_core.engine.population_params import (
    KIND_PARAMS,
    POPULATION_FIELD,
    ClosedParams,
    Population,
    PopulationParams,
)
from agentsession_core.engine.server_params import ServerParams
from agentsession_core.engine.target_params import TargetParams, wire_of
from agentsession_core.errors import UsageError, clip
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
    "Population",
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


_DEFAULT_PORTS = {"http": 80, "https": 443, "grpcs": 443}


def _endpoint(url: str) -> tuple[str, int | None]:
    """Where a URL connects: its host (lower case) and port (the scheme's by default)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(parts.scheme)


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

    void_when_saturated: bool = Field(
        True,
        description="a window in which the generator was saturated (docs/SPEC.md §5.6) is "
        "void; false: its saturated seconds are still counted and shown, but void nothing "
        "(a rehearsal on a machine shared with other work; never for a release gate)",
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
    population: Population = Field(
        default_factory=ClosedParams,
        description="who wakes when: one of the kinds, each with its own fields",
        json_schema_extra=union_form_position(16),
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

    @model_validator(mode="after")
    def _arms_are_two_platforms(self) -> RunParams:
        # A release gate whose reference is its own target compares the build with itself:
        # it passes whatever the build, and its two arms share one platform's workers (issue
        # 38: such a gate passed with no word). An A/A rehearsal needs a second deployment of
        # the same build, or reference: embedded.
        if self.reference is None:
            return self
        for field in ("substrate", "router"):
            ours = getattr(self.target, field)
            theirs = getattr(self.reference, field)
            if ours and theirs and _endpoint(ours) == _endpoint(theirs):
                raise ValueError(
                    f"reference.{field} is target.{field} ({clip(theirs)}): a paired campaign "
                    "against itself passes whatever the build; give the reference the release "
                    "it would replace (a second deployment of the same build for an A/A "
                    "rehearsal, or reference: embedded)"
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
    def _resolve_wire(self) -> RunParams:
        # Each target names the wire it speaks, so that campaign.json records the wire the run
        # used: a reader must not take it from a default that may change (an older run with
        # no protocol and no URL spoke json). The embedded local substrate speaks ate, but
        # json for suspend-async, which only the json wire carries: the substrate serves both,
        # so nothing the user asked for is overridden (docs/SPEC.md §2).
        for name in ("target", "reference"):
            target: TargetParams | None = getattr(self, name)
            if target is None or target.protocol is not None:
                continue
            wire = target.wire
            if target.substrate is None and self.population.lifecycle_mode == "suspend-async":
                wire = "json"
            # Not through assignment: that would validate the whole model again.
            self.__dict__[name] = target.model_copy(update={"protocol": wire})
        return self

    @model_validator(mode="after")
    def _wire_has_the_lifecycle(self) -> RunParams:
        # ateapi.Control has SuspendActor and nothing asynchronous (the ate wire notes). Firing
        # SuspendActor unawaited would book our own send time as SuspendActorAsync and lose
        # its failures, so the mode is refused rather than imitated (docs/SPEC.md §3.3).
        if self.population.lifecycle_mode != "suspend-async":
            return self
        for name in ("target", "reference"):
            target: TargetParams | None = getattr(self, name)
            if target is not None and target.wire == "ate":
                raise ValueError(
                    "population.lifecycle_mode suspend-async needs SuspendActorAsync, which "
                    f"the ate wire ({name}.protocol ate) does not have: use suspend or pause, "
                    "or the json wire"
                )
        return self

    @model_validator(mode="after")
    def _data_plane_for_requests(self) -> RunParams:
        # Without a data plane nothing answers a router request (docs/SPEC.md §2.4): every
        # first touch, wake probe and step would fail 503, measuring nothing.
        if not self.target.local_data_plane and self.population.wake_probe != "none":
            raise ValueError(
                "target.local_data_plane false: no actor answers a router request; set "
                "population.wake_probe none (and resume_mode explicit) to drive the control "
                "plane alone"
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
    loc = _without_kinds(first["loc"])
    if first["type"] == POPULATION_FIELD:
        loc = (*loc, first["ctx"]["field"])
    where = ".".join(str(p) for p in loc)
    if where and message.startswith((f"{where}[", f"{where}:")):
        return f"parameter {message}"  # it names its place itself (`thresholds[2]: …`)
    # A rule across fields has no single place; its message names the fields.
    return f"parameter {where}: {message}" if where else f"parameters: {message}"


def _without_kinds(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """The parameter path without the population's kind, which pydantic's path names as the
    member of the union after `population` (`population.turnover.awake`)."""
    return tuple(
        part
        for i, part in enumerate(loc)
        if not (i > 0 and loc[i - 1] == "population" and part in KIND_PARAMS)
    )


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
