"""The watchdog's failure line: the real time since the substrate last answered (not the probe
count times the interval) and a reason that is never empty, whatever the last probe raised."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from agentsession_core.engine import watchdog
from agentsession_core.engine.params import RunParams
from agentsession_core.substrate.errors import TRANSPORT, SubstrateError
from agentsession_core.substrate.interface import Template

LINE = re.compile(
    r"^substrate unreachable for (?P<s>\d+)s "
    r"\((?P<n>\d+) probes in a row unanswered; last: (?P<why>.+)\)$"
)


# What one unanswered probe really costs at the shipped settings: the pause before it (the
# test sleeps 0 instead, and lets the fake clock carry these) and its own deadline.
PROBE_COST_S = 2.0 + 5.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ProbedSubstrate:
    """Answers or fails each probe as `outcomes` says, in order; each probe moves the clock
    on by what a real one costs when nobody answers: the pause before it and its own
    deadline waited out."""

    def __init__(self, clock: Clock, outcomes: list[Callable[[], Exception] | None]) -> None:
        self.clock = clock
        self.outcomes = outcomes
        self.probes = 0

    async def get_template(self, namespace: str, name: str) -> Template:
        self.probes += 1
        self.clock.now += PROBE_COST_S
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome()
        return Template(namespace, name, 1 << 30)


def params() -> RunParams:
    return RunParams(script="smoke")


async def fail_with(
    outcomes: list[Callable[[], Exception] | None], monkeypatch: pytest.MonkeyPatch
) -> tuple[re.Match[str], ProbedSubstrate]:
    monkeypatch.setattr(watchdog, "EVERY_S", 0.0)  # the fake clock carries the time
    clock = Clock()
    sub = ProbedSubstrate(clock, outcomes)
    dog = watchdog.Watchdog(sub, params(), clock=clock)  # type: ignore[arg-type]
    await asyncio.wait_for(dog.run(), 10)
    assert dog.failure is not None
    match = LINE.match(dog.failure)
    assert match is not None, dog.failure
    return match, sub


def bare_timeout() -> Exception:
    return TimeoutError()


def empty_transport() -> Exception:
    return SubstrateError(TRANSPORT, "")


def refused() -> Exception:
    return SubstrateError(TRANSPORT, "ConnectionRefusedError(111, 'Connect call failed')")


def answered_busy() -> Exception:
    return SubstrateError("UNAVAILABLE", "pool full", status=503)  # an answer: alive


@pytest.mark.parametrize(
    ("fail", "why"),
    [
        (bare_timeout, "no answer within the probe's 5s"),
        (empty_transport, "TRANSPORT"),
        (refused, "TRANSPORT: ConnectionRefusedError(111, 'Connect call failed')"),
    ],
)
async def test_the_line_gives_the_real_silence_and_a_reason(
    fail: Callable[[], Exception], why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    match, sub = await fail_with([fail] * watchdog.MISSES, monkeypatch)
    # Five probes of 2 s pause + 5 s deadline each: 35 s of silence, where the old line
    # said 10 s (5 × 2 s).
    assert int(match["s"]) == watchdog.MISSES * PROBE_COST_S == 35
    assert int(match["n"]) == watchdog.MISSES == sub.probes
    assert match["why"] == why


async def test_silence_counts_from_the_last_answer_even_an_error_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three misses, an answer, an error answer (alive all the same), then five misses.
    outcomes: list[Callable[[], Exception] | None] = [bare_timeout] * 3 + [None, answered_busy]
    outcomes += [refused] + [bare_timeout] * (watchdog.MISSES - 1)
    match, sub = await fail_with(outcomes, monkeypatch)
    assert sub.probes == 5 + watchdog.MISSES
    # From the error answer: five probes of 7 s (from the watchdog's start it would be 70 s,
    # from the last success 42 s).
    assert int(match["s"]) == watchdog.MISSES * PROBE_COST_S
    assert int(match["n"]) == watchdog.MISSES
    assert match["why"] == "no answer within the probe's 5s"


async def test_a_probe_that_hangs_is_named_with_real_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watchdog, "EVERY_S", 0.0)
    monkeypatch.setattr(watchdog, "PROBE_TIMEOUT_S", 0.01)

    class Hung:
        async def get_template(self, namespace: str, name: str) -> Any:
            await asyncio.Event().wait()  # never answers

    dog = watchdog.Watchdog(Hung(), params())  # type: ignore[arg-type]
    await asyncio.wait_for(dog.run(), 10)
    assert dog.failure is not None
    match = LINE.match(dog.failure)
    assert match is not None, dog.failure
    assert match["why"] == "no answer within the probe's 0.01s"
    assert int(match["n"]) == watchdog.MISSES


async def test_a_stopped_watchdog_says_nothing_more(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A refused run stops it (Run.refuse): the outage was said once, by the refusal.
    monkeypatch.setattr(watchdog, "EVERY_S", 0.0)
    clock = Clock()
    sub = ProbedSubstrate(clock, [empty_transport] * 50)
    dog = watchdog.Watchdog(sub, params(), clock=clock)  # type: ignore[arg-type]
    dog.stop()
    await asyncio.wait_for(dog.run(), 10)
    assert dog.failure is None and sub.probes == 0
    assert not [r for r in caplog.records if "unreachable" in r.getMessage()]


async def test_a_cancel_that_comes_as_a_probe_answers_still_stops_the_watchdog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run cancels its watchdog on the way out. A cancel that comes in the same turn of the
    loop as a probe's answer must end it too: Python 3.11's asyncio.wait_for returned the
    answer and dropped the cancel, the watchdog probed on, and the run's exit waited for it
    forever (a test hung 240 s after its cleanup)."""
    monkeypatch.setattr(watchdog, "EVERY_S", 0.0)
    answer: asyncio.Future[Template] = asyncio.get_running_loop().create_future()
    probing = asyncio.Event()

    class Answering:
        async def get_template(self, namespace: str, name: str) -> Template:
            probing.set()
            return await answer

    dog = watchdog.Watchdog(Answering(), params())  # type: ignore[arg-type]
    task = asyncio.create_task(dog.run())
    await probing.wait()
    answer.set_result(Template("benchmark-workloads", "glutton", 1 << 30))
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=5)
    dog.stop()  # a watchdog that ran on ends here, and the test fails below
    await asyncio.wait({task}, timeout=5)
    assert task in done and task.cancelled()


