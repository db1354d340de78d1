"""A turnover run through a substrate that goes away and comes back (issue 11, docs/SPEC.md
§4.2 "the resident set holds its size"), against the real local substrate process:

- a router 503 blip (`router:unavailable:1`, put through the control endpoint while the hold
  runs and cleared once it cost the set a few residents): the swaps go on after it and the
  resident set is whole again within the catch-up rule's ticks of the last failed wake;
- the substrate process killed with SIGKILL mid-hold and started again on the same ports, on
  the same store (the actors that were in workers come back CRASHED) or on an empty one (a
  platform that lost its state: atespace and actors gone): the engine finds and replaces what
  was lost (it checks its residents against the substrate once the watchdog sees it answer
  again, instead of counting crashed actors as awake until it next touched them), makes the
  atespace again when it is gone, is whole again within the rule's ticks of the last slot it
  had to make good (in its books and on the substrate), and its books agree with the
  substrate from the check on; at the end the restarted substrate holds nothing of the run,
  in its API or on its disk. Whatever the wire (on the ate wire the router serves again
  before gRPC has reconnected, issue 18) the set never grows past `awake` by more than the
  swaps of the tick in which parks start failing, and the ticks' books and the gauge agree
  within the bound of §4.2.

The run is the engine's Run in this process (the CLI's body), so each step waits on the event
it needs: the set's size, a probe the watchdog saw go unanswered, the check after the outage
having run, the ticks. Its watchdog is given 40 s of silence (MISSES 20) instead of 10 s: a
loaded machine restarts the substrate slowly, and the recovery is what these tests judge
(the watchdog's own verdict is tests/unit/test_watchdog.py's). The hold ends once the test
saw what it needs (60 s at most). Everything asserted about the load comes from the run's
own artifacts (stats_history, gauges.jsonl, stats.jsonl, status.json, logs.txt), once a
second as the engine booked it; the substrate's API is asked only what it runs (the truth
the books are checked against).
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentsession_core.engine import watchdog
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import (
    RESIDENT_TOLERANCE,
    TurnoverPopulation,
)
from agentsession_core.run.run import Run
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess
from local_substrate.persist import RUNTIME_PREFIX
from tests.integration.ports import fixed_port
from tests.integration.test_engine_turnover import read_jsonl, seconds_late

pytestmark = pytest.mark.timeout(180)

AWAKE = 8
RATE = 2  # swaps per second
SESSIONS = 24
# Every resident holds a worker, and so does each wake of a swap in flight.
WORKERS = AWAKE + 4
CATCH_UP_RATIO = 1.0  # two owed wakes a tick on top of the swaps (the default gives one)
CATCH_UP = max(1, math.ceil(CATCH_UP_RATIO * RATE))  # docs/SPEC.md §4.2
# The rule's ticks to claim every owed slot, the tick after them that sees the set whole, and
# one more for a loaded machine's wake slower than a tick.
REFILL_TICKS = math.ceil(AWAKE / CATCH_UP) + 2
HOLD_CAP_S = 60.0  # the hold ends once the test saw what it needs; this only bounds it
SERVING = ("RUNNING", "RESUMING")


@dataclass
class Substrate:
    """`agentsession substrate serve` on fixed ports, so a restart serves the same URLs."""

    store: Path
    log: Path
    faults_seed: int = 3
    workers: int = WORKERS
    http_port: int = field(default_factory=fixed_port)
    grpc_port: int = field(default_factory=fixed_port)
    proc: LocalSubstrateProcess | None = None

    def start(self) -> LocalSubstrateProcess:
        self.proc = LocalSubstrateProcess(
            workers=self.workers,
            store=self.store,
            park_timeout=5,
            fault_seed=self.faults_seed,
            log_path=self.log,
            extra_args=["--port", str(self.http_port), "--grpc-port", str(self.grpc_port)],
        )
        self.proc.start()
        return self.proc

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def sigkill(self) -> int:
        """A real SIGKILL to the server process (no cleanup runs in it); its pid."""
        assert self.proc is not None and self.proc.process is not None
        pid = self.proc.process.pid
        os.kill(pid, signal.SIGKILL)
        self.proc.process.wait()
        self.proc.stop()  # only closes our pipes: the process is gone
        return pid

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Substrate]:
    substrate = Substrate(tmp_path / "store", tmp_path / "substrate.log")
    substrate.start()
    yield substrate
    substrate.stop()


def run_params(out: Path, substrate: Substrate, atespace: str, protocol: str) -> RunParams:
    if protocol == "ate":
        target = {"substrate": f"grpc://127.0.0.1:{substrate.grpc_port}", "router": substrate.url}
    else:
        target = {"substrate": substrate.url}
    return RunParams(
        target={
            **target,
            "protocol": protocol,
            "atespace": atespace,
            "request_timeout_seconds": 5.0,
        },
        script="smoke",
        seed=5,
        out=str(out),
        name=atespace,
        population={
            "kind": "turnover",
            "sessions": SESSIONS,
            "awake": AWAKE,
            "target_rps": RATE,
            "spawn_rate": 50,
            "registration_quiet_seconds": 0.5,
            "catch_up_ratio": CATCH_UP_RATIO,
        },
        cleanup={"stop_grace_seconds": 2.0},
    )


class Watch:
    """What the test waits on inside the run: a probe the watchdog saw go unanswered, the
    first pass of the check after an outage having run, and the test's own word that the hold
    may end. Installed with monkeypatch; the watchdog is given 40 s of silence."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.unanswered = asyncio.Event()
        self.checked = asyncio.Event()
        self.back_seen: float | None = None  # unix time the check after the outage started
        self.enough = False
        monkeypatch.setattr(watchdog, "MISSES", 20)
        probe, check = watchdog.Watchdog._probe, TurnoverPopulation._check_once

        async def spied_probe(dog: watchdog.Watchdog) -> Exception | None:
            exc = await probe(dog)
            if exc is not None and watchdog.unanswered(exc):
                self.unanswered.set()
            return exc

        async def spied_check(population: TurnoverPopulation) -> None:
            if self.back_seen is None:
                self.back_seen = time.time()
            try:
                await check(population)
            finally:
                self.checked.set()

        monkeypatch.setattr(watchdog.Watchdog, "_probe", spied_probe)
        monkeypatch.setattr(TurnoverPopulation, "_check_once", spied_check)

    def should_stop(self) -> str | None:
        return "enough" if self.enough else None


