"""Byte sizes as Kubernetes quantities and durations as Go durations, both directions.

A bad value is shown clipped (`clip`): these messages get whatever a YAML file or a flag
held, and formatting an alias bomb in full never ends (issue #11).

Sizes parse to whole bytes (int). Durations parse to whole nanoseconds (int): exact, so a
script survives encode/decode unchanged and two thinks compare without float noise. Use
`seconds(ns)` where a float is wanted.
"""

from __future__ import annotations

import re
from fractions import Fraction

from agentsession_core.errors import AgentsessionError, clip

# Kubernetes allows int64 quantities; a bigger size is a typo, not a plan.
MAX_BYTES = 2**63 - 1
# Go durations are int64 nanoseconds (about 292 years).
MAX_NS = 2**63 - 1
# Keeps `1e999999999` from making Python build a giant integer before we can reject it.
_MAX_EXPONENT = 30
# No real size or duration is this long; a longer one would make a giant Fraction (and Python
# refuses to read an integer of over 4300 digits).
_MAX_TEXT = 100

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<unit>Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)|[eE](?P<exponent>[+-]?[0-9]+))?"
)

_DURATION_UNITS = {
    "ns": 1,
    "us": 10**3,
    "µs": 10**3,  # U+00B5 micro sign, what Go prints
    "μs": 10**3,  # U+03BC Greek mu, which Go also accepts
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)([^0-9.]*)")


class QuantityError(AgentsessionError, ValueError):
    """A size or duration that does not parse; the caller adds the place."""


def parse_quantity(text: str | int) -> int:
    """A Kubernetes quantity (`32Mi`, `1G`, `1e6`, `1048576`) as a positive whole number of
    bytes. Plain ints are bytes. Floats and bools are refused: they are lossy or mistakes."""
    if isinstance(text, bool) or not isinstance(text, int | str):
        raise QuantityError(
            f"expected a size (integer bytes or a quantity like 32Mi), got "
            f"{type(text).__name__} {clip(text)}"
        )
    if isinstance(text, int):
        value = Fraction(text)
    elif len(text) > _MAX_TEXT:
        raise QuantityError(f"bad size {clip(text)}: {len(text)} characters is too long")
    else:
        match = _QUANTITY.fullmatch(text)
        if match is None:
            raise QuantityError(
                f"bad size {clip(text)}: expected a number with an optional unit "
                f"(Ki Mi Gi Ti Pi Ei, k M G T P E) or exponent (1e6)"
            )
        value = Fraction(match["number"])
        if match["unit"]:
            unit = match["unit"]
            value *= _BINARY.get(unit) or _DECIMAL[unit]
        elif match["exponent"]:
            exponent = int(match["exponent"])
            if abs(exponent) > _MAX_EXPONENT:
                raise QuantityError(f"bad size {clip(text)}: exponent {exponent} is out of range")
            value *= Fraction(10) ** exponent
        if match["sign"] == "-":
            value = -value
    if value <= 0:
        raise QuantityError(f"size {clip(text)} must be positive")
    if value.denominator != 1:
        raise QuantityError(f"size {clip(text)} is not a whole number of bytes ({float(value):g})")
    if value > MAX_BYTES:
        raise QuantityError(f"size {clip(text)} is too large (over 2^63-1 bytes)")
    return int(value)


def format_quantity(size: int) -> str:
    """The canonical form: the largest binary unit that divides exactly, else plain bytes."""
    if size > 0:
        for unit, scale in reversed(_BINARY.items()):
            if size % scale == 0:
                return f"{size // scale}{unit}"
    return str(size)


def parse_duration(text: str) -> int:
    """A Go duration (`500ms`, `1.5s`, `1h30m`, `-2s`, `0`) as whole nanoseconds.

    The sign is kept so the caller can say *which* rule a negative value breaks. Unlike
    Go, a value finer than a nanosecond is refused rather than truncated."""
    if isinstance(text, bool) or not isinstance(text, str):
        raise QuantityError(
            f"expected a duration string like 2s or 500ms, got {type(text).__name__} {clip(text)}"
        )
    if len(text) > _MAX_TEXT:
        raise QuantityError(f"bad duration {clip(text)}: {len(text)} characters is too long")
    body = text
    sign = 1
    if body and body[0] in "+-":
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body == "0":
        return 0
    if not body:
        raise QuantityError(f"bad duration {clip(text)}: empty")
    total = Fraction(0)
    pos = 0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        assert match is not None  # the pattern matches the empty string
        number, unit = match.groups()
        if not number.strip("."):
            raise QuantityError(
                f"bad duration {clip(text)}: expected a number at {clip(body[pos:])}"
            )
        if not unit:
            raise QuantityError(
                f"bad duration {clip(text)}: missing unit after {number} (ns us µs ms s m h)"
            )
        if unit not in _DURATION_UNITS:
            raise QuantityError(
                f"bad duration {clip(text)}: unknown unit {clip(unit)} (ns us µs ms s m h)"
            )
        total += Fraction(number.rstrip(".") or "0") * _DURATION_UNITS[unit]
        pos = match.end()
    if total.denominator != 1:
        raise QuantityError(f"bad duration {clip(text)}: finer than one nanosecond")
    if total > MAX_NS:
        raise QuantityError(f"bad duration {clip(text)}: too long (over 2^63-1 ns)")
    return sign * int(total)


def format_duration(ns: int) -> str:
    """Go's `Duration.String()`: `2s`, `500ms`, `1.5s`, `1m30s`, `55m0s`, `1h0m0s`."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    magnitude = abs(ns)
    if magnitude < 10**9:
        for unit, scale in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if magnitude >= scale:
                return f"{sign}{_decimal(magnitude, scale)}{unit}"
    hours, rest = divmod(magnitude, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = f"{hours}h" if hours else ""
    if hours or minutes:
        text += f"{minutes}m"
    return f"{sign}{text}{_decimal(rest, 10**9)}s"


def seconds(ns: int) -> float:
    return ns / 1e9


def _decimal(value: int, scale: int) -> str:
    whole, fraction = divmod(value, scale)
    if not fraction:
        return str(whole)
    digits = str(fraction).rjust(len(str(scale)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
