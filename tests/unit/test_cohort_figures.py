"""A cohort's figures (docs/SPEC.md §4.5, §4.6): the nearest-rank marks, when each is booked,
what a cohort that falls short books, and how a window's value is made of its cohorts (one
sample per cohort, so p50/p99/max are over the cohorts the window holds), plus the rows'
place in totals and thresholds."""

from __future__ import annotations

import math

import pytest

from agentsession_core.engine.populations.cohort import (
    INCOMPLETE,
    CohortBook,
    CohortMarks,
    mark_rank,
)
from agentsession_core.judge.thresholds import parse_threshold
from agentsession_core.judge.verdict import evaluate, select
from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.measure.stats import (
    ACTOR_READY_ROW,
    ALL_READY_ROW,
    READY_MARK,
    SUMMARY_KIND,
    mark_row,
)

WALL0 = 1_700_000_000.0
MONO0 = 5 * NS_PER_S
MS = 1_000_000


class Clock:
    def __init__(self) -> None:
        self.now = MONO0

    def __call__(self) -> int:
        return self.now


def recorder() -> tuple[Recorder, Clock]:
    clock = Clock()
    return Recorder(clock_ns=clock, wall_clock=lambda: WALL0), clock


def book(rec: Recorder, n: int, start_ns: int, percents: tuple[int, ...] = (50, 90, 99)):
    return CohortBook(
        rec,
        actor_row=ACTOR_READY_ROW,
        all_row=ALL_READY_ROW,
        mark=READY_MARK,
        n=n,
        percents=percents,
        start_ns=start_ns,
    )


@pytest.mark.parametrize(
    ("k", "n", "rank"),
    [
        (50, 10, 5),
        (90, 10, 9),
        (99, 10, 10),
        (50, 3, 2),  # ceil(1.5)
        (1, 1000, 10),
        (99, 1000, 990),
        (99, 1, 1),
        (1, 1, 1),
        (10, 5, 1),  # ceil(0.5): at least the first actor
    ],
)
def test_the_k_percent_mark_is_the_nearest_rank(k: int, n: int, rank: int) -> None:
    assert mark_rank(k, n) == rank == max(1, math.ceil(k * n / 100))


def test_marks_fire_once_each_at_their_rank_in_the_order_actors_finish() -> None:
    marks = CohortMarks(10, (99, 50, 90, 50))
    fired = [marks.finished() for _ in range(10)]
    assert fired == [[], [], [], [], [50], [], [], [], [90], [99]]
    assert marks.complete and marks.missed() == []


def test_a_small_cohort_reaches_several_marks_with_one_actor() -> None:
    marks = CohortMarks(2, (50, 90, 99))
    assert marks.finished() == [50]
    assert marks.finished() == [90, 99]


def test_a_cohort_short_of_its_marks_names_the_ones_it_missed() -> None:
    marks = CohortMarks(10, (50, 90, 99))
    for _ in range(6):
        marks.finished()
    for _ in range(4):
        marks.fail()
    assert marks.resolved and not marks.complete
    assert marks.missed() == [90, 99]


def test_a_cohort_has_at_least_one_actor() -> None:
    with pytest.raises(ValueError, match="at least one actor"):
        CohortMarks(0, (50,))


def test_each_mark_is_booked_from_the_cohort_start_when_it_is_reached() -> None:
    rec, clock = recorder()
    start = MONO0 + 100 * MS
    cohort = book(rec, 4, start)
    # Actor i intended at start + i·100 ms, ready 250 ms after its own intended time.
    for i in range(4):
        intended = start + i * 100 * MS
        cohort.done(intended, intended, intended + 250 * MS)
    cohort.close(start + 700 * MS)
    clock.now = MONO0 + 3 * NS_PER_S
    w = rec.window(MONO0, clock.now)
    actor = w.row(*ACTOR_READY_ROW)
    assert actor.count == 4 and actor.failures == 0
    assert actor.response.max == pytest.approx(250, rel=0.01)  # from each one's own intended
    # 50 %: the 2nd ready (at start + 350 ms); 90 % and 99 % and all: the 4th (start + 550).
    assert w.row(*mark_row(READY_MARK, 50)).response.max == pytest.approx(350, rel=0.01)
    for key in (mark_row(READY_MARK, 90), mark_row(READY_MARK, 99), ALL_READY_ROW):
        stats = w.row(*key)
        assert stats.count == 1 and stats.failures == 0
        assert stats.response.max == pytest.approx(550, rel=0.01)