async def until(condition: Callable[[], bool], run: Run, hold: asyncio.Task, what: str) -> None:
    """Poll `condition` until it holds; the hold ending first (a failure, or its cap) fails."""
    while not condition():
        assert not hold.done(), f"the hold ended before {what}: {run.stop_reason()}"
        await asyncio.sleep(0.05)


def population(run: Run) -> TurnoverPopulation:
    assert run.load.engine is not None and isinstance(
        run.load.engine.population, TurnoverPopulation
    )
    return run.load.engine.population


def finish(run: Run, reason: str | None) -> None:
    """End the run as the CLI does: its load's problem (the §4.2 gap) fails it."""
    assert reason == "enough", reason  # the test's own stop, not a failure
    problem = run.load.problem()
    run.finish("completed" if problem is None else "failed", problem)


async def ticks_on(run: Run, hold: asyncio.Task, ticks: int) -> None:
    """Until `ticks` more ticks ran."""
    target = population(run).ticks + ticks
    await until(lambda: population(run).ticks >= target, run, hold, f"{ticks} more ticks")


async def swaps_on(run: Run, hold: asyncio.Task, wakes: int) -> None:
    """Until three more ticks ran and `wakes` more wakes succeeded after them: the swaps go
    on, and the books hold whole seconds of it."""
    await ticks_on(run, hold, 3)

    def woken() -> int:
        row = run.recorder.totals().row("rps", "TimeToWake")
        return row.count - row.failures

    target = woken() + wakes
    await until(lambda: woken() >= target, run, hold, f"{wakes} more wakes")


