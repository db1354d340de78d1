"""The building blocks of the parameter models (engine/params.py, engine/server_params.py,
campaign/params.py): the float and seconds types, the CLI's Flag metadata, the Prefect form's
position, and Section, the base of every group of parameters. params.py re-exports them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AllowInfNan, BaseModel, BeforeValidator, ConfigDict
from pydantic.json_schema import JsonDict

from agentsession_core.script.quantity import QuantityError, parse_duration, seconds


def _duration(value: Any) -> Any:
    """A duration string ("2s", "1h30m") in seconds; numbers (and numeric text) pass on."""
    if not isinstance(value, str):
        return value
    try:
        float(value)
    except ValueError:
        pass
    else:
        return value  # "2.5", "inf": the float rules decide
    try:
        return seconds(parse_duration(value.strip()))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


# The one float type: inf and nan are refused everywhere.
Number = Annotated[float, AllowInfNan(False)]
# Seconds, also given as a Go duration string (DURATION marks such fields for the CLI).
DURATION = BeforeValidator(_duration)
Seconds = Annotated[Number, DURATION]


class Flag:
    """Field metadata for the generated CLI: the flag spellings of a field whose name alone
    would not say enough, or that keeps a historical spelling (the first one is its name)."""

    __slots__ = ("names",)

    def __init__(self, *names: str) -> None:
        self.names = names

    def __repr__(self) -> str:
        return f"Flag{self.names!r}"


def form_position(position: int) -> JsonDict:
    """Where the Prefect UI form shows a field (json_schema_extra)."""
    return {"position": position}


class Section(BaseModel):
    """A group of parameters: unknown keys are refused, assignment is validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
