"""ColdResumeParams: a cold resume's settings (docs/SPEC.md §4.7): the fleet of suspended
actors resumed at a rate."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from agentsession_core.engine.param_types import MAX_RATE, Flag, Number, SwapPacing
from agentsession_core.engine.populations.base_params import PopulationParams


class ColdResumeParams(PopulationParams):
    """`target_rps` times a second a suspended actor is resumed, and suspended again."""

    model_config = ConfigDict(title="cold-resume")

    kind: Annotated[Literal["cold-resume"], Flag("--population")] = Field(
        "cold-resume", description="population"
    )
    target_rps: Number = Field(1.0, ge=0, le=MAX_RATE, description="resumes per second at 1x")
    swap_pacing: SwapPacing = Field(
        "tick",
        description="tick = the second's starts go together on the tick; even = spread evenly "
        "over the second, each from its own intended time",
    )

    @model_validator(mode="after")
    def _parks(self) -> ColdResumeParams:
        self.parks_required()
        return self

    @property
    def level(self) -> float:
        return self.target_rps
