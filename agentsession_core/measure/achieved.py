"""What a window achieved: the successful wakes (turnover) or steps (every other population)
per second. The engine's turnover_window rows and the judge's achieved_rps read the same
figure, so it lives here, below both."""

from __future__ import annotations

from agentsession_core.measure.stats import ROUTER_KIND, TIME_TO_WAKE_ROW, Window

TURNOVER_GAUGE = "turnover_sessions"


def is_turnover(window: Window) -> bool:
    return any(key == TIME_TO_WAKE_ROW or key[0] == "turnover" for key in window.rows) or any(
        name == TURNOVER_GAUGE for _, _, name, _ in window.gauges
    )


def achieved(window: Window) -> tuple[float, int]:
    """(achieved requests per second, the count behind it): successful ones only, so a
    substrate that fails every wake achieves nothing."""
    if is_turnover(window):
        done = window.row(*TIME_TO_WAKE_ROW)
    else:
        done = window.aggregate(lambda key: key[0] == ROUTER_KIND and key[1].startswith("Step_"))
    count = done.count - done.failures
    duration = window.duration_s
    return (count / duration if duration > 0 else 0.0), count