# ------------------------------------------------------------------ issue 29: whose stall
class Blocking:
    """A probe that holds the event loop itself for `block_s` (a real stall: time.sleep on
    the loop's thread), then fails unanswered, or answers when `answers`."""

    def __init__(self, block_s: float, *, answers: bool = False) -> None:
        self.block_s = block_s
        self.answers = answers
        self.probes = 0

    async def get_template(self, namespace: str, name: str) -> Template:
        self.probes += 1
        await asyncio.sleep(0)  # the probe is out; the loop then stalls under it
        time.sleep(self.block_s)  # noqa: ASYNC251 - the stall under test
        if not self.answers:
            raise SubstrateError(TRANSPORT, "ReadError('')")
        return Template(namespace, name, 1 << 30)


async def test_probes_the_stalled_loop_missed_blame_the_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watchdog, "EVERY_S", 0.0)
    monkeypatch.setattr(watchdog, "STALL_S", 0.1)
    heard: list[tuple[str, bool]] = []
    sub = Blocking(0.25)
    dog = watchdog.Watchdog(
        sub,  # type: ignore[arg-type]
        params(),
        on_failure=lambda line, unreachable: heard.append((line, unreachable)),
    )
    await asyncio.wait_for(dog.run(), 20)
    assert dog.failure is not None and not dog.unreachable
    assert dog.failure.startswith("the load generator's event loop stalled ("), dog.failure
    assert "the substrate was not shown unreachable" in dog.failure
    assert f"{watchdog.MISSES} of the watchdog's probes in a row went unanswered" in dog.failure
    assert "substrate unreachable" not in dog.failure
    assert heard == [(dog.failure, False)]  # the engine hears it at once, and whose it is
    assert sub.probes == watchdog.MISSES


