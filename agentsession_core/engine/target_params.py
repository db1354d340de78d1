"""Where the load goes: the substrate's URLs, its wire form (ate or json), credentials and
TLS files (the control API's and the router's), the template, the worker pools, the embedded
local substrate's size. A section of RunParams."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentsession_core.engine.param_types import (
    _TEMPLATE,
    MAX_ANSWER_BYTES,
    MAX_TEXT,
    MAX_WAIT_S,
    MIN_ANSWER_BYTES,
    Bytes,
    Seconds,
    Section,
    WireForm,
)
from agentsession_core.errors import clip
from agentsession_core.script.yaml_places import NoAliasLoader
from agentsession_core.substrate.protocol import (
    ATE_API_SERVER_NAME,
    ATE_SCHEMES,
    POOL_NAME_PATTERN,
    POOL_NAME_RULE,
)
from agentsession_core.substrate.router_client import DEFAULT_MAX_ANSWER_BYTES


def wire_of(protocol: WireForm | None, substrate: str | None) -> WireForm:
    """The wire form a target speaks: `protocol` when given, else the control URL's scheme
    (grpc:// and grpcs:// are the ate wire's gRPC control API, http(s):// the JSON one); the
    embedded local substrate speaks ate, the platform's own wire, unless told otherwise
    (docs/SPEC.md §2)."""
    if protocol is not None:
        return protocol
    if not substrate or substrate.startswith(ATE_SCHEMES):
        return "ate"
    return "json"


def _tls_only(value: str | None, info: ValidationInfo) -> str | None:
    if not value:
        return None
    if not (info.data.get("substrate") or "").startswith("grpcs://"):
        raise ValueError("TLS files apply to a grpcs:// substrate (the ate control API)")
    return value


def _router_tls_only(value: str | None, info: ValidationInfo) -> str | None:
    if not value:
        return None
    # The router is target.router, or on the json wire without one the control URL itself.
    data = info.data
    router = data.get("router")
    if router is None and wire_of(data.get("protocol"), data.get("substrate")) == "json":
        router = data.get("substrate")
    if not (router or "").startswith("https://"):
        raise ValueError("router TLS settings apply to an https:// router (target.router)")
    return value


# Bounds on `target.worker_pools` (docs/SPEC.md §2.6): a weight is normally a pool's worker
# count, and the draw and every file the run writes need it to fit in 64 bits (a weight of
# 1e26 once passed here and crashed the run writing campaign.json).
MAX_POOL_WEIGHT = 1_000_000
MAX_POOLS = 100


def _pool_text(text: str) -> list[tuple[Any, Any]]:
    """The text forms: `{fast: 3, slow: 1}` (YAML's flow mapping, as `--help` shows it) or
    the platform's flag form `name:weight,name:weight`."""
    if text.lstrip().startswith("{"):
        try:
            mapping = yaml.load(text, Loader=NoAliasLoader)  # a SafeLoader, no aliases
        except (yaml.YAMLError, ValueError):  # ValueError: an integer of 4,300+ digits
            mapping = None
        if not isinstance(mapping, dict):
            raise ValueError(
                f"{clip(text)} is not a mapping of pool to weight (e.g. {{fast: 3, slow: 1}} "
                "or fast:3,slow:1)"
            )
        return list(mapping.items())
    entries: list[tuple[Any, Any]] = []
    for part in text.split(","):
        name, colon, weight = part.strip().partition(":")
        if not colon:
            raise ValueError(f"entry {part.strip()!r}: expected name:weight (e.g. fast:3)")
        weight = weight.strip()
        if weight.isdigit() and len(weight) > len(str(MAX_POOL_WEIGHT)):
            raise ValueError(_too_large(name.strip(), weight))  # not read: it may be huge
        entries.append((name.strip(), int(weight) if weight.isdigit() else weight))
    return entries


def _too_large(name: str, weight: object) -> str:
    return (
        f"pool {clip(name)}: weight {clip(weight)} is too large: at most {MAX_POOL_WEIGHT:,} "
        "(a weight is normally the pool's worker count)"
    )


def pool_weights(value: Any) -> dict[str, int] | None:
    """`target.worker_pools` as {name: weight}: a mapping, `{fast: 3, slow: 1}` as text, or
    the platform's flag form `name:weight,name:weight`; each entry checked, the refusal
    naming it (docs/SPEC.md §2.6)."""
    if value is None or value == "" or value == {}:
        return None
    if isinstance(value, str):
        entries = _pool_text(value)
    elif isinstance(value, dict):
        entries = list(value.items())
    else:
        raise ValueError("a mapping {pool: weight} or 'name:weight,name:weight'")
    if len(entries) > MAX_POOLS:
        raise ValueError(f"{len(entries)} pools: at most {MAX_POOLS}")
    weights: dict[str, int] = {}
    for name, weight in entries:
        shown = clip(str(name))
        if not isinstance(name, str) or not POOL_NAME_PATTERN.match(name):
            raise ValueError(f"pool {shown}: a pool name is {POOL_NAME_RULE}")
        # A mapping's weights must be integers already (2.0, True and "2" from a YAML file
        # are refused, not rounded or read); the flag form's digits were read above.
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
            raise ValueError(f"pool {shown}: weight {clip(weight)} is not a positive integer")
        if weight > MAX_POOL_WEIGHT:
            raise ValueError(_too_large(name, weight))
        if name in weights:
            raise ValueError(f"pool {shown} given twice")
        weights[name] = weight
    return weights


class TargetParams(Section):
    """Where the load goes. No substrate URL: an embedded local substrate is started."""

    substrate: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="control API URL: http(s):// (json) or grpc://host:port, grpcs://host[:port] "
        "(ate); none: local substrate",
    )
    protocol: WireForm | None = Field(
        None,
        description="wire form (none: from the substrate URL's scheme; the embedded local "
        "substrate: ate, or json for population.lifecycle_mode suspend-async); a run records "
        "the wire it spoke",
    )
    router: str | None = Field(
        None,
        max_length=MAX_TEXT,
        validate_default=True,
        description="router URL (http:// or https://); required with a grpc(s):// substrate, "
        "else only when it differs from the control URL",
    )
    router_ca_file: str | None = Field(
        None, description="https:// router: CA bundle its certificate is checked against"
    )
    router_cert_file: str | None = Field(
        None, description="https:// router: client certificate (mTLS)"
    )
    router_key_file: str | None = Field(
        None, validate_default=True, description="https:// router: the client certificate's key"
    )
    router_server_name: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="https:// router: the name sent as SNI and its certificate is checked "
        "against, whatever address is dialled (none: the router URL's host)",
    )
    token: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="bearer token (redacted in artifacts; CLI: AGENTSESSION_TOKEN or a --params "
        "file; --token is refused, a command line being visible in the process list)",
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
    worker_pools: dict[str, int] | None = Field(
        None,
        description="worker pools by weight, {pool: weight} or 'name:weight,name:weight' "
        f"(weights whole, 1 to {MAX_POOL_WEIGHT:,}; at most {MAX_POOLS} pools): each actor "
        "name draws one pool for life and is created with the selector {pool: NAME} (none: no "
        "selector of its own; the embedded substrate splits local_workers by weight)",
    )
    atespace: str | None = Field(None, description="atespace for the actors (default: per run)")
    local_workers: int = Field(8, ge=1, le=256, description="workers of the local substrate")
    local_worker_capacity: int = Field(
        1,
        ge=1,
        le=1024,
        description="running actors each worker process of the local substrate holds at once "
        "(docs/SPEC.md §2.7; 1: one actor per process)",
    )
    local_worker_memory: Bytes | None = Field(
        None,
        ge=1,
        description="memory of each local-substrate worker, in bytes or as a size (512Mi): a "
        "wake whose template memory limit would take a worker past it is refused, "
        "RESOURCE_EXHAUSTED (none: no limit)",
    )
    local_data_plane: bool = Field(
        True,
        description="false: the embedded local substrate serves its control plane alone "
        "(--no-data-plane: pod-less workers, a router that answers no actor request); with "
        "population.wake_probe none (docs/SPEC.md §2.4)",
    )
    local_start_timeout_seconds: Seconds = Field(
        60.0,
        gt=0,
        le=MAX_WAIT_S,
        description="how long the embedded local substrate may take to start (many workers "
        "on a busy machine take longer)",
    )
    request_timeout_seconds: Seconds = Field(120.0, gt=0, le=MAX_WAIT_S, description="per request")
    metrics_url: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="the substrate's Prometheus metrics to sample (default: the local "
        "substrate's own /metrics; none for a remote one)",
    )
    prometheus_url: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="a Prometheus server to run server.queries against after each window",
    )
    max_answer_bytes: Bytes = Field(
        DEFAULT_MAX_ANSWER_BYTES,
        ge=MIN_ANSWER_BYTES,
        le=MAX_ANSWER_BYTES,
        description="largest router answer body read, in bytes or as a size (64Mi); a larger "
        "answer fails its request with ANSWER_TOO_LARGE and is not read",
    )

    @field_validator("metrics_url", "prometheus_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{clip(value)} is not an http(s) URL")
        return value

    @field_validator("substrate")
    @classmethod
    def _substrate(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not value.startswith(("http://", "https://", *ATE_SCHEMES)):
            raise ValueError(f"{clip(value)} is not an http(s)://, grpc:// or grpcs:// URL")
        return value

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, value: WireForm | None, info: ValidationInfo) -> WireForm | None:
        substrate = info.data.get("substrate")
        if value is None or substrate is None:
            return value
        ate_url = substrate.startswith(ATE_SCHEMES)
        if value == "json" and ate_url:
            raise ValueError(f"json needs an http(s):// substrate URL, not {clip(substrate)}")
        if value == "ate" and not ate_url:
            raise ValueError(
                f"ate's control API is gRPC: give substrate as grpc://host:port or "
                f"grpcs://host[:port], not {clip(substrate)}"
            )
        return value

    @field_validator("router")
    @classmethod
    def _router(cls, value: str | None, info: ValidationInfo) -> str | None:
        value = value or None
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{clip(value)} is not an http(s) URL")
        substrate = info.data.get("substrate")
        if wire_of(info.data.get("protocol"), substrate) != "ate":
            return value
        if value is None and substrate is not None:
            # The ate wire's router is an HTTP service apart from the gRPC control API.
            raise ValueError("required with the ate wire: the router's http:// URL")
        return value

    @field_validator("router_ca_file", "router_cert_file", "router_server_name")
    @classmethod
    def _router_tls(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _router_tls_only(value, info)

    @field_validator("router_key_file")
    @classmethod
    def _router_key_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        value = _router_tls_only(value, info)
        if (value is None) != (info.data.get("router_cert_file") is None):
            raise ValueError("router mTLS needs both router_cert_file and router_key_file")
        return value

    @field_validator("worker_pools", mode="before")
    @classmethod
    def _worker_pools(cls, value: Any) -> dict[str, int] | None:
        return pool_weights(value)

    @model_validator(mode="after")
    def _embedded_pools(self) -> TargetParams:
        pools = self.worker_pools or {}
        if self.substrate is None and len(pools) > self.local_workers:
            raise ValueError(
                f"target.worker_pools: {len(pools)} pools need at least as many "
                f"target.local_workers, not {self.local_workers}"
            )
        return self

    @field_validator("token_file")
    @classmethod
    def _token_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        if not value:
            return None
        if info.data.get("token"):
            raise ValueError("give token or token_file, not both")
        substrate = info.data.get("substrate")
        if wire_of(info.data.get("protocol"), substrate) != "ate":
            raise ValueError("a token file is read by the ate wire's control client only")
        if substrate is None:  # the embedded substrate is started with target.token
            raise ValueError(
                "a token file is for a remote control API; the embedded local "
                "substrate takes target.token"
            )
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
