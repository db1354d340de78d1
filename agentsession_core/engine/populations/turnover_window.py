"""The `turnover_window` rows of stats.jsonl (docs/SPEC.md §4.2, §7): the turnover phase only,
one row per load level, so each level's achieved rate stands beside its own target.

The first level keeps the upstream runner's metric name `turnover_window`; each later level of
a ramp is `turnover_window_level<k>` (k = 1, 2, … in ramp order), and every row names its
`level` (the multiplier) and `target_rps` (target_rps × level).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentsession_core.measure.achieved import achieved
from agentsession_core.measure.health import counts_requests, is_request_row
from agentsession_core.measure.stats import (
    BACKLOG_ROW,
    RESIDENT_SHORTFALL_ROW,
    TIME_TO_WAKE_ROW,
    Window,
)

if TYPE_CHECKING:
    from agentsession_core.measure.recorder import Recorder

NS_PER_S = 1_000_000_000


def window_name(index: int) -> str:
    return "turnover_window" if index == 0 else f"turnover_window_level{index}"


def level_rows(
    recorder: Recorder,
    segments: list[tuple[int, float]],
    end_ns: int,
    *,
    target_rps: float,
    awake: int,
) -> dict[str, dict[str, Any]]:
    """One row per level segment `(start_ns, multiplier)`, each over its whole seconds: the
    first second starts after the segment began (after the fill's own wakes for the first),
    the last ends when the next level began or the load stopped (not after cleanup)."""
    rows: dict[str, dict[str, Any]] = {}
    for index, (start, multiplier) in enumerate(segments):
        stop = segments[index + 1][0] if index + 1 < len(segments) else end_ns
        first = start + NS_PER_S - 1
        window = recorder.window(first, max(stop, first))
        rows[window_name(index)] = turnover_measurements(
            window, target_rps * multiplier, level=multiplier, awake=awake
        )
    return rows


def turnover_measurements(
    window: Window, target_rps: float, *, level: float = 1.0, awake: int = 0
) -> dict[str, Any]:
    """Per-request counts, failures and rates, achieved swaps per second against the target,
    and the resident set's mean shortfall."""
    duration = window.duration_s or 1.0
    wakes = window.row(*TIME_TO_WAKE_ROW)
    shortfall = window.row(*RESIDENT_SHORTFALL_ROW).events
    out: dict[str, Any] = {
        "start_unix": window.start_s,
        "end_unix": window.end_s,
        "duration_s": window.duration_s,
        "level": level,
        "target_rps": target_rps,
        "achieved_rps": achieved(window)[0],
        "backlog": window.row(*BACKLOG_ROW).events,
        "awake": awake,
        "resident_shortfall_seconds": shortfall,
        "resident_shortfall_mean": shortfall / duration,
    }
    for quantile_key, value in wakes.measurements(duration).items():
        if quantile_key.startswith("p"):
            out[f"time_to_wake_{quantile_key}"] = value
    requests = failures = 0
    for (kind, name), stats in sorted(window.rows.items()):
        if not is_request_row((kind, name)) or not stats.count:
            continue
        if counts_requests((kind, name)):
            requests += stats.count
            failures += stats.failures
        out[f"{kind}_{name}_count"] = stats.count
        out[f"{kind}_{name}_failures"] = stats.failures
        out[f"{kind}_{name}_rps"] = stats.rps(duration)
    out.update(
        requests=requests,
        failures=failures,
        rps=requests / duration,
        failure_ratio=failures / requests if requests else 0.0,
    )
    return out
