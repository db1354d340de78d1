"""The progress line says when the load generator was saturated (docs/SPEC.md §5.6)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, cast

from agentsession_core.measure.health import LOOP_LAG_ROW, GeneratorHealth
from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.run.progress import Progress


def _progress(
    recorder: Recorder, health: GeneratorHealth | None, *, paused: bool = False
) -> Progress:
    """The line of a closed load (no swaps) in its hold, three sessions parked."""
    load = SimpleNamespace(
        phase="hold",
        level=1.0,
        recorder=recorder,
        health=health or GeneratorHealth(Recorder()),  # one that saw nothing
        states=lambda: {"parked": 3},
        progress_parts=lambda: [],
    )
    return Progress(cast(Any, load), live=False, paused=lambda: paused)


def _beats(recorder: Recorder, second: int, lag_ms: float) -> None:
    """A second of 10 ms heartbeats, each `lag_ms` late."""
    row = recorder.row(*LOOP_LAG_ROW)
    start = recorder.mono_ns_of_second(second)
    for k in range(20):
        intended = start + k * 40_000_000
        woke = intended + round(lag_ms * 1_000_000)
        row.ok(intended, woke, woke)


def test_the_progress_line_names_saturated_seconds_of_the_last_interval() -> None:
    recorder = Recorder()
    health = GeneratorHealth(recorder)
    now = recorder.second_of(time.monotonic_ns())
    for second in range(now - 8, now):
        _beats(recorder, second, 120.0 if second >= now - 3 else 1.0)
    recorder.flush(recorder.mono_ns_of_second(now) + NS_PER_S // 2)
    line = _progress(recorder, health).line()
    assert "SATURATED 3/10s (loop lag p99 " in line and "> 50 ms)" in line, line
    assert line.index("SATURATED") < line.index("sessions"), line  # not cut off the line


def test_a_healthy_generator_adds_nothing_to_the_line() -> None:
    recorder = Recorder()
    now = recorder.second_of(time.monotonic_ns())
    for second in range(now - 5, now):
        _beats(recorder, second, 1.0)
    recorder.flush()
    assert "SATURATED" not in _progress(recorder, GeneratorHealth(recorder)).line()
    assert "SATURATED" not in _progress(recorder, None).line()


def test_a_pause_by_hand_is_said_next_to_the_phase() -> None:
    recorder = Recorder()
    assert "PAUSED" not in _progress(recorder, None).line()
    line = _progress(recorder, None, paused=True).line()
    assert line.split()[:2] == ["hold", "PAUSED"], line  # docs/SPEC.md §5.10
