"""Reading a gate.json written elsewhere (docs/SPEC.md §6.1): its schema, checked before anything
is decided from it. A file that is not a gate document (a field of the wrong type, a verdict
or outcome not known, a figure without its numbers) is refused in one line naming the file
and the field: GateInputError, the gate's exit 2.
"""

from __future__ import annotations

import math
from typing import Any

from agentsession_core.errors import clip
from agentsession_core.output.run_reader import RunReadError


class GateInputError(RunReadError):
    """A run that cannot be gated (missing, unreadable or unverifiable files): exit 2."""


VERDICTS = ("pass", "fail", "void")
OUTCOMES = ("pass", "break", "void", "aborted")
_FIGURE_NUMBERS = ("value", "low", "high", "se_log")
_FIGURE_COUNTS = ("n", "beyond", "blocks")


def _is_number(value: Any) -> bool:
    # orjson, the one parser of a stored run, already refuses NaN and Infinity.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _bad(place: str, field: str, value: Any, wanted: str) -> GateInputError:
    return GateInputError(f"{place}: {field} is {clip(value)}, not {wanted} (not a gate document)")


def check_gate(doc: dict[str, Any], place: str) -> dict[str, Any]:
    """`doc` when it has gate.json's shape (docs/SPEC.md §6) as far as anything here reads
    it; otherwise a GateInputError naming the first field that is wrong. What it checks is
    what the verdict, the comparison, the report and history use, so a document that passes
    cannot make any of them fail halfway."""
    if doc.get("verdict") not in VERDICTS:
        raise _bad(place, "verdict", doc.get("verdict"), "pass, fail or void")
    windows = doc.get("windows")
    if not isinstance(windows, list):
        raise _bad(place, "windows", windows, "a list")
    for i, w in enumerate(windows):
        if not isinstance(w, dict):
            raise _bad(place, f"windows[{i}]", w, "an object")
        if w.get("outcome") not in OUTCOMES:
            raise _bad(place, f"windows[{i}].outcome", w.get("outcome"), "pass/break/void/aborted")
        if not isinstance(w.get("index"), int) or isinstance(w.get("index"), bool):
            raise _bad(place, f"windows[{i}].index", w.get("index"), "a whole number")
        missed = w.get("missed")
        if missed is not None and not (
            isinstance(missed, list) and all(isinstance(m, str) for m in missed)
        ):
            raise _bad(place, f"windows[{i}].missed", missed, "a list of rules")
    for key in ("reason", "run_status", "abort_reason"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            raise _bad(place, key, doc[key], "text")
    for key in (
        "run",
        "ramp",
        "drift",
        "conditions",
        "baseline",
        "figures",
        "headline",
        "capacity",
        "paired",
    ):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise _bad(place, key, doc[key], "an object")
    confidence = doc.get("confidence")
    if confidence is not None and not (_is_number(confidence) and 0 < confidence < 1):
        raise _bad(place, "confidence", confidence, "a fraction in (0, 1)")
    for metric, figure in (doc.get("figures") or {}).items():
        if not isinstance(figure, dict):
            raise _bad(place, f"figures.{metric}", figure, "an object")
        for key in _FIGURE_NUMBERS + _FIGURE_COUNTS:
            value = figure.get(key)
            if value is not None and not _is_number(value):
                raise _bad(place, f"figures.{metric}.{key}", value, "a number")
    for section, values in (doc.get("headline") or {}).items():
        if not isinstance(values, dict) or not all(
            v is None or _is_number(v) for v in values.values()
        ):
            raise _bad(place, f"headline.{section}", values, "numbers")
    for section in ("baseline", "paired"):
        metrics = (doc.get(section) or {}).get("metrics", [])
        if not isinstance(metrics, list) or not all(isinstance(m, dict) for m in metrics):
            raise _bad(place, f"{section}.metrics", metrics, "a list of objects")
    _check_capacity(doc.get("capacity") or {}, place)
    return doc


def _check_capacity(capacity: dict[str, Any], place: str) -> None:
    for key in ("level", "rate", "broke_at_level", "broke_at_rate", "resolution"):
        value = capacity.get(key)
        if value is not None and not _is_number(value):
            raise _bad(place, f"capacity.{key}", value, "a number")
    probes = capacity.get("probes", [])
    if not isinstance(probes, list) or not all(
        isinstance(p, dict) and _is_number(p.get("level")) for p in probes
    ):
        raise _bad(place, "capacity.probes", probes, "a list of probes with levels")
    # The density frontier (campaign/density.py); absent in a gate.json written before it.
    density = capacity.get("density")
    if density is None:
        return
    if not isinstance(density, dict):
        raise _bad(place, "capacity.density", density, "an object")
    for key in ("frontier", "prediction", "node", "peak"):
        if density.get(key) is not None and not isinstance(density[key], dict):
            raise _bad(place, f"capacity.density.{key}", density[key], "an object")
    for key, value in (density.get("frontier") or {}).items():
        if key.startswith("actors") and value is not None and not _is_number(value):
            raise _bad(place, f"capacity.density.frontier.{key}", value, "a number")
    samples = density.get("samples", [])
    if not isinstance(samples, list) or not all(isinstance(s, dict) for s in samples):
        raise _bad(place, "capacity.density.samples", samples, "a list of objects")


__all__ = ["OUTCOMES", "VERDICTS", "GateInputError", "check_gate"]
