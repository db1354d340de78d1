"""ClosedParams: a closed loop's settings (docs/SPEC.md §4.1): the shared ones alone."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from agentsession_core.engine.param_types import Flag
from agentsession_core.engine.populations.base_params import PopulationParams


class ClosedParams(PopulationParams):
    """Every session wakes, steps, thinks and parks in a loop; the level is its sessions."""

    model_config = ConfigDict(title="closed")

    kind: Annotated[Literal["closed"], Flag("--population")] = Field(
        "closed", description="population"
    )
