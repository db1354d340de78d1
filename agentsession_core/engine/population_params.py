"""The population section of RunParams (docs/SPEC.md §4): one model per kind, joined on
`kind`.

Each kind's model sits beside its code in engine/populations/ (`*_params.py`) with only the
fields that kind reads; the fields every kind shares, and the refusal of another kind's
field in one line naming the field and the kind (`population.target_rps: spawn has no
target_rps (it is turnover's, cold-resume's)`), are PopulationParams'
(populations/base_params.py). `kind` left out is closed (a campaign fills in its own
defaults first: campaign/sections.py).
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator, Field, TypeAdapter

from agentsession_core.engine.populations.base_params import (
    POPULATION_FIELD,
    PopulationParams,
    owners,
    unknown_kind,
)
from agentsession_core.engine.populations.burst_params import BurstParams
from agentsession_core.engine.populations.closed_params import ClosedParams
from agentsession_core.engine.populations.cohort_params import (
    DEFAULT_COHORT_PERCENTILES,
    MAX_COHORT_PERCENTILES,
    CohortParams,
)
from agentsession_core.engine.populations.cold_resume_params import ColdResumeParams
from agentsession_core.engine.populations.spawn_params import SpawnParams
from agentsession_core.engine.populations.turnover_params import TurnoverParams
from agentsession_core.engine.populations.turns_params import TurnsParams

__all__ = [
    "DEFAULT_COHORT_PERCENTILES",
    "DEFAULT_KIND",
    "KIND_PARAMS",
    "MAX_COHORT_PERCENTILES",
    "POPULATION_FIELD",
    "AnyPopulation",
    "BurstParams",
    "ClosedParams",
    "CohortParams",
    "ColdResumeParams",
    "Population",
    "PopulationParams",
    "SpawnParams",
    "TurnoverParams",
    "TurnsParams",
    "owners",
    "population_of",
    "settings_of",
    "with_kind_switched",
]

P = TypeVar("P", bound=PopulationParams)

KIND_PARAMS = PopulationParams.kinds  # every kind's model, by kind
DEFAULT_KIND = "closed"


def _kind(value: Any) -> Any:
    """The population as given, its `kind` filled in when left out; an unknown kind is
    refused naming the kinds."""
    if not isinstance(value, dict):
        return value
    kind = value.get("kind", DEFAULT_KIND)
    if not isinstance(kind, str) or kind not in KIND_PARAMS:
        raise unknown_kind(kind)
    return value if "kind" in value else {**value, "kind": kind}


AnyPopulation = (
    ClosedParams | TurnoverParams | TurnsParams | SpawnParams | BurstParams | ColdResumeParams
)
Population = Annotated[
    AnyPopulation,
    Field(discriminator="kind"),
    BeforeValidator(_kind),
]

_ADAPTER: TypeAdapter[Population] = TypeAdapter(Population)


def population_of(values: dict[str, Any]) -> AnyPopulation:  # the union's own type
    """The kind's model built from `values` (`kind` left out: closed)."""
    return _ADAPTER.validate_python(values)


def settings_of(population: PopulationParams, model: type[P]) -> P:
    """`population` as its kind's model: what a population's code reads its fields from."""
    if not isinstance(population, model):
        raise TypeError(f"a {population.kind} population is not {model.__name__}")
    return population


def with_kind_switched(population: Any, base: Any, given: Any) -> Any:
    """`population` (a file's `base` with the command line's `given` on top) when the command
    line changed its kind: the file's fields of the old kind are left behind, since the file
    chose them for that kind; a field given on the command line stays, for the model to
    refuse if the new kind has none."""
    if not (isinstance(population, dict) and isinstance(base, dict) and isinstance(given, dict)):
        return population
    kind = population.get("kind")
    if "kind" not in given or kind == base.get("kind", kind):
        return population
    model = KIND_PARAMS.get(kind) if isinstance(kind, str) else None
    if model is None:
        return population
    return {
        name: value
        for name, value in population.items()
        if name in given or name in model.model_fields or not owners(name)
    }
