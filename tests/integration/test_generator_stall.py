"""A load generator whose own event loop stalls is not a substrate that went away (issue 29,
docs/SPEC.md §4.2): 2,000 sessions / 200 awake / 50 swaps/s on 256 local workers failed in
registration with "substrate unreachable for 39 s" while the generator's loop lagged 0.5–1.5 s,
and went on registering after the run had failed.

Reproduced at a scale this box takes: a real `agentsession run` registering 300 sessions
against a real local substrate, the generator process starved for real by the kernel while
the substrate stays up and answers: stopped 2 s, let run 20 ms, over and over. Before issue
34 the watchdog, sleeping in step with the stops, had every probe answered and saw no single
stall of its 10 s limit: the run printed SATURATED for three minutes and never failed. Now
the stalls add up (10 s of them within 20 s fail the run), so the outcome does not depend on
how fast the machine is: a slower box only stalls the generator more.

The run ends void with a line that blames the generator, never the substrate; and once it
has failed no CreateActor reaches the substrate: the run says how many it had sent when it
failed, and the substrate's own count at the end (a fault rule that never fires,
`create:refuse:0`, counts every CreateActor it sees) is no more than that.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import ate_args

pytestmark = pytest.mark.timeout(300)
SESSIONS = 300
COUNTS_CREATES = "create:refuse:0"  # seen on every CreateActor, fires on none
SENT = re.compile(r"nothing new starts after the failure \((\d+) CreateActor sent before it\)")
# Only a hang: the watchdog fails a starved generator after 10 s of stalls within 20 s.
FAILS_WITHIN_S = 150


def creates_seen(proc: LocalSubstrateProcess) -> int:
    (rule,) = [r for r in proc.faults()["rules"] if r["rule"] == COUNTS_CREATES]
    return int(rule["seen"])


class Lines:
    """The generator's stderr, read as it comes; `failed` once it logs an ERROR."""

    def __init__(self, pipe: object) -> None:
        self.lines: list[str] = []
        self.failed = threading.Event()
        self.registering = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: object) -> None:
        for line in pipe:  # type: ignore[attr-defined]
            self.lines.append(line.rstrip("\n"))
            if "progress: register" in line:
                self.registering.set()
            if " ERROR " in line:
                self.failed.set()

    def join(self) -> str:
        self._thread.join(10)
        return "\n".join(self.lines)


@dataclass
class Stalled:
    returncode: int
    said: str
    run_dir: Path
    creates_seen: int
    substrate_up: bool


def starve_while_registering(tmp_path: Path) -> Stalled:
    """A real `agentsession run` against a real local substrate, its process stopped 2 s and
    let run 20 ms, over and over, from a few seconds into registration until it fails."""
    with LocalSubstrateProcess(
        workers=4,
        store=tmp_path / "store",
        faults=[COUNTS_CREATES],
        log_path=tmp_path / "substrate.log",
    ) as sub:
        args = [sys.executable, "-m", "agentsession_core", "run", *ate_args(sub)]
        args += ["--script", "smoke", "--population", "turnover", "--sessions", str(SESSIONS)]
        # 2.5/s: registering everyone takes 120 s unhindered, far longer than the run takes
        # to fail once starved.
        args += ["--awake", "4", "--target-rps", "2", "--spawn-rate", "2.5"]
        args += ["--think-scale", "0.05", "--registration-quiet-seconds", "1s", "--hold", "5s"]
        # Registration must not run out of time first: its own deadline is another failure.
        args += ["--registration-deadline-seconds", "600s", "--stop-grace-seconds", "2s"]
        args += ["--out", str(tmp_path / "out"), "--progress", "plain"]
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        generator = subprocess.Popen(
            args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        lines = Lines(generator.stderr)
        try:
            assert lines.registering.wait(120), lines.join()[-3000:]
            until = time.monotonic() + FAILS_WITHIN_S
            while not lines.failed.is_set() and generator.poll() is None:
                assert time.monotonic() < until, lines.join()[-3000:]
                os.kill(generator.pid, signal.SIGSTOP)
                time.sleep(2.0)
                os.kill(generator.pid, signal.SIGCONT)
                time.sleep(0.02)
        finally:
            if generator.poll() is None:
                os.kill(generator.pid, signal.SIGCONT)
        # Not communicate(): it would read stderr too, racing the reader thread for its end.
        generator.wait(timeout=150)
        out = generator.stdout.read() if generator.stdout else ""  # one line: the run dir
        said = lines.join()
        seen = creates_seen(sub)
        up = sub.process is not None and sub.process.poll() is None
    print(f"CreateActor seen by the substrate: {seen}")
    print("\n".join(line for line in said.splitlines() if " ERROR " in line or SENT.search(line)))
    return Stalled(generator.returncode, said, Path(out.strip().splitlines()[-1]), seen, up)


def test_a_starved_generator_is_blamed_not_the_substrate(tmp_path: Path) -> None:
    run = starve_while_registering(tmp_path)
    said = run.said
    assert run.substrate_up
    assert run.returncode == 1, said[-3000:]
    errors = [line for line in said.splitlines() if " ERROR " in line]
    assert errors, said[-3000:]
    first = errors[0]
    assert "the load generator's event loop stalled" in first, first
    assert "the substrate was not shown unreachable" in first, first
    assert "substrate unreachable" not in said, said[-3000:]
    last = said.strip().splitlines()[-1]
    # The generator's fault, not the substrate's: void (as a lost shard), not failed.
    assert last.startswith("agentsession run: void: the load generator's event loop"), last
    status = json.loads((run.run_dir / "status.json").read_text())
    assert status["status"] == "void", status
    assert "the load generator's event loop stalled" in status["abort_reason"], status
    # Registration stopped when the run failed: the substrate saw no CreateActor beyond those
    # the run had sent by then, by its own count, and not everyone had been registered.
    (sent,) = [int(m[1]) for line in said.splitlines() if (m := SENT.search(line))]
    assert status["actors_created"] <= run.creates_seen <= sent < SESSIONS, (run, sent)
    # The substrate stayed up: cleanup deleted everything the run created.
    assert status["leaked_actors"] == [], status["leaked_actors"]
