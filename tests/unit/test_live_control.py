"""Live control's pieces (docs/SPEC.md §5.10): the PATCH body's checks, the command's URL and
bodies, what voids a window, the change's record and mark on the report, the gate of a
campaign stopped by hand, and a pause on the closed and turns populations (fake substrate)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentsession_core.cli.control import change_of, status_line, status_url
from agentsession_core.engine.engine import Engine
from agentsession_core.engine.params import RunParams
from agentsession_core.errors import UsageError
from agentsession_core.judge.gate import decide
from agentsession_core.measure.recorder import Recorder
from agentsession_core.report.context import ReportContext
from agentsession_core.report.data import RunData
from agentsession_core.run.control_api import BadBody, parse_change
from agentsession_core.run.live_control import MAX_LEVEL, LiveControl
from agentsession_core.script import load_script
from agentsession_core.substrate.fake import FakeSubstrate


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"", "body:"),
        (b"[1]", "body:"),
        (b"{}", "body:"),
        (b"{", "body: not JSON"),
        (b'{"level": 0}', "level: 0 must be > 0"),
        (b'{"level": -1}', "level: -1 must be > 0"),
        (b'{"level": 1e9}', f"level: 1e+09 must be > 0 and at most {MAX_LEVEL:g}"),
        (b'{"level": true}', "level: true is not a number"),
        (b'{"level": "2"}', 'level: "2" is not a number'),
        (b'{"paused": 1}', "paused: 1 is not true or false"),
        (b'{"stopped": false}', "stopped: only true"),
        (b'{"level": 2, "colour": "red"}', "colour: unknown field"),
    ],
)
def test_a_bad_body_is_refused_naming_its_field(body: bytes, field: str) -> None:
    with pytest.raises(BadBody) as info:
        parse_change(body)
    assert str(info.value).startswith(field)
    assert "\n" not in str(info.value)


def test_good_bodies_pass_as_given() -> None:
    assert parse_change(b'{"level": 2.5}') == {"level": 2.5}
    assert parse_change(b'{"paused": false, "level": 1}') == {"paused": False, "level": 1}
    assert parse_change(json.dumps({"stopped": True}).encode()) == {"stopped": True}
    assert parse_change(json.dumps({"level": MAX_LEVEL}).encode()) == {"level": MAX_LEVEL}


def test_the_command_finds_the_status_url_and_makes_each_body() -> None:
    for url in ("http://h:9", "http://h:9/", "http://h:9/metrics", "http://h:9/v1/status"):
        assert status_url(url) == "http://h:9/v1/status"
    with pytest.raises(UsageError, match="URL: 'h:9' is not an http:// URL"):
        status_url("h:9")
    assert change_of("status", None) is None
    assert change_of("level", "2.5") == {"level": 2.5}
    assert change_of("pause", None) == {"paused": True}
    assert change_of("resume", None) == {"paused": False}
    assert change_of("stop", None) == {"stopped": True}
    with pytest.raises(UsageError, match="level: give the new level"):
        change_of("level", None)
    with pytest.raises(UsageError, match="level: 'fast' is not a number"):
        change_of("level", "fast")
    with pytest.raises(UsageError, match="pause: takes no value"):
        change_of("pause", "1")
    line = status_line(
        {
            "state": "hold",
            "level": 2.5,
            "paused": True,
            "stopped": False,
            "intended_rate": 0.0,
            "achieved_rate": None,
            "rate_unit": "wakes/s",
            "residents": 3,
            "window": {"index": 1, "level": 1.0},
            "elapsed_seconds": 12.4,
        }
    )
    assert line == (
        "hold, level 2.5, paused, intended 0 achieved – wakes/s, residents 3, window 1 at 1x, 12 s"
    )


def test_a_change_or_a_pause_voids_the_window_it_touches() -> None:
    control = LiveControl()
    assert control.void_reason(0, 1 << 62) is None
    level = control.note("level", 1.0, 2.5)
    assert level.line.startswith("manual change at ") and level.line.endswith("(level 1 → 2.5)")
    assert control.void_reason(level.at_ns - 10, level.at_ns + 10) == level.line
    assert control.void_reason(level.at_ns + 1, level.at_ns + 10) is None  # after it
    pause = control.note("pause", 2.5, 2.5)
    # A window that starts while paused holds no change, yet is void.
    assert control.void_reason(pause.at_ns + 1, pause.at_ns + 2).startswith("paused by hand since")
    resume = control.note("resume", 2.5, 2.5)
    assert control.paused_ns(pause.at_ns, resume.at_ns) == resume.at_ns - pause.at_ns
    assert control.void_reason(resume.at_ns + 1, resume.at_ns + 2) is None
    assert control.stop_line is None
    control.note("stop", 2.5, 2.5)
    assert control.stop_line is not None and "(stopped)" in control.stop_line
    records = control.take_records()
    assert [(r["type"], r["name"], r["source"]) for r in records] == [
        ("control", "level", "manual"),
        ("control", "pause", "manual"),
        ("control", "resume", "manual"),
        ("control", "stop", "manual"),
    ]
    assert (records[0]["level_before"], records[0]["level"]) == (1.0, 2.5)
    assert control.take_records() == []  # each booked once


def test_the_report_marks_each_change_and_splits_the_target_at_a_level() -> None:
    data = RunData(location="here")
    level = {"name": "level", "at_unix": 100.0, "level_before": 1, "level": 2}
    pause = {"name": "pause", "at_unix": 110.0, "level": 2}
    data.changes = [
        {"type": "control", **level, "label": "level 1 → 2"},
        {"type": "control", **pause, "label": "paused"},
    ]
    ctx = ReportContext.of(data)
    assert [(m.x, m.label) for m in ctx.marks] == [
        (100.0, "manual: level 1 → 2"),
        (110.0, "manual: paused"),
    ]
    assert ctx.window_levels() == [(None, 100.0, 1.0), (100.0, None, 2.0)]


def _gate(**run: Any) -> dict[str, Any]:
    window = {"index": 0, "outcome": "pass", "level": 1.0}
    return {"windows": [window], "run_status": "completed", "abort_reason": None, "run": run}


def test_a_campaign_stopped_by_hand_is_void_unless_a_window_broke() -> None:
    assert decide(_gate()) == ("pass", "1 window(s) passed")
    stopped = _gate(stopped="manual change at 10:00:00 (stopped) (control API); window 2 not held")
    verdict, reason = decide(stopped)
    assert verdict == "void" and reason.startswith("stopped by hand: manual change at 10:00:00")
    stopped["windows"][0]["outcome"] = "break"
    assert decide(stopped)[0] == "fail"


def _engine(**population: Any) -> Engine:
    params = RunParams(
        script="smoke",
        seed=3,
        think_scale=0.01,
        population={"registration_quiet_seconds": 0, "spawn_rate": 100, **population},
        cleanup={"stop_grace_seconds": 1},
    )
    return Engine(params, FakeSubstrate(), load_script("smoke"), Recorder(), atespace="unit")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("population", "due_row"),
    [
        ({"kind": "closed", "sessions": 3}, ("closed", "StepsDue")),
        (
            {"kind": "turns", "sessions": 3, "turns_per_hour": 36000, "turn_mean_seconds": 0.05},
            ("turns", "Arrivals"),
        ),
    ],
)
async def test_a_pause_books_no_new_work_and_a_resume_starts_it_again(
    population: dict[str, Any], due_row: tuple[str, str]
) -> None:
    engine = _engine(**population)
    await engine.preflight()
    await engine.register()
    await engine.fill()

    def due() -> int:
        return engine.recorder.totals().row(*due_row).events

    def once_due(above: int) -> Callable[[], str | None]:
        """Hold until work fell due past `above` (a count: a slow machine takes longer)."""
        return lambda: "due" if due() > above else None

    assert (await engine.hold(60, should_stop=once_due(0)))[2] == "due"
    engine.population.set_paused(True)
    paused_at = due()
    await engine.hold(0.8)
    assert due() == paused_at  # not one step or arrival fell due while paused
    engine.population.set_paused(False)
    assert (await engine.hold(60, should_stop=once_due(paused_at)))[2] == "due"
    assert await engine.cleanup() == []