def test_a_cohort_that_falls_short_books_its_missed_marks_failed_at_its_end() -> None:
    rec, clock = recorder()
    start = MONO0
    cohort = book(rec, 4, start)
    for i in range(3):
        cohort.done(start, start, start + (i + 1) * 100 * MS)
    cohort.failed(start, start, start + 400 * MS, "RESOURCE_EXHAUSTED")
    cohort.close(start + 2 * NS_PER_S)
    cohort.done(start, start, start + 3 * NS_PER_S)  # after its end: not booked
    clock.now = MONO0 + 4 * NS_PER_S
    w = rec.window(MONO0, clock.now)
    assert w.row(*mark_row(READY_MARK, 50)).failures == 0  # the 2nd was ready
    for key in (mark_row(READY_MARK, 90), mark_row(READY_MARK, 99), ALL_READY_ROW):
        stats = w.row(*key)
        assert (stats.count, stats.failures) == (1, 1)
        assert stats.errors == {INCOMPLETE: 1}
    actor = w.row(*ACTOR_READY_ROW)
    assert (actor.count, actor.failures) == (4, 1)
    assert actor.errors == {"RESOURCE_EXHAUSTED": 1}


def test_a_stop_inside_a_cohort_books_nothing_more() -> None:
    rec, clock = recorder()
    cohort = book(rec, 3, MONO0)
    cohort.done(MONO0, MONO0, MONO0 + 10 * MS)
    cohort.abandon()
    cohort.close(MONO0 + 20 * MS)
    clock.now = MONO0 + 2 * NS_PER_S
    w = rec.window(MONO0, clock.now)
    assert ALL_READY_ROW not in w.rows
    assert mark_row(READY_MARK, 99) not in w.rows


def test_a_window_judges_its_cohorts_one_sample_each() -> None:
    """Three cohorts ending inside one window: p50 over their TimeToAllReady is the middle
    one, max the slowest, count the cohorts; a rule on the row judges exactly that."""
    rec, clock = recorder()
    for c, all_ready_ms in enumerate((300, 900, 500)):
        start = MONO0 + c * NS_PER_S
        cohort = book(rec, 2, start)
        cohort.done(start, start, start + 100 * MS)
        cohort.done(start, start, start + all_ready_ms * MS)
        cohort.close(start + all_ready_ms * MS)
    clock.now = MONO0 + 5 * NS_PER_S
    w = rec.window(MONO0, clock.now)
    stats = select(w, "TimeToAllReady")
    assert stats.count == 3
    assert stats.response.quantile(0.5) == pytest.approx(500, rel=0.01)
    assert stats.response.max == pytest.approx(900, rel=0.01)
    held = evaluate(parse_threshold("TimeToAllReady: p50 < 600ms"), w, None)
    missed = evaluate(parse_threshold("TimeToAllReady: max < 800ms"), w, None)
    counted = evaluate(parse_threshold("TimeToAllReady: count >= 3"), w, None)
    assert (held.passed, missed.passed, counted.passed) == (True, False, True)
    by_metric = evaluate(parse_threshold("summary_TimeToReady_50pct: max < 150ms"), w, None)
    assert by_metric.passed is True and by_metric.samples == 3


def test_cohort_figures_stay_out_of_every_total_of_requests() -> None:
    rec, clock = recorder()
    rec.row("grpc", "CreateActor").ok(MONO0, MONO0, MONO0 + 5 * MS)
    cohort = book(rec, 1, MONO0)
    cohort.done(MONO0, MONO0, MONO0 + 50 * MS)
    cohort.close(MONO0 + 50 * MS)
    clock.now = MONO0 + 2 * NS_PER_S
    w = rec.window(MONO0, clock.now)
    everything = select(w, None)
    assert everything.count == 1  # CreateActor only: no cohort figure is a request
    assert select(w, "summary_*").count == 5  # actor, 3 marks, all: listed and selectable
    assert {k for k in w.rows if k[0] == SUMMARY_KIND} == {
        ACTOR_READY_ROW,
        ALL_READY_ROW,
        *(mark_row(READY_MARK, k) for k in (50, 90, 99)),
    }
