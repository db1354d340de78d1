"""The building blocks of the parameter models (engine/params.py, engine/server_params.py,
campaign/params.py): bounds, the number, duration and size types, the CLI's flag marker, the
Prefect form's position and the section base. params.py re-exports them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AllowInfNan, BaseModel, BeforeValidator, ConfigDict
from pydantic.json_schema import JsonDict

from agentsession_core.errors import clip
from agentsession_core.script.quantity import (
    QuantityError,
    parse_duration,
    parse_quantity,
    seconds,
)

PopulationKind = Literal["closed", "turnover", "turns", "spawn", "burst", "cold-resume"]
LifecycleMode = Literal["suspend", "suspend-async", "pause", "none"]
ResumeMode = Literal["implicit", "explicit"]
SwapPacing = Literal["tick", "even"]
WakeProbe = Literal["ping", "none"]
WireForm = Literal["ate", "json"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")

# Upper bounds (issue #11, docs/SPEC.md §6). A value past one is a typo or a hostile file, not a
# plan, and each keeps a run's arithmetic, memory and duration finite: an `inf` or 1e7 must be
# refused here, in one line, not found later as a dead ticker or a hang (the generated
# parameter reference, docs/reference/parameters.md, lists them).
MAX_SESSIONS = 1_000_000
MAX_RATE = 100_000.0  # swaps or session starts per second
MAX_THINK_SCALE = 1000.0
MAX_TURNS_PER_HOUR = 360_000.0  # a hundred turns a second per session
MAX_CONCURRENCY = 10_000
MAX_WAIT_S = 86_400.0  # a timeout, a quiet period, a turn: one day
MAX_SEED = 2**64 - 1  # shards derive 64-bit seeds from it
MAX_TEXT = 4096  # paths, URLs, tokens
MAX_NAME = 63  # name and tag: directory names in the artifact path
MAX_ANSWER_BYTES = 16 * 1024**3  # the router answer cap: one answer held in memory
MIN_ANSWER_BYTES = 1024  # below this even an error answer's body would not fit
_SCHEDULER = re.compile(r"^(tcp|tls)://[^\s/]+:\d+$")
_TEMPLATE = re.compile(r"^[a-z0-9][a-z0-9.-]*/[a-z0-9][a-z0-9.-]*$")


def _duration(value: Any) -> Any:
    """A duration string ("2s", "1h30m") in seconds; numbers (and numeric text) pass on."""
    if not isinstance(value, str):
        return value
    if len(value) > 100:  # no duration is this long; never parse or echo a huge one
        raise ValueError(f"{clip(value)}: {len(value)} characters is not a duration")
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


def _size(value: Any) -> Any:
    """A size given as a quantity ("64Mi", "1G") in bytes; other values pass on to the int
    rules."""
    if not isinstance(value, str):
        return value
    try:
        return parse_quantity(value.strip())
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


# The one float type: inf and nan are refused everywhere.
Number = Annotated[float, AllowInfNan(False)]
# Seconds, also given as a Go duration string (DURATION marks such fields for the CLI).
DURATION = BeforeValidator(_duration)
Seconds = Annotated[Number, DURATION]
# Seconds that may be left out (None: a default computed from other fields).
OptionalSeconds = Annotated[float | None, AllowInfNan(False), DURATION]
# Bytes, also given as a quantity, as sizes in scripts are (docs/SPEC.md §1.2; SIZE marks
# such fields for the generated parameter reference).
SIZE = BeforeValidator(_size)
Bytes = Annotated[int, SIZE]


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


def union_form_position(position: int) -> Callable[[JsonDict], None]:
    """form_position for a field that is one of several models (the population's kinds):
    their schemas as `anyOf`, the union the Prefect UI's form offers as a choice (pydantic
    writes a discriminated union as `oneOf`, which its older form does not show)."""

    def extra(schema: JsonDict) -> None:
        schema["position"] = position
        if "oneOf" in schema:
            schema["anyOf"] = schema.pop("oneOf")

    return extra


class Section(BaseModel):
    """A group of parameters: unknown keys are refused, assignment is validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
