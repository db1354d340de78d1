"""CampaignParams: one model for every way a campaign is started.

The Prefect UI form (the flow's parameter schema), `deployments/prefect.yaml`, the presets in
`deployments/presets/` and `agentsession campaign --set key=value` all produce this model.
It validates everything a campaign can get wrong before any actor exists — hold and window
arithmetic, the script, every threshold and abort rule — and maps to the engine's RunParams
(`to_run_params`), whose own checks are reported under the campaign's field names.

A campaign holds the load for `hold_minutes` at the first level of `levels`, then for
`ramp_minutes` (default: `hold_minutes`) at each further level, cut into windows of
`window_seconds`; each window is judged on its own. Load never pauses between windows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentsession_core.engine.params import RunParams
from agentsession_core.errors import UsageError

DEFAULT_THRESHOLDS = (
    "TimeToWake: p99 < 2s",
    "Step_*: failure_ratio < 0.01",
    "achieved_rps >= 0.95 * target",
)
DEFAULT_ABORT_RULES = ("Step_*: failure_ratio < 0.5 (min 20)",)
# Presets ship inside the wheel (pyproject force-include); a checkout keeps them in deployments/.
_PACKAGED_PRESETS = Path(__file__).resolve().parent / "presets"
PRESET_DIR = (
    _PACKAGED_PRESETS
    if _PACKAGED_PRESETS.is_dir()
    else Path(__file__).resolve().parents[2] / "deployments" / "presets"
)
# Float arithmetic must not turn 0.3 min / 6 s into 2.9999 windows.
_WHOLE = 1e-9


class TargetParams(BaseModel):
    """Where the load goes. No substrate URL: an embedded local substrate is started."""

    model_config = ConfigDict(extra="forbid")

    substrate: str | None = Field(None, description="control API URL (empty: local substrate)")
    router: str | None = Field(None, description="router URL when it differs from the control URL")
    token: str | None = Field(None, description="bearer token (redacted in artifacts)")
    template: str = Field("benchmark-workloads/glutton", description="actor template NS/NAME")
    local_workers: int = Field(8, ge=1, le=256, description="workers of the local substrate")
    request_timeout_seconds: float = Field(120.0, gt=0, description="per request")

    @field_validator("substrate", "router")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value


class PopulationParams(BaseModel):
    """Who wakes when (docs/SPEC.md §4). Only the fields of the chosen kind matter."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["closed", "turnover", "turns"] = Field("turnover", description="population")
    sessions: int = Field(1000, ge=1, le=1_000_000, description="sessions registered")
    spawn_rate: float = Field(10.0, gt=0, description="closed: sessions started per second")
    awake: int = Field(100, ge=0, description="turnover: sessions kept resident")
    target_rps: float = Field(5.0, ge=0, description="turnover: swaps per second at 1x")
    registration_quiet_seconds: float = Field(60.0, ge=0, description="quiet after registration")
    fill_concurrency: int = Field(8, ge=1, description="turnover: concurrent fills")
    turns_per_hour: float = Field(6.0, gt=0, description="turns: per session at 1x")
    turn_mean_seconds: float = Field(60.0, gt=0, description="turns: mean turn length")
    resume_mode: Literal["implicit", "explicit"] = "implicit"
    lifecycle_mode: Literal["suspend", "suspend-async", "pause", "none"] = "suspend"


class AbortParams(BaseModel):
    """Rules checked every second on a sliding window; a trip ends the campaign at once."""

    model_config = ConfigDict(extra="forbid")

    rules: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ABORT_RULES),
        description="threshold expressions that abort when missed",
    )
    sliding_seconds: float = Field(30.0, gt=0, description="window the rules are judged on")
    delay_seconds: float = Field(60.0, ge=0, description="warm-up before rules are checked")


