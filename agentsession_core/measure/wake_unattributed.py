"""The part of a wake the platform's named phases do not explain: the wake split's
`unattributed` row (docs/SPEC.md §5.9), beside the phases of measure/wake_split.py.

The whole is the client's TimeToWake (successful wakes, from the intended time). The phases
that explain it are the wake's **innermost answered phases**: the phases nest (the router's
wake holds the parking, which holds the resume, which holds scheduling and the restore), so
adding every phase would count the restore three times; only phases no other answered phase
lies within are disjoint, and only they add up. With the whole preset answering, those are
scheduling and restore; a platform that answers only the resume has the resume. A phase
outside the wake (the checkpoint, when an actor is parked) is never one of them.

**Means, not percentiles.** Means add: the mean wake is the sum of its disjoint parts' means
plus the mean of what is left, whatever their distributions. Percentiles do not: the p50 of
a sum is not the sum of p50s (a wake whose restore is slow need not be one whose scheduling
is), so "p50 minus the phases' p50s" is no percentile of anything. The mean row
(`phase_client_wake_all_mean_ok_unattributed`) is therefore the figure; the p50 row
(`phase_client_wake_all_p50_ok_unattributed`) is shown beside it because upstream's runner
reports that reading, marked as a difference of percentiles.

A difference below zero (the phases' sum exceeds the client's wake: the server's phases
count other clients' and explicit resumes too, or a window's edge moved a few wakes) is
floored at 0 and flagged `negative`, its `raw` value kept. A phase whose percentile was
saturated (measure/wake_split.py) makes the p50 row `saturated` too.

Row names follow upstream's `phase_<layer>_<op>_<class>_<kind>_<scope>_<phase>`: layer
`client` (the whole is the client's wake), op `wake`, class `all` (every actor class of the
run: the split is not per template), kind the statistic (`mean`, `p50`), scope `ok`
(successful wakes only, as every phase), phase `unattributed`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentsession_core.measure.agent_substrate import PHASES

UNATTRIBUTED = "unattributed"
WAKE_ROOT = "wake_router"  # the outermost phase of a wake; everything in a wake lies within it
STATISTICS = ("mean", "p50")
_WITHIN = {p.name: p.within for p in PHASES}
# The split's percentile of cumulative buckets (wake_split.bucket_quantile): (value, saturated).
Quantile = Callable[[list[tuple[float, float]], float], "tuple[float, bool] | None"]


def row_name(statistic: str) -> str:
    return f"phase_client_wake_all_{statistic}_ok_{UNATTRIBUTED}"


def in_wake(phase: str) -> bool:
    """Whether `phase` is part of a wake (the root or inside it), by the preset's nesting."""
    seen: set[str] = set()
    while phase not in seen:
        if phase == WAKE_ROOT:
            return True
        seen.add(phase)
        outer = _WITHIN.get(phase)
        if outer is None:
            return False
        phase = outer
    return False


def innermost(answered: set[str]) -> list[str]:
    """The answered wake phases no other answered phase lies within (disjoint: they add),
    in the preset's order."""
    holding: set[str] = set()
    for name in answered:
        outer = _WITHIN.get(name)
        while outer is not None and outer not in holding:  # every phase around it
            holding.add(outer)
            outer = _WITHIN.get(outer)
    return [p.name for p in PHASES if p.name in answered and p.name not in holding]


