"""RunParams: every knob of one engine run, validated in one place.

The CLI (`agentsession run`), the campaign's CampaignParams and the presets all resolve to
this model, so a bad value is refused once, before any actor exists, with the parameter's
name in the message.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentsession_core.errors import UsageError

Population = Literal["closed", "turnover", "turns"]
LifecycleMode = Literal["suspend", "suspend-async", "pause", "none"]
ResumeMode = Literal["implicit", "explicit"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_TEMPLATE = re.compile(r"^[a-z0-9][a-z0-9.-]*/[a-z0-9][a-z0-9.-]*$")


class RunParams(BaseModel):
    """One engine run. Times are seconds."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # target
    substrate: str | None = Field(None, description="control API URL (none: local)")
    router: str | None = Field(None, description="router URL when it differs from the control URL")
    token: str | None = Field(None, description="bearer token for the substrate (redacted)")
    template: str = Field("benchmark-workloads/glutton", description="actor template NS/NAME")
    atespace: str | None = Field(None, description="atespace for the actors (default: per run)")
    local_workers: int = Field(8, ge=1, le=256, description="workers of the embedded substrate")

    # workload
    script: str = Field("coding-session", description="built-in script name or YAML path")
    population: Population = "closed"
    sessions: int = Field(10, ge=1, le=1_000_000)
    spawn_rate: float = Field(10.0, gt=0, description="sessions started per second")
    awake: int = Field(0, ge=0, description="turnover: sessions kept resident")
    target_rps: float = Field(1.0, ge=0, description="turnover: swaps per second")
    registration_quiet: float = Field(60.0, ge=0)
    fill_concurrency: int = Field(8, ge=1)
    turns_per_hour: float = Field(6.0, gt=0, description="turns: per session")
    turn_mean: float = Field(60.0, gt=0, description="turns: mean turn length, seconds")
    resume_mode: ResumeMode = "implicit"
    lifecycle_mode: LifecycleMode = "suspend"
    think_scale: float = Field(1.0, ge=0)
    hold: float = Field(60.0, ge=0, description="seconds of load after start-up / fill")
    seed: int = Field(1, ge=0)

    # housekeeping
    name: str = Field("agentsession", description="run name (artifact path)")
    tag: str = Field("adhoc", description="run tag (artifact path)")
    out: str = Field("./artifacts", description="artifact destination")
    metrics_port: int | None = Field(None, ge=0, le=65535)
    cleanup_concurrency: int = Field(16, ge=1)
    cleanup_timeout: float = Field(120.0, gt=0)
    request_timeout: float = Field(120.0, gt=0, description="per request, seconds")
    stop_grace: float = Field(10.0, ge=0, description="in-flight requests get this long at stop")

    @field_validator("name", "tag")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must match ^[a-z0-9][a-z0-9-]*$")
        return value

    @field_validator("template")
    @classmethod
    def _template(cls, value: str) -> str:
        if not _TEMPLATE.match(value):
            raise ValueError("must be NAMESPACE/NAME")
        return value

    @model_validator(mode="after")
    def _population_rules(self) -> RunParams:
        if self.population == "turnover" and self.awake > self.sessions:
            raise ValueError(f"awake ({self.awake}) exceeds sessions ({self.sessions})")
        return self

    @property
    def template_ref(self) -> tuple[str, str]:
        namespace, name = self.template.split("/", 1)
        return namespace, name

    @property
    def level(self) -> float:
        """The population's load level (docs/SPEC.md §4.4) at 1×."""
        return {
            "closed": float(self.sessions),
            "turnover": self.target_rps,
            "turns": self.turns_per_hour,
        }[self.population]


def parse_params(values: dict) -> RunParams:
    """Build RunParams, turning pydantic's report into one line that names the parameter."""
    try:
        return RunParams(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        where = ".".join(str(p) for p in first["loc"])
        # A rule across fields has no single place; its message names the fields.
        text = f"parameter {where}: {message}" if where else f"parameters: {message}"
        raise UsageError(text) from None
