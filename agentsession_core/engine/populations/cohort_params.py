"""CohortParams: what a cohort population (spawn, burst) shares (docs/SPEC.md §4.5, §4.6):
how often a cohort starts, its deadline and the k % marks it books."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from agentsession_core.engine.param_types import MAX_WAIT_S, Seconds
from agentsession_core.engine.populations.base_params import PopulationParams

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


class CohortParams(PopulationParams):
    """A cohort's period, deadline and marks; spawn_params.py and burst_params.py add their
    kind."""

    cohort_period_seconds: Seconds = Field(
        10.0,
        gt=0,
        le=MAX_WAIT_S,
        description="a cohort starts every this long (never while the last one runs)",
    )
    cohort_deadline_seconds: Seconds = Field(
        60.0,
        gt=0,
        le=MAX_WAIT_S,
        description="an actor not ready (resumed, suspended) this long after its cohort's "
        "start failed",
    )
    cohort_percentiles: Annotated[list[int], BeforeValidator(_percent_list)] = Field(
        default_factory=lambda: list(DEFAULT_COHORT_PERCENTILES),
        description="the k of the TimeToReady_<k>pct, TimeToFirstResume_<k>pct and "
        "TimeToSuspend_<k>pct rows (comma-separated, each 1-99)",
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

    @property
    def cohorts(self) -> bool:
        return True
