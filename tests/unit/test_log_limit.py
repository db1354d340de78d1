"""LogLimiter on an injected clock (nothing sleeps): the first lines of a burst as they come,
then one summary line per interval with the count held back, and full lines again after a
quiet interval."""

from __future__ import annotations

import logging

import pytest

from agentsession_core.log_limit import LogLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def limiter(clock: Clock, caplog: pytest.LogCaptureFixture) -> LogLimiter:
    caplog.set_level(logging.INFO, logger="agentsession")
    return LogLimiter("replacements", burst=3, interval_s=10.0, clock=clock)


def test_a_storm_shows_the_first_lines_then_one_summary_per_interval(
    limiter: LogLimiter, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(1018):  # a minute of them, one every ~59 ms
        clock.now = 500.0 + i * 60.0 / 1018
        limiter.log("agent-%d replaced by agent-%d-r1", i, i)
    limiter.summarise(force=True)
    shown = lines(caplog)
    assert shown[:3] == [f"agent-{i} replaced by agent-{i}-r1" for i in range(3)]
    summaries = shown[3:]
    # One per 10 s interval (the sixth forced at the end), nothing else.
    assert len(summaries) == 6
    assert all(s.startswith("… and ") and " more replacements in the last " in s for s in summaries)
    held = sum(int(s.split()[2]) for s in summaries)
    assert held == 1018 - 3  # every line is either shown or counted
    assert summaries[0] == "… and 167 more replacements in the last 10s"


def test_lines_show_in_full_again_after_a_quiet_interval(
    limiter: LogLimiter, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(5):
        limiter.log("first %d", i)
    clock.now += 10.0
    limiter.summarise()  # the reporter's tick: "… and 2 more"
    clock.now += 10.0
    limiter.summarise()  # an interval with nothing held back: quiet
    limiter.log("again %d", 0)
    assert lines(caplog) == [
        "first 0",
        "first 1",
        "first 2",
        "… and 2 more replacements in the last 10s",
        "again 0",
    ]


def test_a_storm_that_goes_on_stays_summed_up(
    limiter: LogLimiter, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(4):
        limiter.log("line %d", i)
    clock.now += 10.0
    limiter.log("line %d", 4)  # a new interval, but the storm has not paused: held back
    assert lines(caplog) == [
        "line 0",
        "line 1",
        "line 2",
        "… and 1 more replacements in the last 10s",
    ]


def test_nothing_held_back_means_no_summary(
    limiter: LogLimiter, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    limiter.log("one")
    clock.now += 60.0
    limiter.summarise()
    limiter.summarise(force=True)
    assert lines(caplog) == ["one"]


def test_lines_go_at_the_limiters_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agentsession")
    limiter = LogLimiter("retries", burst=1, level=logging.WARNING, clock=Clock())
    limiter.log("a")
    limiter.log("b")
    limiter.summarise(force=True)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "a"),
        (logging.WARNING, "… and 1 more retries in the last 0s"),
    ]
