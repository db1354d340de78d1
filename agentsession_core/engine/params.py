"""RunParams: every knob of one engine run, in sections, validated in one place.

`agentsession run` (its flags are generated from this model), the campaign's
CampaignParams (a subclass), the presets and `--set key.path=value` all resolve to it, so a
bad value is refused once, before any actor exists, with the parameter's dotted path in the
message (`parameter population.awake: ...`). Each rule lives on the section that owns the
field. Every `*_seconds` field also takes a Go-style duration ("2s", "10m", "1h30m"), and no
float field takes inf or nan.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonDict

from agentsession_core.errors import UsageError
from agentsession_core.script.quantity import QuantityError, parse_duration, seconds

PopulationKind = Literal["closed", "turnover", "turns"]
LifecycleMode = Literal["suspend", "suspend-async", "pause", "none"]
ResumeMode = Literal["implicit", "explicit"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_TEMPLATE = re.compile(r"^[a-z0-9][a-z0-9.-]*/[a-z0-9][a-z0-9.-]*$")


def _duration(value: Any) -> Any:
    """A duration string ("2s", "1h30m") in seconds; numbers (and numeric text) pass on."""
    if not isinstance(value, str):
        return value
    try:
        float(value)
    except ValueError:
        pass
    else:
        return value  # "2.5", "inf": the float rules decide
    try:
        return seconds(parse_duration(value.strip()))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


# The one float type: inf and nan are refused everywhere.
Number = Annotated[float, AllowInfNan(False)]
# Seconds, also given as a Go duration string (DURATION marks such fields for the CLI).
DURATION = BeforeValidator(_duration)
Seconds = Annotated[Number, DURATION]


class Flag:
    """Field metadata for the generated CLI: the flag spellings of a field whose name alone
    would not say enough, or that keeps a historical spelling (the first one is its name)."""

    __slots__ = ("names",)

    def __init__(self, *names: str) -> None:
        self.names = names

    def __repr__(self) -> str:
        return f"Flag{self.names!r}"


def form_position(position: int) -> JsonDict:
    """Where the Prefect UI form shows a field (json_schema_extra)."""
    return {"position": position}


class Section(BaseModel):
    """A group of parameters: unknown keys are refused, assignment is validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class TargetParams(Section):
    """Where the load goes. No substrate URL: an embedded local substrate is started."""

    substrate: str | None = Field(None, description="control API URL (none: local substrate)")
    router: str | None = Field(None, description="router URL when it differs from the control URL")
    token: str | None = Field(
        None, description="bearer token (redacted in artifacts; CLI: or AGENTSESSION_TOKEN)"
    )
    template: str = Field("benchmark-workloads/glutton", description="actor template NS/NAME")
    atespace: str | None = Field(None, description="atespace for the actors (default: per run)")
    local_workers: int = Field(8, ge=1, le=256, description="workers of the local substrate")
    request_timeout_seconds: Seconds = Field(120.0, gt=0, description="per request")
    metrics_url: str | None = Field(
        None,
        description="the substrate's Prometheus metrics to sample (default: the local "
        "substrate's own /metrics; none for a remote one)",
    )
    prometheus_url: str | None = Field(
        None, description="a Prometheus server to run server.queries against after each window"
    )

    @field_validator("substrate", "router", "metrics_url", "prometheus_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        if not _TEMPLATE.match(value):
            raise ValueError("must be NAMESPACE/NAME")
        return value

    @property
    def template_ref(self) -> tuple[str, str]:
        namespace, name = self.template.split("/", 1)
        return namespace, name


class PopulationParams(Section):
    """Who wakes when (docs/SPEC.md §4). Only the fields of the chosen kind matter."""

    kind: Annotated[PopulationKind, Flag("--population")] = Field(
        "closed", description="population"
    )
    sessions: int = Field(10, ge=1, le=1_000_000, description="sessions registered")
    spawn_rate: Number = Field(10.0, gt=0, description="sessions started per second")
    awake: int = Field(
        0,
        ge=0,
        validate_default=True,
        description="turnover: sessions kept resident (at most sessions)",
    )
    target_rps: Number = Field(1.0, ge=0, description="turnover: swaps per second at 1x")
    registration_quiet_seconds: Annotated[
        Seconds, Flag("--registration-quiet-seconds", "--registration-quiet")
    ] = Field(60.0, ge=0, description="registration ends after this long without a start")
    fill_concurrency: int = Field(8, ge=1, description="turnover: concurrent fill wakes")
    turns_per_hour: Number = Field(6.0, gt=0, description="turns: per session at 1x")
    turn_mean_seconds: Annotated[Seconds, Flag("--turn-mean-seconds", "--turn-mean")] = Field(
        60.0, gt=0, description="turns: mean turn length"
    )
    resume_mode: ResumeMode = Field("implicit", description="explicit: ResumeActor before a wake")
    lifecycle_mode: LifecycleMode = Field("suspend", description="how an actor is parked")

    @field_validator("awake")
    @classmethod
    def _awake(cls, value: int, info: ValidationInfo) -> int:
        sessions = info.data.get("sessions")
        if info.data.get("kind") == "turnover" and sessions is not None and value > sessions:
            raise ValueError(f"awake ({value}) exceeds sessions ({sessions})")
        return value

    @property
    def level(self) -> float:
        """The population's load level (docs/SPEC.md §4.4) at 1×."""
        return {
            "closed": float(self.sessions),
            "turnover": self.target_rps,
            "turns": self.turns_per_hour,
        }[self.kind]


class CleanupParams(Section):
    """The end of a run: stopping the load, deleting every actor it created."""

    concurrency: Annotated[int, Flag("--cleanup-concurrency")] = Field(
        16, ge=1, description="actors deleted at once"
    )
    timeout_seconds: Annotated[Seconds, Flag("--cleanup-timeout-seconds")] = Field(
        120.0, gt=0, description="for the whole cleanup; what is left is listed as leaked"
    )
    stop_grace_seconds: Seconds = Field(
        10.0, ge=0, description="in-flight requests get this long at stop"
    )


def _listed(value: Any) -> Any:
    """A list also given as comma-separated text (a flag)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _mapping(value: Any) -> Any:
    """A mapping also given as YAML/JSON text (a flag: `--server-queries '{a: expr}'`)."""
    if isinstance(value, str):
        try:
            return yaml.safe_load(value) if value.strip() else {}
        except yaml.YAMLError:
            raise ValueError("expected a mapping of name: PromQL") from None
    return value


_FIGURE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class ServerParams(Section):
    """Server-side figures (docs/SPEC.md §5.8): the substrate's own metrics, sampled during
    the run (target.metrics_url) or queried from Prometheus (target.prometheus_url), cut per
    window into server_summary.json and judged by `server.` thresholds."""

    enabled: Annotated[bool, Flag("--server-metrics")] = Field(
        True, description="sample server-side figures when a source is known"
    )
    interval_seconds: Annotated[Seconds, Flag("--server-interval-seconds")] = Field(
        2.0, ge=0.2, le=60, description="between two scrapes; the query step"
    )
    series: Annotated[list[str], BeforeValidator(_listed), Flag("--server-series")] = Field(
        default_factory=lambda: ["agentsession_substrate_*"],
        min_length=1,
        description="metric families kept from a scrape (fnmatch patterns)",
    )
    queries: Annotated[dict[str, str], BeforeValidator(_mapping), Flag("--server-queries")] = Field(
        default_factory=dict,
        description="name: PromQL, run against target.prometheus_url over each window",
    )

    @field_validator("queries")
    @classmethod
    def _queries(cls, value: dict[str, str]) -> dict[str, str]:
        for name, query in value.items():
            if not _FIGURE_NAME.match(name):
                raise ValueError(f"query name {name!r} must match {_FIGURE_NAME.pattern}")
            if not str(query).strip():
                raise ValueError(f"query {name!r} is empty")
        return value


class RunParams(Section):
    """One engine run. The hold is not a parameter: the caller holds (`agentsession run
    --hold`, the campaign's windows)."""

    name: str = Field(
        "agentsession", description="run name (artifact path)", json_schema_extra=form_position(0)
    )
    tag: str = Field(
        "adhoc", description="run tag (artifact path)", json_schema_extra=form_position(1)
    )
    out: str = Field(
        "./artifacts",
        description="where the run directory is written (path or file:// URL)",
        json_schema_extra=form_position(3),
    )
    seed: int = Field(
        1, ge=0, description="one seed for every random choice", json_schema_extra=form_position(4)
    )
    script: str = Field(
        "coding-session",
        description="built-in script name or YAML path",
        json_schema_extra=form_position(5),
    )
    think_scale: Number = Field(
        1.0, ge=0, description="multiplies every think time", json_schema_extra=form_position(6)
    )
    metrics_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="serve Prometheus /metrics on this port",
        json_schema_extra=form_position(14),
    )
    target: TargetParams = Field(default_factory=TargetParams, json_schema_extra=form_position(15))
    population: PopulationParams = Field(
        default_factory=PopulationParams, json_schema_extra=form_position(16)
    )
    cleanup: CleanupParams = Field(
        default_factory=CleanupParams, json_schema_extra=form_position(17)
    )
    server: ServerParams = Field(default_factory=ServerParams, json_schema_extra=form_position(20))

    @field_validator("name", "tag")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must match ^[a-z0-9][a-z0-9-]*$")
        return value

    @model_validator(mode="after")
    def _server_sources(self) -> RunParams:
        if self.server.queries and not self.target.prometheus_url:
            raise ValueError("server.queries need target.prometheus_url (a Prometheus server)")
        if self.target.prometheus_url and not self.server.queries:
            raise ValueError("target.prometheus_url needs server.queries (name: PromQL)")
        return self

    @property
    def server_metrics_source(self) -> bool:
        """Whether the run will have server-side figures (docs/SPEC.md §5.8)."""
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
