"""The turns queue (docs/SPEC.md §4.3): an arrival during a running turn waits; the wait is
turns/QueueWait, the wake is measured from when the turn could start, and every arrival is
booked as due (turns/Arrivals)."""

from __future__ import annotations

from typing import Any

import pytest

from agentsession_core.engine.engine import Engine
from agentsession_core.engine.params import RunParams
from agentsession_core.judge.verdict import select
from agentsession_core.measure.recorder import Recorder, Row
from agentsession_core.script import load_script
from agentsession_core.substrate.fake import FakeSubstrate


class Spy:
    """Wraps Row.ok, noting (kind, name, intended, sent) of every answered sample."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[str, str, int, int]] = []
        original = Row.ok

        def ok(row: Row, intended: int, sent: int, done: int, *args: Any) -> None:
            self.seen.append((row.kind, row.name, intended, sent))
            original(row, intended, sent, done, *args)

        monkeypatch.setattr(Row, "ok", ok)

    def of(self, kind: str, name: str) -> list[tuple[int, int]]:
        return [(i, s) for k, n, i, s in self.seen if (k, n) == (kind, name)]


async def test_a_turn_that_waits_books_queue_wait_and_its_wake_from_when_it_could_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = Spy(monkeypatch)
    params = RunParams(
        script="smoke",
        seed=3,
        # Ten arrivals a second into turns of 0.15-0.45 s: most arrivals find a turn running.
        population={
            "kind": "turns",
            "sessions": 2,
            "turns_per_hour": 36000,
            "turn_mean_seconds": 0.3,
            "registration_quiet_seconds": 0,
            "spawn_rate": 100,
        },
        cleanup={"stop_grace_seconds": 1},
    )
    engine = Engine(params, FakeSubstrate(), load_script("smoke"), Recorder(), atespace="unit")
    engine.ctx.intended_log = []
    await engine.preflight()
    await engine.register()
    await engine.fill()

    def a_turn_waited() -> str | None:
        """Held until a queued arrival's turn has started and another arrival is queued now
        (counts: a slow machine takes longer, never fewer)."""
        waits = spy.of("turns", "QueueWait")
        waited = any(start > arrival for arrival, start in waits)
        queued = engine.recorder.totals().row("turns", "Arrivals").events > len(waits)
        return "a turn waited" if waited and queued else None

    assert (await engine.hold(60, should_stop=a_turn_waited))[2] == "a turn waited"
    assert await engine.cleanup() == []

    waits = spy.of("turns", "QueueWait")  # (arrival's intended, when its turn could start)
    queued = [(arrival, start) for arrival, start in waits if start > arrival]
    assert queued, "no arrival fell during a running turn"
    wakes = {intended for intended, _ in spy.of("http", "WakeFirstTouch")}
    # Every wake is measured from when its turn could start, never from a queued arrival.
    assert wakes <= {start for _, start in waits}
    assert not wakes & {arrival for arrival, _ in queued}
    assert len(waits) - len(wakes) <= params.population.sessions  # a turn cut by the stop
    # Every arrival is booked as due at its intended time, queued or not: all that were
    # drawn but each session's next one, whose time had not come at the stop.
    drawn = [entry for entry in engine.ctx.intended_log if entry[0] == "arrival"]
    booked = engine.recorder.totals().row("turns", "Arrivals").events
    assert booked == len(drawn) - params.population.sessions
    assert booked > len(waits)  # arrivals queued behind the last turns never started
    # The queue is not a request: it stays out of the Aggregated row and "all requests".
    window = engine.recorder.totals()
    assert select(window, "QueueWait").count == len(waits)
    assert select(window, None).count == sum(
        s.count for (k, _), s in window.rows.items() if k not in ("generator", "turns")
    )
