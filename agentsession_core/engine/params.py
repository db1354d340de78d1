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

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentsession_core.engine.param_types import DURATION as DURATION
from agentsession_core.engine.param_types import Flag as Flag
from agentsession_core.engine.param_types import Number as Number
from agentsession_core.engine.param_types import Seconds as Seconds
from agentsession_core.engine.param_types import Section as Section
from agentsession_core.engine.param_types import form_position as form_position
from agentsession_core.engine.server_params import ServerParams
from agentsession_core.errors import UsageError
from agentsession_core.substrate.protocol import ATE_API_SERVER_NAME, ATE_SCHEMES

PopulationKind = Literal["closed", "turnover", "turns"]
LifecycleMode = Literal["suspend", "suspend-async", "pause", "none"]
ResumeMode = Literal["implicit", "explicit"]
WireForm = Literal["ate", "json"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_SCHEDULER = re.compile(r"^(tcp|tls)://[^\s/]+:\d+$")
_TEMPLATE = re.compile(r"^[a-z0-9][a-z0-9.-]*/[a-z0-9][a-z0-9.-]*$")


def wire_of(protocol: str | None, substrate: str | None) -> WireForm:
    """The wire form a target speaks: `protocol` when given, else the control URL's scheme
    (grpc:// and grpcs:// are the ate wire's gRPC control API, http(s):// the JSON one); the
    embedded local substrate speaks json unless told otherwise (docs/SPEC.md §2)."""
    if protocol == "ate" or (protocol is None and (substrate or "").startswith(ATE_SCHEMES)):
        return "ate"
    return "json"


def _tls_only(value: str | None, info: ValidationInfo) -> str | None:
    if not value:
        return None
    if not (info.data.get("substrate") or "").startswith("grpcs://"):
        raise ValueError("TLS files apply to a grpcs:// substrate (the ate control API)")
    return value


class TargetParams(Section):
    """Where the load goes. No substrate URL: an embedded local substrate is started."""

    substrate: str | None = Field(
        None,
        description="control API URL: http(s):// (json) or grpc://host:port, grpcs://host[:port] "
        "(ate); none: local substrate",
    )
    protocol: WireForm | None = Field(
        None, description="wire form (none: from the substrate URL's scheme; local: json)"
    )
    router: str | None = Field(
        None,
        validate_default=True,
        description="router URL (http://); required with a grpc(s):// substrate, else only when "
        "it differs from the control URL",
    )
    token: str | None = Field(
        None, description="bearer token (redacted in artifacts; CLI: or AGENTSESSION_TOKEN)"
    )
    token_file: str | None = Field(
        None,
        description="ate: file with the control API's bearer token, re-read on every call "
        "(a projected service-account token)",
    )
    ca_file: str | None = Field(None, description="ate, grpcs://: CA bundle of the control API")
    cert_file: str | None = Field(None, description="ate, grpcs://: client certificate (mTLS)")
    key_file: str | None = Field(
        None, validate_default=True, description="ate, grpcs://: the client certificate's key"
    )
    server_name: str = Field(
        ATE_API_SERVER_NAME,
        description="ate, grpcs://: name the control API's certificate is checked against, "
        "whatever address is dialled (empty: the dialled host)",
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

    @field_validator("metrics_url", "prometheus_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @field_validator("substrate")
    @classmethod
    def _substrate(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not value.startswith(("http://", "https://", *ATE_SCHEMES)):
            raise ValueError(f"{value!r} is not an http(s)://, grpc:// or grpcs:// URL")
        return value

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, value: WireForm | None, info: ValidationInfo) -> WireForm | None:
        substrate = info.data.get("substrate")
        if value is None or substrate is None:
            return value
        ate_url = substrate.startswith(ATE_SCHEMES)
        if value == "json" and ate_url:
            raise ValueError(f"json needs an http(s):// substrate URL, not {substrate!r}")
        if value == "ate" and not ate_url:
            raise ValueError(
                f"ate's control API is gRPC: give substrate as grpc://host:port or "
                f"grpcs://host[:port], not {substrate!r}"
            )
        return value

    @field_validator("router")
    @classmethod
    def _router(cls, value: str | None, info: ValidationInfo) -> str | None:
        value = value or None
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        substrate = info.data.get("substrate")
        if wire_of(info.data.get("protocol"), substrate) != "ate":
            return value
        if value is None and substrate is not None:
            # The ate wire's router is an HTTP service apart from the gRPC control API.
            raise ValueError("required with the ate wire: the router's http:// URL")
        if value is not None and not value.startswith("http://"):
            raise ValueError(f"the ate wire's router client speaks http:// only, not {value!r}")
        return value

    @field_validator("token_file")
    @classmethod
    def _token_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        if not value:
            return None
        if info.data.get("token"):
            raise ValueError("give token or token_file, not both")
        if wire_of(info.data.get("protocol"), info.data.get("substrate")) != "ate":
            raise ValueError("a token file is read by the ate wire's control client only")
        return value

    @field_validator("ca_file", "cert_file")
    @classmethod
    def _tls_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _tls_only(value, info)

    @field_validator("key_file")
    @classmethod
    def _key_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        value = _tls_only(value, info)
        if (value is None) != (info.data.get("cert_file") is None):
            raise ValueError("mTLS needs both cert_file and key_file")
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

    @property
    def wire(self) -> WireForm:
        return wire_of(self.protocol, self.substrate)


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
        if self.server.queries and not self.target.prometheus_url:
            raise ValueError("server.queries need target.prometheus_url (a Prometheus server)")
        if self.target.prometheus_url and not self.server.queries:
            raise ValueError("target.prometheus_url needs server.queries (name: PromQL)")
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
