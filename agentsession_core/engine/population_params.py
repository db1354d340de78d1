"""PopulationParams: who wakes when (docs/SPEC.md §4), a section of RunParams (params.py).

One model for every kind (closed, turnover, turns, the cohorts spawn and burst, and
cold-resume); only the fields of the chosen kind matter, and each rule that ties fields
together lives here.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentsession_core.engine.param_types import (
    MAX_CONCURRENCY,
    MAX_RATE,
    MAX_SESSIONS,
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
    WakeProbe,
)

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
        1.0,
        ge=0,
        le=MAX_RATE,
        description="turnover: swaps per second at 1x; cold-resume: resumes per second at 1x",
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
    park_check_share: Number = Field(
        0.01,
        ge=0,
        le=1,
        description="implicit resume: the share of parks read back with GetActor (off the "
        "wake path, seeded) to find suspends that did not happen (NOT_SUSPENDED); 0: none",
    )
    wake_probe: WakeProbe = Field(
        "ping",
        description="ping: a wake ends at the first router request's answer; none: at "
        "ResumeActor's answer, and no request goes through the router (no first touch, no "
        "step): the control plane alone (needs resume_mode explicit)",
    )
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
        description="turnover, cold-resume: tick = a second's swaps start together on the tick; "
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

    @model_validator(mode="after")
    def _probe(self) -> PopulationParams:
        """What wake_probe none cannot do: every scripted op, and a first touch, goes through
        the router it leaves alone (docs/SPEC.md §3)."""
        if self.wake_probe == "ping":
            return self
        if self.resume_mode != "explicit":
            raise ValueError(
                "population.wake_probe none: the wake is ResumeActor alone; set "
                "population.resume_mode explicit (implicit wakes by a router request)"
            )
        if self.lifecycle_mode == "none":
            raise ValueError(
                "population.wake_probe none: lifecycle_mode none parks nothing, so nothing "
                "is ever resumed (use suspend, suspend-async or pause)"
            )
        if self.kind == "spawn":
            raise ValueError(
                "population.wake_probe none: a spawn actor is ready when its first step "
                "succeeds, which goes through the router (use wake_probe ping)"
            )
        return self

    @model_validator(mode="after")
    def _cold_resume_parks(self) -> PopulationParams:
        if self.kind == "cold-resume" and self.lifecycle_mode == "none":
            raise ValueError(
                "population.kind cold-resume resumes suspended actors and suspends them "
                "again: lifecycle_mode none parks nothing (use suspend, suspend-async or pause)"
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
            "cold-resume": self.target_rps,
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
