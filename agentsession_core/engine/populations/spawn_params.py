"""SpawnParams: a spawn's settings (docs/SPEC.md §4.5): cohorts of new actors, created at
spawn_rate or all at once."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from agentsession_core.engine.param_types import Flag
from agentsession_core.engine.populations.cohort_params import CohortParams


class SpawnParams(CohortParams):
    """Each cohort creates its actors until ready (first step done), then deletes them."""

    model_config = ConfigDict(title="spawn")

    kind: Annotated[Literal["spawn"], Flag("--population")] = Field(
        "spawn", description="population"
    )
    at_once: bool = Field(
        False, description="a cohort's CreateActors all go at its start (spawn_rate unused)"
    )

    @model_validator(mode="after")
    def _ready_through_the_router(self) -> SpawnParams:
        if self.wake_probe == "none":
            raise ValueError(
                "population.wake_probe none: a spawn actor is ready when its first step "
                "succeeds, which goes through the router (use wake_probe ping)"
            )
        return self