def _phase_statistics(rows: Sequence[dict[str, Any]], quantile: Quantile) -> dict[str, Any]:
    """One phase's mean and p50 over all its rows (a phase kept apart by a label, as the
    parking by outcome, is one phase here): the mean from the rows' seconds, the p50 from
    their summed buckets."""
    count = sum(float(r.get("count") or 0.0) for r in rows)
    seconds: float | None = 0.0
    for r in rows:
        mean_of_row = r.get("mean")
        if mean_of_row is None or seconds is None:
            seconds = None
        else:
            seconds += float(mean_of_row) * float(r.get("count") or 0.0)
    mean = seconds / count if seconds is not None and count > 0 else None
    points: dict[float, float] = {}
    for r in rows:
        for le, n in r.get("buckets") or []:
            bound = float(le)
            points[bound] = points.get(bound, 0.0) + float(n)
    found = quantile(sorted(points.items()), 0.5) if points else None
    p50: float | None = found[0] if found is not None else None
    saturated = found[1] if found is not None else False
    if len(rows) == 1 and rows[0].get("p50") is not None:  # the split's own reading
        p50, saturated = rows[0]["p50"], "p50" in (rows[0].get("saturated") or [])
    elif saturated and mean is not None:
        p50 = mean  # as the split reads a saturated percentile
    return {"count": count, "mean": mean, "p50": p50, "saturated": saturated}


def _row(statistic: str, whole: float, parts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    named = sum(float(p[statistic]) for p in parts.values())
    raw = whole - named
    row: dict[str, Any] = {
        "row": row_name(statistic),
        "statistic": statistic,
        "whole": whole,
        "named": named,
        "raw": raw,
        "value": max(raw, 0.0),
        "share": max(raw, 0.0) / whole if whole > 0 else None,
        "negative": raw < 0,
    }
    if statistic == "p50":
        row["saturated"] = any(p["saturated"] for p in parts.values())
    return row


def unattributed(
    phases: Sequence[dict[str, Any]], client: dict[str, float] | None, quantile: Quantile
) -> dict[str, Any] | None:
    """The unattributed part of the client's wakes in one span, from the split's phases
    (`quantile` reads a phase's summed buckets); None without the client's wakes or any wake
    phase."""
    if not client:
        return None
    by_phase: dict[str, list[dict[str, Any]]] = {}
    for p in phases:
        if isinstance(p.get("phase"), str) and in_wake(p["phase"]):
            by_phase.setdefault(p["phase"], []).append(p)
    named = innermost(set(by_phase))
    if not named:
        return None
    parts = {name: _phase_statistics(by_phase[name], quantile) for name in named}
    rows = [
        _row(statistic, float(client[statistic]), parts)
        for statistic in STATISTICS
        if client.get(statistic) is not None
        and all(part[statistic] is not None for part in parts.values())
    ]
    if not rows:
        return None
    return {
        "phase": UNATTRIBUTED,
        "whole": "TimeToWake",
        "named_phases": named,
        "parts": parts,
        "rows": rows,
        "said": _said(rows, named),
    }


def _said(rows: list[dict[str, Any]], named: list[str]) -> str:
    first = rows[0]
    phases = " + ".join(named)
    if first["negative"]:
        return (
            f"{phases} add up to more than the client's {first['statistic']} wake "
            f"({first['named'] * 1000:.0f} ms against {first['whole'] * 1000:.0f} ms): "
            "the server's phases hold wakes the client did not wait for (other clients, "
            "explicit resumes) or a window's edge moved some; floored at 0"
        )
    share = f" ({first['share']:.0%})" if first["share"] is not None else ""
    return (
        f"{first['value'] * 1000:.0f} ms{share} of the client's {first['statistic']} wake "
        f"of {first['whole'] * 1000:.0f} ms is outside {phases}"
    )


def unattributed_figures(found: dict[str, Any] | None) -> dict[str, dict[str, float]]:
    """The row as a judgeable server figure: `server.unattributed_mean`, `…_p50`."""
    if not found:
        return {}
    figures = {r["statistic"]: float(r["value"]) for r in found["rows"]}
    return {UNATTRIBUTED: figures | {"samples": 1.0}}


__all__ = [
    "STATISTICS",
    "UNATTRIBUTED",
    "WAKE_ROOT",
    "in_wake",
    "innermost",
    "row_name",
    "unattributed",
    "unattributed_figures",
]