async def test_a_loop_stalled_past_the_threshold_fails_the_run_even_if_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watchdog, "EVERY_S", 0.0)
    monkeypatch.setattr(watchdog, "STALL_FAIL_S", 0.4)
    dog = watchdog.Watchdog(Blocking(0.6, answers=True), params())  # type: ignore[arg-type]
    await asyncio.wait_for(dog.run(), 20)
    assert dog.failure is not None and not dog.unreachable
    assert re.match(
        r"^the load generator's event loop stalled for \ds at once, longer than the "
        r"watchdog's 0.4s: it could not watch the substrate",
        dog.failure,
    ), dog.failure
    assert "the substrate was not shown unreachable" in dog.failure


async def test_a_substrate_that_is_gone_is_still_called_unreachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    heard: list[bool] = []
    monkeypatch.setattr(watchdog, "EVERY_S", 0.0)
    clock = Clock()
    sub = ProbedSubstrate(clock, [refused] * watchdog.MISSES)
    dog = watchdog.Watchdog(
        sub,  # type: ignore[arg-type]
        params(),
        clock=clock,
        on_failure=lambda line, unreachable: heard.append(unreachable),
    )
    await asyncio.wait_for(dog.run(), 10)
    assert dog.failure is not None and LINE.match(dog.failure) and dog.unreachable
    assert heard == [True]


def test_the_shipped_settings_are_the_ones_the_spec_states() -> None:
    # docs/SPEC.md §4.2 states these numbers, and PROBE_COST_S above assumes the first two.
    assert (watchdog.EVERY_S, watchdog.PROBE_TIMEOUT_S) == (2.0, 5.0) == (2.0, PROBE_COST_S - 2)
    assert watchdog.MISSES == 5
    assert (watchdog.BEAT_S, watchdog.STALL_S) == (0.05, 0.5)
    assert (watchdog.STALL_FAIL_S, watchdog.STARVED_WINDOW_S) == (10.0, 20.0)


async def test_a_starved_loop_fails_the_run_though_every_probe_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The loop blocked 0.3 s, let run, blocked again (a starved process): no stall reaches
    the limit at once and every probe is answered, yet the stalls add up within the window
    (issue 34: three minutes of SATURATED and no failure)."""
    monkeypatch.setattr(watchdog, "EVERY_S", 0.05)
    monkeypatch.setattr(watchdog, "STALL_S", 0.1)
    monkeypatch.setattr(watchdog, "STALL_FAIL_S", 1.0)
    monkeypatch.setattr(watchdog, "STARVED_WINDOW_S", 2.0)
    loop = asyncio.get_running_loop()
    heard: list[tuple[str, bool]] = []

    def starve() -> None:
        time.sleep(0.3)  # the loop's own thread: a real stall, however fast the machine
        handle[0] = loop.call_later(0.02, starve)

    handle = [loop.call_later(0.02, starve)]
    sub = Blocking(0.0, answers=True)
    dog = watchdog.Watchdog(
        sub,  # type: ignore[arg-type]
        params(),
        on_failure=lambda line, unreachable: heard.append((line, unreachable)),
    )
    try:
        await asyncio.wait_for(dog.run(), 30)
    finally:
        handle[0].cancel()
    assert dog.failure is not None and not dog.unreachable
    match = re.match(
        r"^the load generator's event loop stalled for \ds of the last 2s \((\d+) stalls of "
        r"0.1s or more; the watchdog's limit is 1s\): it could not keep time",
        dog.failure,
    )
    assert match is not None, dog.failure
    assert int(match[1]) >= 3  # 0.3 s each: at least four make 1 s, the one pending counted
    assert "the substrate was not shown unreachable" in dog.failure
    assert heard == [(dog.failure, False)]
