"""The judge's lines in the run's files (docs/SPEC.md §7): windows.jsonl, one object per judged
window, and the flat ``step_window`` row each window adds to stats.jsonl.

The stats.jsonl row shape belongs to output, which sits below judge and so cannot know a
verdict: the row is built here, from output's generic row builder.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentsession_core.judge.verdict import WindowVerdict
from agentsession_core.output.stats_files import jsonl_row, render_jsonl

# Headline section -> stats.jsonl key prefix (stats.jsonl keys are snake_case).
_SNAKE = {
    "TimeToWake": "time_to_wake",
    "WakeFirstTouch": "wake_first_touch",
    "Step_*": "steps",
    "requests": "requests",
}


def step_window_row(verdict: WindowVerdict, *, tag: str, test_name: str) -> dict[str, Any]:
    """The stats.jsonl `step_window` row: flat snake_case measurements."""
    m: dict[str, Any] = {
        "index": verdict.index,
        "level": verdict.level,
        "outcome": verdict.outcome,
        "start_unix": verdict.start_unix,
        "end_unix": verdict.end_unix,
        "duration_s": max(0.0, verdict.end_unix - verdict.start_unix),
        "thresholds_judged": sum(1 for r in verdict.results if r.passed is not None),
        "thresholds_missed": len(verdict.broken),
        "void_reason": verdict.void_reason,
        "abort_reason": verdict.abort_reason,
    }
    for section, values in verdict.headline.items():
        prefix = _SNAKE.get(section, section.lower())
        for key, value in values.items():
            m[f"{prefix}_{key}"] = value
    return jsonl_row("step_window", m, tag=tag, test_name=test_name, timestamp=verdict.end_unix)


def windows_jsonl(verdicts: Iterable[WindowVerdict]) -> str:
    return render_jsonl(v.to_dict() for v in verdicts)


__all__ = ["step_window_row", "windows_jsonl"]