class Artifacts:
    """What the engine booked, per unix second."""

    def __init__(self, run: Run) -> None:
        assert run.result is not None
        run_dir = run.result.run_dir
        self.run = run
        self.result = run.result
        self.status = json.loads((run_dir / "status.json").read_text())
        self.rows = read_jsonl(run_dir / "stats.jsonl")
        self.window = self.rows["turnover_window"]
        self.logs = (run_dir / "logs.txt").read_text()
        self.resident: dict[int, float] = {}
        self.gauged_shortfall: dict[int, float] = {}
        for line in (run_dir / "gauges.jsonl").read_text().splitlines():
            gauge = json.loads(line)
            if gauge["name"] == "turnover_resident":
                state = gauge["labels"]["state"]
                into = self.resident if state == "resident" else self.gauged_shortfall
                into[int(gauge["t"])] = gauge["value"]
        self.shortfall: dict[int, int] = {}  # each tick's ResidentShortfall, at its second
        for line in (run_dir / "stats_history.jsonl").read_text().splitlines():
            row = json.loads(line)
            if (row.get("type"), row.get("name")) == ("turnover", "ResidentShortfall"):
                self.shortfall[row["t"]] = row["events"]
        self.woken: dict[int, int] = {}  # successful TimeToWake: swaps done (and owed wakes)
        self.failed_wakes: dict[int, int] = {}
        self.created: dict[int, int] = {}  # CreateActor: in the hold, replacements
        with (run_dir / "stats_history.csv").open() as history:
            for row in csv.DictReader(history):
                second, booked = int(row["Timestamp"]), float(row["Requests/s"] or 0)
                failed = round(float(row["Failures/s"] or 0))
                if (row["Type"], row["Name"]) == ("rps", "TimeToWake"):
                    self.woken[second] = round(booked) - failed
                    self.failed_wakes[second] = failed
                elif (row["Type"], row["Name"]) == ("grpc", "CreateActor"):
                    self.created[second] = round(booked) - failed

    @property
    def hold(self) -> range:
        """The whole seconds of the turnover window: one tick each."""
        return range(int(self.window["start_unix"]), int(self.window["end_unix"]))

    def last_loss(self, *, after: float) -> int:
        """The last second, from `after` on, in which the set lost a slot or had one to make
        good on an actor not yet there: a failed wake, or a replacement's CreateActor."""
        seconds = [int(after)]
        seconds += [s for s, n in self.failed_wakes.items() if n > 0 and s in self.hold]
        seconds += [s for s, n in self.created.items() if n > 0 and s in self.hold]
        return max(s for s in seconds if s >= int(after))

    def whole_again(self, after: int) -> int:
        """The first tick after `after` that found the set whole (no ResidentShortfall)."""
        for second in self.hold:
            if second > after and self.shortfall.get(second, 0) == 0:
                return second
        raise AssertionError(f"never whole again after {after % 1000}: {self.tick_line()}")

    def tick_line(self) -> str:
        return " ".join(f"{s % 1000}:{self.shortfall.get(s, 0)}" for s in self.hold)

    def check_outcome(self) -> None:
        """completed (exit 0), or failed with the shortfall line (exit 1), as the mean gap
        says (§4.2)."""
        mean = self.window["resident_shortfall_mean"]
        if mean > RESIDENT_TOLERANCE * AWAKE:
            assert (self.status["status"], self.result.exit_code) == ("failed", 1), self.status
            assert self.status["abort_reason"].startswith("turnover: the resident set averaged")
        else:
            assert (self.status["status"], self.result.exit_code) == ("completed", 0), self.status

    def check_books_agree(self) -> None:
        """Issue 18: the set never grew past `awake`, and the ticks' ResidentShortfall agrees
        with the gauge within one resident-second per slot that went missing (a failed wake, or
        a resident the check after the outage found lost; docs/SPEC.md §4.2)."""
        assert max(self.resident.values()) <= AWAKE + RATE, self.resident
        booked = self.rows["turnover_ResidentShortfall"]["event_count"]
        assert booked == self.window["resident_shortfall_seconds"]
        lost = sum(map(int, re.findall(r"after the outage: (\d+) of \d+ residents", self.logs)))
        failed = self.rows["rps_TimeToWake"]["failure_count"]
        assert lost + failed > 0 and booked > 0, self.logs[-3000:]  # it cost residents, booked
        gauged = sum(v for s, v in self.gauged_shortfall.items() if s in self.hold)
        # Also missing at a sample: a wake slower than the half second from its tick, and a
        # second the generator could not keep time in (it may sample late).
        hold = self.hold
        wakes = self.run.recorder.window_seconds(hold.start, hold.stop).row("rps", "TimeToWake")
        slow = wakes.response.count - wakes.response.count_at_or_below(500.0)
        saturated = len(self.run.load.health.saturated_in(hold.start, hold.stop))
        missing = lost + failed + slow + saturated
        assert abs(booked - gauged) <= missing, (booked, gauged, lost, failed, slow, saturated)


