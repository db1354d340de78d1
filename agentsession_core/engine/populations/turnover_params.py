"""TurnoverParams: a turnover's settings (docs/SPEC.md §4.2): the resident set, the swap
rate, the fill and the catch-up."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from agentsession_core.engine.param_types import (
    MAX_CONCURRENCY,
    MAX_RATE,
    MAX_SESSIONS,
    Flag,
    Number,
    OptionalSeconds,
    SwapPacing,
)
from agentsession_core.engine.populations.base_params import PopulationParams


class TurnoverParams(PopulationParams):
    """`awake` sessions resident; `target_rps` times a second the longest-idle one is parked
    and the longest-parked one woken."""

    model_config = ConfigDict(title="turnover")

    kind: Annotated[Literal["turnover"], Flag("--population")] = Field(
        "turnover", description="population"
    )
    awake: int = Field(
        0, ge=0, le=MAX_SESSIONS, description="sessions kept resident (at most sessions)"
    )
    target_rps: Number = Field(1.0, ge=0, le=MAX_RATE, description="swaps per second at 1x")
    fill_concurrency: int = Field(8, ge=1, le=MAX_CONCURRENCY, description="concurrent fill wakes")
    fill_deadline_seconds: OptionalSeconds = Field(
        None,
        gt=0,
        description="the fill stops retrying after this long "
        "(default: ceil(awake / fill_concurrency) x 10 s + 60 s)",
    )
    catch_up_ratio: Number = Field(
        0.5,
        gt=0,
        description="wakes owed to the resident set per tick, at most "
        "max(1, ceil(ratio x swaps per tick))",
    )
    swap_pacing: SwapPacing = Field(
        "tick",
        description="tick = the second's starts go together on the tick; even = spread evenly "
        "over the second, each from its own intended time",
    )

    @field_validator("awake")
    @classmethod
    def _awake(cls, value: int, info: ValidationInfo) -> int:
        sessions = info.data.get("sessions")  # a shared field: validated before awake
        if sessions is not None and value > sessions:
            raise ValueError(f"awake ({value}) exceeds sessions ({sessions})")
        return value

    @property
    def level(self) -> float:
        return self.target_rps

    def fill_deadline(self) -> float:
        """Seconds the fill may take (docs/SPEC.md §4.2): ten seconds per round of
        fill_concurrency wakes, plus a minute."""
        if self.fill_deadline_seconds is not None:
            return self.fill_deadline_seconds
        return math.ceil(self.awake / self.fill_concurrency) * 10.0 + 60.0
