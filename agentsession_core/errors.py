"""The package's error base: every error a user can cause derives from it.

The CLI prints an AgentsessionError as one line and exits with its exit_code; anything
else is a bug and keeps its traceback.
"""

import reprlib


class AgentsessionError(Exception):
    """A user-facing error whose message names the place (file, step, op, parameter)."""

    exit_code = 1


class UsageError(AgentsessionError):
    """Bad command-line arguments or parameters."""

    exit_code = 2


class PreflightError(AgentsessionError):
    """The run cannot start against this substrate; no actor was created. A run ends
    `refused` with it (run/run.py `Run.refuse`). Defined here, below every layer, so
    that a lower layer can refuse a run too (measure/prometheus.py: a metrics port in use);
    engine/engine.py, where preflight raises it, re-exports it."""


# A bad value goes into a one-line message; these keep the line short and, above all, cheap:
# reprlib never renders more than a few items per level, so a YAML alias bomb (a list of
# lists of ... sharing 10^9 leaves) is shown in microseconds instead of hanging the process.
_CLIP = reprlib.Repr()
_CLIP.maxlevel = 2
_CLIP.maxlist = _CLIP.maxtuple = _CLIP.maxdict = _CLIP.maxset = 4
_CLIP.maxstring = _CLIP.maxother = 60
_CLIP.maxlong = 40
# Python refuses to turn an int of more than 4300 digits into text (sys.int_info).
_MAX_INT_BITS = 4000


def clip(value: object, limit: int = 80) -> str:
    """A bounded repr of a user's value for an error message: at most `limit` characters,
    one line, computed without ever rendering the whole value."""
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    try:
        text = _CLIP.repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An error's text as one line of at most `limit` characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
