"""Reading a gate.json written elsewhere (docs/SPEC.md §6.1): validating it against its model,
judge/gate_document.py's `GateDocument`, before anything is decided from it. A file that is
not a gate document (a field of the wrong type, a verdict or outcome not known, a figure
without its value, a number that is not finite) is refused in one line naming the file and
the field's path: GateInputError, the gate's exit 2.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from agentsession_core.errors import clip
from agentsession_core.judge.gate_document import GateDocument, Outcome, Verdict
from agentsession_core.output.run_reader import RunReadError


class GateInputError(RunReadError):
    """A run that cannot be gated (missing, unreadable or unverifiable files): exit 2."""


VERDICTS: tuple[str, ...] = get_args(Verdict)
OUTCOMES: tuple[str, ...] = get_args(Outcome)

# What a field should have been, by pydantic's error type (a custom error says it itself).
_WANTED = {
    "int_type": "a whole number",
    "float_type": "a number",
    "finite_number": "a finite number",
    "string_type": "text",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "too_short": "a [low, high] pair",
    "too_long": "a [low, high] pair",
}


def check_gate(doc: dict[str, Any], place: str) -> dict[str, Any]:
    """`doc` itself when it is a gate document (judge/gate_document.py `GateDocument`);
    otherwise a GateInputError naming the first field that is wrong, in one line:
    `PLACE: windows[0].outcome is 'maybe', not pass, break, void or aborted (not a gate
    document)`. What the model declares is what the verdict, the comparison, the report
    and history read, so a document that passes cannot make any of them fail halfway."""
    try:
        GateDocument.model_validate(doc)
    except ValidationError as exc:
        raise GateInputError(_line(place, exc.errors()[0])) from None
    return doc


def _line(place: str, error: ErrorDetails) -> str:
    field = _path(error["loc"])
    if error["type"] == "missing":
        return f"{place}: {field} is missing (not a gate document)"
    return f"{place}: {field} is {clip(error['input'])}, not {_wanted(error)} (not a gate document)"


def _path(loc: tuple[int | str, ...]) -> str:
    """('windows', 0, 'outcome') → windows[0].outcome; a map's key as it is
    (figures.TimeToWake.p50.value)."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f"{'.' if text else ''}{part}"
    return text or "the document"


def _wanted(error: ErrorDetails) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "literal_error":
        return str(ctx.get("expected", "")).replace("'", "")
    if kind in _WANTED:
        return _WANTED[kind]
    # A custom error's own words ("a fraction in (0, 1)"), or pydantic's.
    return error["msg"].removeprefix("Input should be ")


__all__ = ["OUTCOMES", "VERDICTS", "GateInputError", "check_gate"]
