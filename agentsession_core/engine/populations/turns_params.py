"""TurnsParams: turns' settings (docs/SPEC.md §4.3): how often a session's turn arrives and
how long it lasts."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from agentsession_core.engine.param_types import (
    MAX_TURNS_PER_HOUR,
    MAX_WAIT_S,
    Flag,
    Number,
    Seconds,
)
from agentsession_core.engine.populations.base_params import PopulationParams


class TurnsParams(PopulationParams):
    """Each session's turns arrive at random (Poisson), each lasting about turn_mean_seconds."""

    model_config = ConfigDict(title="turns")

    kind: Annotated[Literal["turns"], Flag("--population")] = Field(
        "turns", description="population"
    )
    turns_per_hour: Number = Field(
        6.0, gt=0, le=MAX_TURNS_PER_HOUR, description="per session at 1x"
    )
    turn_mean_seconds: Annotated[Seconds, Flag("--turn-mean-seconds", "--turn-mean")] = Field(
        60.0, gt=0, le=MAX_WAIT_S, description="mean turn length"
    )

    @property
    def level(self) -> float:
        return self.turns_per_hour
