"""BurstParams: a burst's settings (docs/SPEC.md §4.6): cohorts of parked actors woken at
once, then parked again."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from agentsession_core.engine.param_types import Flag
from agentsession_core.engine.populations.cohort_params import CohortParams


class BurstParams(CohortParams):
    """Each cohort wakes its sessions' parked actors together and parks them again."""

    model_config = ConfigDict(title="burst")

    kind: Annotated[Literal["burst"], Flag("--population")] = Field(
        "burst", description="population"
    )

    @model_validator(mode="after")
    def _parks(self) -> BurstParams:
        self.parks_required()
        return self
