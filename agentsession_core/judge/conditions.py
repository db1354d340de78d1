"""What two runs must share to be compared (docs/SPEC.md §6.3): every parameter that changes
the numbers. A baseline that differs in any of them is `not comparable`, naming the fields;
parameters that only change how a run is carried out (its name, tag, seed, output place,
thresholds, timeouts, credentials) may differ.

gate.json keeps the run's own conditions (`conditions`), so a comparison needs no other file;
for an older run they are read from its campaign.json parameters.
"""

from __future__ import annotations

import math
from typing import Any

# Whatever the population kind. `script` is the one script or the whole mix, weights and all.
COMMON = (
    "script",
    "think_scale",
    "population.kind",
    "population.sessions",
    "population.resume_mode",
    "population.wake_probe",
    "population.lifecycle_mode",
    "levels",
    "window_seconds",
    "target.template",
    "wire",
)
# Fields runs did not always have, and the value a run from before them had.
LATER_FIELDS = {"population.wake_probe": "ping"}
# The rate and the resident set, by population kind (a closed population's rate is its
# sessions, already above).
BY_KIND = {
    "turnover": ("population.awake", "population.target_rps"),
    "turns": ("population.turns_per_hour", "population.turn_mean_seconds"),
    "closed": (),
    # A cohort's shape: how fast its actors are asked for, how often, and which marks.
    "spawn": (
        "population.spawn_rate",
        "population.at_once",
        "population.cohort_period_seconds",
        "population.cohort_percentiles",
    ),
    "burst": ("population.cohort_period_seconds", "population.cohort_percentiles"),
    "cold-resume": ("population.target_rps", "population.swap_pacing"),
}


def _get(params: dict[str, Any], path: str) -> Any:
    value: Any = params
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def wire(params: dict[str, Any]) -> str:
    """The wire form the run spoke: target.protocol, else the substrate URL's scheme (the
    embedded local substrate speaks json unless told)."""
    target = params.get("target") or {}
    if target.get("protocol"):
        return str(target["protocol"])
    return "ate" if str(target.get("substrate") or "").startswith("grpc") else "json"


def script_mix(value: Any) -> Any:
    """`script` as conditions compare it: a mix's weights in lowest terms ({a: 6, b: 2} and
    {a: 3, b: 1} share out sessions alike: engine/script_mix.py), its entries sorted."""
    if not isinstance(value, dict) or not all(isinstance(w, int) for w in value.values()):
        return value
    common = math.gcd(*value.values()) or 1
    return {entry: value[entry] // common for entry in sorted(value)}


def conditions(params: dict[str, Any]) -> dict[str, Any]:
    """The comparable parameters of a run, from its parameters as campaign.json holds them."""
    kind = str(_get(params, "population.kind") or "")
    out: dict[str, Any] = {}
    for path in (*COMMON, *BY_KIND.get(kind, ())):
        out[path] = wire(params) if path == "wire" else _get(params, path)
        if out[path] is None and path in LATER_FIELDS:  # a run from before the field
            out[path] = LATER_FIELDS[path]
    out["script"] = script_mix(out["script"])
    return out


def differences(current: dict[str, Any] | None, baseline: dict[str, Any] | None) -> list[str]:
    """The fields in which the baseline's conditions differ, as `field: baseline → current`;
    nothing when either side does not know its conditions (a run too old to say)."""
    if not current or not baseline:
        return []
    out = []
    for path in sorted(set(current) | set(baseline)):
        mine, theirs = current.get(path), baseline.get(path)
        if _same(mine, theirs):
            continue
        out.append(f"{path}: {_show(theirs)} → {_show(mine)}")
    return out


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else repr(value)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


__all__ = ["conditions", "differences", "wire"]