class UploadParams(BaseModel):
    """How artifacts reach `dest` when it is s3:// (the AWS chain supplies credentials)."""

    model_config = ConfigDict(extra="forbid")

    endpoint_url: str | None = Field(
        None, description="S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)"
    )
    region: str | None = Field(None, description="default: the AWS chain's region")
    attempts: int = Field(3, ge=1, le=10, description="upload attempts before giving up")
    retry_delay_seconds: float = Field(2.0, ge=0, description="first retry delay (doubles)")


@dataclass(frozen=True)
class WindowPlan:
    index: int
    level: float
    seconds: float


class CampaignParams(BaseModel):
    """A benchmark campaign: target, workload, hold and ramp, judging, where artifacts go."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    name: str = Field(
        "agentsession",
        description="campaign name (artifact path)",
        json_schema_extra={"position": 0},
    )
    tag: str = Field(
        "adhoc", description="run tag (artifact path)", json_schema_extra={"position": 1}
    )
    dest: str = Field(
        "./artifacts",
        description="local path, file:// URL or s3://bucket/prefix",
        json_schema_extra={"position": 2},
    )
    local_dir: str = Field(
        "./artifacts",
        description="where the local copy is written when dest is s3://",
        json_schema_extra={"position": 3},
    )
    seed: int = Field(
        1, ge=0, description="one seed for every random choice", json_schema_extra={"position": 4}
    )
    script: str = Field(
        "coding-session",
        description="built-in script name or YAML path",
        json_schema_extra={"position": 5},
    )
    think_scale: float = Field(
        1.0, ge=0, description="multiplies every think time", json_schema_extra={"position": 6}
    )
    hold_minutes: float = Field(
        60.0, gt=0, description="hold at the first level", json_schema_extra={"position": 7}
    )
    window_seconds: float = Field(
        600.0, gt=0, description="each window is judged alone", json_schema_extra={"position": 8}
    )
    levels: list[float] = Field(
        default_factory=lambda: [1.0],
        min_length=1,
        description="ramp of load multipliers",
        json_schema_extra={"position": 9},
    )
    ramp_minutes: float | None = Field(
        None,
        gt=0,
        description="hold at each level after the first (default: hold_minutes)",
        json_schema_extra={"position": 10},
    )
    thresholds: list[str] = Field(
        default_factory=lambda: list(DEFAULT_THRESHOLDS),
        description="judged per window, e.g. 'TimeToWake: p99 < 2s'",
        json_schema_extra={"position": 11},
    )
    baseline: str | None = Field(
        None,
        description="earlier run (directory or s3:// prefix) to compare against",
        json_schema_extra={"position": 12},
    )
    max_regression: float = Field(
        0.2,
        ge=0,
        description="allowed headline change vs baseline",
        json_schema_extra={"position": 13},
    )
    target: TargetParams = Field(default_factory=TargetParams)
    population: PopulationParams = Field(default_factory=PopulationParams)
    abort: AbortParams = Field(default_factory=AbortParams)
    upload: UploadParams = Field(default_factory=UploadParams)
    metrics_port: int | None = Field(None, ge=0, le=65535, description="serve /metrics here")

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: list[float]) -> list[float]:
        for i, level in enumerate(value):
            if not (level > 0 and math.isfinite(level)):
                raise ValueError(f"levels[{i}] = {level}: must be a positive multiplier")
        return value

    @field_validator("script")
    @classmethod
    def _script(cls, value: str) -> str:
        from agentsession_core.script import ScriptError, load_script

        try:
            load_script(value)
        except ScriptError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("dest")
    @classmethod
    def _dest(cls, value: str) -> str:
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
        self.windows_per_hold()
        self.windows_per_ramp_level()
        self.parsed_thresholds()
        self.parsed_abort_rules()
        self.to_run_params()
        return self

    # ------------------------------------------------------------ the hold, in windows
    def windows_per_hold(self) -> int:
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

    # ------------------------------------------------------------ the engine's view
    @property
    def is_s3(self) -> bool:
        return self.dest.startswith("s3://")

    @property
    def local_root(self) -> str:
        """Where the run directory is written first (dest itself when it is local)."""
        return self.local_dir if self.is_s3 else self.dest

    def to_run_params(self) -> RunParams:
        t, p = self.target, self.population
        values = {
            "substrate": t.substrate,
            "router": t.router,
            "token": t.token,
            "template": t.template,
            "local_workers": t.local_workers,
            "request_timeout": t.request_timeout_seconds,
            "script": self.script,
            "population": p.kind,
            "sessions": p.sessions,
            "spawn_rate": p.spawn_rate,
            "awake": p.awake,
            "target_rps": p.target_rps,
            "registration_quiet": p.registration_quiet_seconds,
            "fill_concurrency": p.fill_concurrency,
            "turns_per_hour": p.turns_per_hour,
            "turn_mean": p.turn_mean_seconds,
            "resume_mode": p.resume_mode,
            "lifecycle_mode": p.lifecycle_mode,
            "think_scale": self.think_scale,
            "hold": self.hold_seconds,
            "seed": self.seed,
            "name": self.name,
            "tag": self.tag,
            "out": self.local_root,
            "metrics_port": self.metrics_port,
        }
        try:
            return RunParams(**values)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            where = _CAMPAIGN_FIELD.get(field, field or "population")
            message = first["msg"].removeprefix("Value error, ")
            raise ValueError(f"{where}: {message}") from None


# RunParams field → the CampaignParams path a user sets.
_CAMPAIGN_FIELD = {
    "substrate": "target.substrate",
    "router": "target.router",
    "token": "target.token",
    "template": "target.template",
    "local_workers": "target.local_workers",
    "request_timeout": "target.request_timeout_seconds",
    "population": "population.kind",
    "sessions": "population.sessions",
    "spawn_rate": "population.spawn_rate",
    "awake": "population.awake",
    "target_rps": "population.target_rps",
    "registration_quiet": "population.registration_quiet_seconds",
    "fill_concurrency": "population.fill_concurrency",
    "turns_per_hour": "population.turns_per_hour",
    "turn_mean": "population.turn_mean_seconds",
    "out": "local_dir",
}


def _whole_windows(minutes: float, field: str, window_seconds: float) -> int:
    exact = minutes * 60.0 / window_seconds
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


# ---------------------------------------------------------------- building one
def parse_campaign(values: dict[str, Any], *, source: str = "parameters") -> CampaignParams:
    """Validate, turning pydantic's report into one line that names the parameter."""
    try:
        return CampaignParams.model_validate(values)
    except ValidationError as exc:
        raise UsageError(f"{source}: {describe(exc)}") from None


def describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    return f"parameter {where}: {message}" if where else message


def load_values(path: str | Path) -> dict[str, Any]:
    """A YAML (or JSON) mapping of CampaignParams fields."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}{line}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: must be a mapping of campaign parameters")
    return data


def preset_names() -> list[str]:
    if not PRESET_DIR.is_dir():
        return []
    return sorted({p.stem for p in PRESET_DIR.iterdir() if p.suffix in (".yaml", ".yml")})


def preset_path(name: str) -> Path:
    for suffix in (".yaml", ".yml"):
        path = PRESET_DIR / f"{name}{suffix}"
        if path.is_file():
            return path
    raise UsageError(f"preset {name!r}: unknown (presets: {', '.join(preset_names()) or 'none'})")


def load_preset(name: str) -> CampaignParams:
    path = preset_path(name)
    return parse_campaign(load_values(path), source=str(path))


def apply_settings(values: dict[str, Any], settings: Iterable[str]) -> dict[str, Any]:
    """`key.path=value` assignments (the value read as YAML) onto a copy of `values`."""
    out = _deep_copy(values)
    for setting in settings:
        key, sep, raw = setting.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--set {setting!r}: expected KEY=VALUE (e.g. hold_minutes=0.5)")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            value = raw
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise UsageError(f"--set {key}: {part!r} is not a group of parameters")
            node = child
        node[parts[-1]] = value
    return out


def _deep_copy(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, dict) else v for k, v in values.items()}
