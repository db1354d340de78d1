"""A turnover run (`agentsession run`, a real process) through a substrate that goes away and
comes back (issue 11, docs/SPEC.md §4.2 "the resident set holds its size"):

- a 2-second router 503 blip (`router:unavailable:1`, put and cleared through the control
  endpoint while the hold runs): the swaps go on after it and the resident set is back at
  `awake` within 10 s of its end;
- the substrate process killed with SIGKILL mid-hold and started again on the same ports, on
  the same store (the actors that were in workers come back CRASHED) or on an empty one (a
  platform that lost its state: atespace and actors gone): the engine finds and replaces what
  was lost (it checks its residents against the substrate once the watchdog sees it answer
  again, instead of counting crashed actors as awake until it next touched them), makes the
  atespace again when it is gone, is back at `awake` within 10 s of the restart (in its books
  and on the substrate) and its books agree with the substrate from then on; at the end the
  restarted substrate holds nothing of the run, in its API or on its disk.

Everything asserted about the load comes from the run's own artifacts (stats_history.csv,
gauges.jsonl, stats.jsonl, status.json), once a second as the engine booked it; the
substrate's API is asked only what it holds (the truth the books are checked against).
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentsession_core.engine.populations.turnover import RESIDENT_TOLERANCE
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess
from local_substrate.persist import RUNTIME_PREFIX
from tests.integration.ports import fixed_port
from tests.integration.test_engine_turnover import read_jsonl

pytestmark = pytest.mark.timeout(120)

AWAKE = 8
RATE = 2.0  # swaps per second
SESSIONS = 24
# Every resident holds a worker, and so does each wake of a swap in flight.
WORKERS = AWAKE + 4
HOLD_S = 24.0
STEADY_S = 5.0  # of the hold before the fault: the set is full and swapping
BACK_WITHIN_S = 10.0  # the bound: resident set at `awake` again after the fault
RUN_DEADLINE_S = 90.0  # the whole run process, start-up to cleanup
# When the run can have seen the restarted substrate answer: the watchdog probes every
# watchdog.RETRY_S once it missed one, plus a second for the gauge's own sampling; gRPC
# reconnects after its backoff, at most 3 s (ate/control.py RECONNECT_BACKOFF_MS).
SEEN_BACK_S = {"json": 2.0, "ate": 5.0}


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


def run_command(
    out: Path,
    substrate: Substrate,
    atespace: str,
    protocol: str,
    *,
    sessions: int = SESSIONS,
    awake: int = AWAKE,
    hold_s: float = HOLD_S,
) -> list[str]:
    if protocol == "ate":
        target = [
            *("--substrate", f"grpc://127.0.0.1:{substrate.grpc_port}"),
            *("--router", substrate.url),
        ]
    else:
        target = ["--substrate", substrate.url]
    return [
        *(sys.executable, "-m", "agentsession_core", "run", "--progress", "plain"),
        *target,
        *("--protocol", protocol, "--atespace", atespace, "--out", str(out)),
        *("--population", "turnover", "--sessions", str(sessions), "--awake", str(awake)),
        *("--target-rps", str(RATE), "--spawn-rate", "50", "--registration-quiet", "0.5s"),
        # Two owed wakes a tick (the default, 0.5, gives one at this rate): a set that lost
        # every resident is full again in 4 s, well inside the 10 s the issue allows.
        *("--catch-up-ratio", "1"),
        *("--script", "smoke", "--seed", "5", "--hold", f"{hold_s:g}s"),
        *("--request-timeout-seconds", "5s", "--stop-grace-seconds", "2s"),
    ]


class RunProcess:
    """`agentsession run` in its own process; its artifacts once it has ended."""

    def __init__(self, out: Path, command: list[str]) -> None:
        self.out = out
        self.command = command
        self.proc: asyncio.subprocess.Process | None = None
        self.run_dir: Path | None = None
        self.started = time.monotonic()

    async def start(self) -> None:
        with (self.out / "run.log").open("wb") as log:  # the child keeps its own copy
            self.proc = await asyncio.create_subprocess_exec(
                *self.command, stdout=asyncio.subprocess.PIPE, stderr=log
            )

    def status(self) -> dict | None:
        for path in self.out.glob("runs/**/status.json"):
            try:
                return json.loads(path.read_text())
            except ValueError:  # caught mid-write: the next poll reads it
                return None
        return None

    async def hold_started(self) -> None:
        """Until status.json (rewritten every second) says the hold runs."""
        while (status := self.status()) is None or status["phase"] != "hold":
            assert self.proc is not None and self.proc.returncode is None, "run ended early"
            assert time.monotonic() - self.started < 60, f"no hold: {status}"
            await asyncio.sleep(0.2)

    async def ended(self) -> int:
        assert self.proc is not None
        left = RUN_DEADLINE_S - (time.monotonic() - self.started)
        stdout, _ = await asyncio.wait_for(self.proc.communicate(), max(left, 1.0))
        self.run_dir = Path(stdout.decode().strip().splitlines()[-1])
        assert self.proc.returncode is not None
        return self.proc.returncode

    def artifacts(self) -> Artifacts:
        assert self.run_dir is not None
        return Artifacts(self.run_dir)


class Artifacts:
    """What the engine booked, per unix second."""

    def __init__(self, run_dir: Path) -> None:
        self.status = json.loads((run_dir / "status.json").read_text())
        self.rows = read_jsonl(run_dir / "stats.jsonl")
        self.window = self.rows["turnover_window"]
        self.resident: dict[int, float] = {}
        self.shortfall: dict[int, float] = {}
        for line in (run_dir / "gauges.jsonl").read_text().splitlines():
            gauge = json.loads(line)
            if gauge["name"] == "turnover_resident":
                into = self.resident if gauge["labels"]["state"] == "resident" else self.shortfall
                into[int(gauge["t"])] = gauge["value"]
        self.woken: dict[int, int] = {}  # successful TimeToWake: swaps done (and owed wakes)
        self.failed_wakes: dict[int, int] = {}
        with (run_dir / "stats_history.csv").open() as history:
            for row in csv.DictReader(history):
                if (row["Type"], row["Name"]) == ("rps", "TimeToWake"):
                    second, booked = int(row["Timestamp"]), float(row["Requests/s"])
                    failed = float(row["Failures/s"])
                    self.woken[second] = round(booked - failed)
                    self.failed_wakes[second] = round(failed)

    @property
    def end(self) -> float:
        """When the load stopped (cleanup deletes the actors after it)."""
        return float(self.window["end_unix"])

    @property
    def hold(self) -> range:
        """The whole seconds of the turnover window."""
        return range(int(self.window["start_unix"]), int(self.window["end_unix"]))

    def back_at_awake(self, after: float) -> int:
        """The first second from `after` on whose resident gauge is `awake` again."""
        for second in self.hold:
            if second >= int(after) and self.resident.get(second) == AWAKE:
                return second
        raise AssertionError(f"never back at {AWAKE} after {after:.0f}: {self.gauge_line()}")

    def gauge_line(self) -> str:
        return " ".join(f"{s % 1000}:{self.resident.get(s, '-')}" for s in self.hold)

    def check_verdict(self) -> None:
        """completed, or failed with the shortfall line, as the mean gap says (§4.2)."""
        mean = self.window["resident_shortfall_mean"]
        if mean > RESIDENT_TOLERANCE * AWAKE:
            assert self.status["status"] == "failed", self.status
            assert self.status["abort_reason"].startswith("turnover: the resident set averaged")
        else:
            assert self.status["status"] == "completed", self.status


async def running_count(client: HttpSubstrate, atespace: str) -> int | None:
    """RUNNING actors of the run, as the substrate says; None while it does not answer."""
    try:
        return sum(a.status == "RUNNING" for a in await client.list_actors(atespace))
    except SubstrateError:
        return None


async def leftovers(client: HttpSubstrate, atespace: str) -> list[str]:
    try:
        return [a.name for a in await client.list_actors(atespace)]
    except SubstrateError as exc:
        assert exc.code == "NOT_FOUND", exc  # no atespace at all: nothing in it either
        return []


def snapshot_files(store: Path, atespace: str) -> list[Path]:
    return [p for p in (store / "snapshots" / atespace).rglob("*") if p.is_file()]


@pytest.mark.parametrize("protocol", ["json", "ate"])
async def test_a_two_second_router_503_blip_and_the_resident_set_is_back_within_10s(
    served: Substrate, tmp_path: Path, protocol: str
) -> None:
    assert served.proc is not None
    atespace = f"blip-{protocol}"
    run = RunProcess(tmp_path, run_command(tmp_path, served, atespace, protocol))
    await run.start()
    await run.hold_started()
    await asyncio.sleep(STEADY_S)
    blip_start = time.time()
    await asyncio.to_thread(served.proc.set_faults, ["router:unavailable:1"])
    await asyncio.sleep(2.0)
    fired = (await asyncio.to_thread(served.proc.faults))["rules"][0]["fired"]
    await asyncio.to_thread(served.proc.set_faults, [])
    blip_end = time.time()
    assert await run.ended() in (0, 1)
    books = run.artifacts()
    print(f"blip {blip_start % 1000:.1f}-{blip_end % 1000:.1f}; gauge {books.gauge_line()}")

    # The blip was real and the engine saw it: wakes failed inside it, 503s, none counted.
    assert fired > 0
    blip = range(int(blip_start), int(blip_end) + 2)
    assert sum(books.failed_wakes.get(s, 0) for s in blip) > 0, books.failed_wakes
    failures = books.rows["rps_TimeToWake"]
    assert failures["failure_count"] > 0
    # It cost residents, and the engine booked the gap rather than hiding it...
    assert min(books.resident.get(s, AWAKE) for s in blip) < AWAKE, books.gauge_line()
    assert sum(books.shortfall.get(s, 0) for s in blip) > 0
    # ...then filled it again within 10 s of the blip's end, and stayed full.
    back = books.back_at_awake(blip_end)
    assert back - blip_end <= BACK_WITHIN_S, books.gauge_line()
    after = [s for s in books.hold if s > back]
    assert after and min(books.resident[s] for s in after) >= AWAKE - RATE, books.gauge_line()
    # The swaps went on: not 0 after the blip, but the configured rate.
    swaps = sum(books.woken.get(s, 0) for s in books.hold if s >= blip_end + 1)
    seconds = books.hold.stop - int(blip_end) - 1
    assert swaps >= 0.8 * RATE * seconds, (swaps, seconds, books.woken)
    books.check_verdict()
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
    served: Substrate, tmp_path: Path, protocol: str, same_store: bool
) -> None:
    atespace = f"kill-{protocol}-{'kept' if same_store else 'lost'}"
    run = RunProcess(tmp_path, run_command(tmp_path, served, atespace, protocol))
    client = HttpSubstrate(served.url, control_timeout=2)
    try:
        await run.start()
        await run.hold_started()
        await asyncio.sleep(STEADY_S)
        killed_pid = await asyncio.to_thread(served.sigkill)
        killed_at = time.time()
        await asyncio.sleep(2.0)
        if not same_store:  # a platform that lost its state: no atespace, no actors
            served.store = tmp_path / "empty-store"
        await asyncio.to_thread(served.start)
        restarted_at = time.time()
        # The truth the books are checked against: what the substrate runs, twice a second.
        running: dict[float, int | None] = {}
        assert run.proc is not None
        while run.proc.returncode is None and time.time() - restarted_at < HOLD_S:
            running[time.time()] = await running_count(client, atespace)
            await asyncio.sleep(0.5)
        code = await run.ended()
        books = run.artifacts()
        print(
            f"killed {killed_at % 1000:.1f}, restarted {restarted_at % 1000:.1f}; "
            f"gauge {books.gauge_line()}; running "
            + " ".join(f"{t % 1000:.0f}:{n}" for t, n in running.items())
        )
        if books.status["status"] == "failed" and "unreachable" in books.status["abort_reason"]:
            # The other outcome the issue allows: the run ended, saying why.
            assert code == 1
        else:
            # What the server lost (the residents' actors, or with the store every actor) was
            # found and replaced (a replacement books DeleteActor; cleanup's deletes do not).
            deletes = books.rows["grpc_DeleteActor"]
            replaced = deletes["request_count"] - deletes["failure_count"]
            assert replaced >= (AWAKE if same_store else SESSIONS - RATE), replaced
            back = books.back_at_awake(restarted_at)
            assert back - restarted_at <= BACK_WITHIN_S, books.gauge_line()
            # ...and the substrate agrees: `awake` actors really run again (one second's
            # swaps may be in flight when it is asked).
            full = [t for t, n in running.items() if n is not None and n >= AWAKE - RATE]
            assert full and min(full) - restarted_at <= BACK_WITHIN_S, running
            # Soon after the restart the books and the substrate agree: no resident counted
            # that the substrate does not run (a crashed actor counted as awake until a swap
            # happened to park it), once the engine could have seen the substrate back.
            for t, n in running.items():
                if n is not None and restarted_at + SEEN_BACK_S[protocol] <= t < books.end:
                    # The gauge of second s is sampled during s + 1: a second's refills ahead.
                    assert books.resident.get(int(t) - 1, 0) <= n + RATE + 1, (t, n, running)
            swaps = sum(books.woken.get(s, 0) for s in books.hold if s > back)
            assert swaps > 0, books.woken
            books.check_verdict()
        # Nothing of the run is left on the restarted substrate: not in its API...
        assert books.status["leaked_actors"] == []
        assert await leftovers(client, atespace) == []
    finally:
        await client.aclose()
    # ...nor on its disk: no snapshot of the run, no runtime dir of the killed server.
    assert snapshot_files(served.store, atespace) == []
    assert not (served.store / f"{RUNTIME_PREFIX}{killed_pid}").exists()


async def test_an_ate_restart_on_the_same_store_books_the_lost_residents(
    served: Substrate, tmp_path: Path
) -> None:
    """Issue 18: on the ate wire the router serves again seconds before gRPC has reconnected,
    so swaps' wakes succeeded while their parks failed and the set grew past `awake`; the
    surplus then hid the residents the restart lost (logged as lost, booked as 0). Now the
    set never exceeds `awake`, and the books (stats.jsonl, turnover_window) agree with the
    gauge within the bound of docs/SPEC.md §4.2: one resident-second per slot that went
    missing (a failed wake, or a resident found lost)."""
    awake, atespace = 4, "kill-ate-books"
    command = run_command(tmp_path, served, atespace, "ate", sessions=12, awake=awake, hold_s=15)
    run = RunProcess(tmp_path, command)
    client = HttpSubstrate(served.url, control_timeout=2)
    try:
        await run.start()
        await run.hold_started()
        await asyncio.sleep(2.0)
        await asyncio.to_thread(served.sigkill)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(served.start)
        code = await run.ended()
        books = run.artifacts()
        log_text = (tmp_path / "run.log").read_text()
        print(f"gauge {books.gauge_line()}")
        assert max(books.resident.values()) <= awake, books.gauge_line()
        assert books.status["leaked_actors"] == []
        assert await leftovers(client, atespace) == []
        if books.status["status"] == "failed" and "unreachable" in books.status["abort_reason"]:
            # The other outcome the issue allows (a loaded machine restarts slowly): the run
            # ended, saying why; the set never grew and nothing was left behind.
            assert code == 1
            return
        booked = books.rows["turnover_ResidentShortfall"]["event_count"]
        assert booked == books.window["resident_shortfall_seconds"]
        # The residents the check after the outage found lost (an outage shorter than the
        # watchdog's probe period can go unseen: then each is found as it is next touched,
        # by a failed wake or park). The check runs in passes: each finds its own.
        lost = sum(map(int, re.findall(r"after the outage: (\d+) of \d+ residents", log_text)))
        failed_wakes = books.rows["rps_TimeToWake"]["failure_count"]
        assert lost + failed_wakes > 0, log_text  # the restart cost residents...
        if lost:  # ...and what the check found is in the books (not hidden by a surplus)
            assert booked >= 1, log_text
        gauged = sum(books.shortfall.values())
        assert abs(booked - gauged) <= lost + failed_wakes, (booked, gauged, books.gauge_line())
        # The run ends as its books say: failed when the mean gap was above the tolerance.
        short = books.window["resident_shortfall_mean"] > RESIDENT_TOLERANCE * awake
        assert books.status["status"] == ("failed" if short else "completed"), books.status
    finally:
        await client.aclose()