async def serving_count(client: HttpSubstrate, atespace: str) -> int | None:
    """Actors of the run holding a worker, as the substrate says; None while it does not
    answer."""
    try:
        return sum(a.status in SERVING for a in await client.list_actors(atespace))
    except SubstrateError as exc:
        return 0 if exc.code == "NOT_FOUND" else None  # no atespace (yet): nothing runs


async def leftovers(client: HttpSubstrate, atespace: str) -> list[str]:
    try:
        return [a.name for a in await client.list_actors(atespace)]
    except SubstrateError as exc:
        assert exc.code == "NOT_FOUND", exc  # no atespace at all: nothing in it either
        return []


def snapshot_files(store: Path, atespace: str) -> list[Path]:
    return [p for p in (store / "snapshots" / atespace).rglob("*") if p.is_file()]


@pytest.mark.parametrize("protocol", ["json", "ate"])
async def test_a_router_503_blip_and_the_resident_set_is_whole_again_within_the_rule(
    served: Substrate, tmp_path: Path, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert served.proc is not None
    watch = Watch(monkeypatch)
    atespace = f"blip-{protocol}"
    run = Run(run_params(tmp_path, served, atespace, protocol), handle_signals=False)
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        hold = asyncio.create_task(run.hold(HOLD_CAP_S, should_stop=watch.should_stop))
        await ticks_on(run, hold, 1)  # swapping, the set whole from the fill
        await asyncio.to_thread(served.proc.set_faults, ["router:unavailable:1"])
        # Every wake is refused from now on: each tick's swaps park residents and their wakes
        # fail. Cleared once that cost two ticks' swaps.
        await until(lambda: run.load.residents() <= AWAKE - 2 * RATE, run, hold, "the blip cost")
        fired = (await asyncio.to_thread(served.proc.faults))["rules"][0]["fired"]
        await asyncio.to_thread(served.proc.set_faults, [])
        await until(lambda: run.load.residents() == AWAKE, run, hold, "the set was whole again")
        await swaps_on(run, hold, 2 * RATE)
        watch.enough = True
        finish(run, (await hold)[2])
    books = Artifacts(run)
    print(f"fired {fired}; ticks' shortfall {books.tick_line()}")

    # The blip was real and the engine saw it: wakes failed inside it, 503s, none counted.
    assert fired > 0 and books.rows["rps_TimeToWake"]["failure_count"] >= RATE
    last_failed = max(s for s, n in books.failed_wakes.items() if n > 0)
    # It cost residents, and the ticks booked the gap rather than hiding it...
    assert sum(books.shortfall.get(s, 0) for s in books.hold if s <= last_failed + 1) > 0
    # ...then made it good at the catch-up rate: whole again within the rule's ticks of the last
    # failed wake.
    whole = books.whole_again(last_failed)
    assert whole - last_failed <= REFILL_TICKS, books.tick_line()
    # Whole from then on, but for wakes slower than a tick (a resident-second each second).
    later = [s for s in books.hold if s > whole]
    wakes = run.recorder.window_seconds(whole, books.hold.stop).row("rps", "TimeToWake")
    gap = sum(books.shortfall.get(s, 0) for s in later)
    assert later and gap <= seconds_late(wakes.response), books.tick_line()
    # The swaps went on: every tick after the blip started RATE swaps (or booked Backlog for
    # want of an idle resident), and every wake from then on succeeded (the last ones may
    # answer after the window, or be cut off by the stop's grace).
    after = [s for s in books.hold if s > last_failed]
    woken = sum(n for s, n in books.woken.items() if s > last_failed)
    cut = books.rows["rps_TimeToWake"]["cancelled_count"] + books.window["backlog"]
    assert woken + cut >= RATE * len(after), (woken, cut, after, books.woken)
    books.check_outcome()
    assert books.status["leaked_actors"] == []
    client = HttpSubstrate(served.url, control_timeout=10)
    try:
        assert await leftovers(client, atespace) == []
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    ("protocol", "same_store"), [("json", True), ("ate", True), ("json", False)]
)
async def test_the_substrate_killed_mid_hold_and_restarted_on_the_same_port(
    served: Substrate,
    tmp_path: Path,
    protocol: str,
    same_store: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watch = Watch(monkeypatch)
    atespace = f"kill-{protocol}-{'kept' if same_store else 'lost'}"
    run = Run(run_params(tmp_path, served, atespace, protocol), handle_signals=False)
    client = HttpSubstrate(served.url, control_timeout=2)
    # What the engine counts resident, then what the substrate runs, read one after the other
    # from the first pass of the check after the outage on.
    samples: list[tuple[int, int | None]] = []

    def replaced() -> int:  # a replacement books DeleteActor; cleanup's deletes do not
        row = run.recorder.totals().row("grpc", "DeleteActor")
        return row.count - row.failures

    # What the restart lost at the least: with the store, the residents' actors, but for the
    # RATE a tick was parking when the kill came (a snapshot written before it survives the
    # restart, and a busy box makes that likely: seen, 6 of 8 lost); without it every actor,
    # but for the RATE a tick was moving (those are found as they are next touched).
    lost_at_least = AWAKE - RATE if same_store else SESSIONS - RATE
    try:
        async with run:
            await run.preflight()
            await run.register()
            await run.fill()
            hold = asyncio.create_task(run.hold(HOLD_CAP_S, should_stop=watch.should_stop))
            await ticks_on(run, hold, 1)
            watch.unanswered.clear()
            killed_pid = await asyncio.to_thread(served.sigkill)
            await until(watch.unanswered.is_set, run, hold, "a probe went unanswered")
            if not same_store:  # a platform that lost its state: no atespace, no actors
                served.store = tmp_path / "empty-store"
            await asyncio.to_thread(served.start)
            await until(watch.checked.is_set, run, hold, "the check's first pass")
            # Until the set is whole again, in the books and on the substrate (a tick's swaps
            # may be moving), and what the restart lost is replaced.
            while not samples or not (
                samples[-1][0] == AWAKE
                and (samples[-1][1] or 0) >= AWAKE - RATE
                and replaced() >= lost_at_least
            ):
                assert not hold.done(), f"not whole again: {run.stop_reason()} {samples}"
                samples.append((run.load.residents() or 0, await serving_count(client, atespace)))
                await asyncio.sleep(0.2)
            await swaps_on(run, hold, 2 * RATE)
            watch.enough = True
            finish(run, (await hold)[2])
        books = Artifacts(run)
        assert watch.back_seen is not None
        print(f"ticks' shortfall {books.tick_line()}; back seen {watch.back_seen % 1000:.1f}")
        print(f"last loss {books.last_loss(after=watch.back_seen) % 1000}")
        print("resident/serving " + " ".join(f"{r}/{n}" for r, n in samples))

        # From the check on, the books count no resident the substrate does not run (a crashed
        # actor counted as awake until a swap happened to park it); a tick's parks may start
        # between the two readings, and the next passes judge a session moving during the
        # first.
        assert all(n is not None and r <= n + RATE for r, n in samples), samples
        # In the books: whole again within the rule's ticks of the last slot it had to make
        # good (from seeing the substrate back on: a failed wake, a replacement), and the swaps
        # went on after it.
        last_loss = books.last_loss(after=watch.back_seen)
        whole = books.whole_again(last_loss)
        assert whole - last_loss <= REFILL_TICKS, (last_loss % 1000, books.tick_line())
        assert sum(n for s, n in books.woken.items() if s >= whole) >= RATE, books.woken
        books.check_books_agree()
        books.check_outcome()
        # Nothing of the run is left on the restarted substrate: not in its API...
        assert books.status["leaked_actors"] == []
        assert await leftovers(client, atespace) == []
    finally:
        await client.aclose()
    # ...nor on its disk: no snapshot of the run, no runtime dir of the killed server.
    assert snapshot_files(served.store, atespace) == []
    assert not (served.store / f"{RUNTIME_PREFIX}{killed_pid}").exists()
