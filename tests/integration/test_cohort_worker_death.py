"""A worker that dies during a spawn cohort crashes the ready actors it held, and the run
books CrashCount for each and says so (issue 38, docs/SPEC.md §4.5): before, a worker killed
mid-cohort went unseen (exit 0, no CrashCount, no warning), since nothing the cohort still
did failed for it.

Held open deterministically: two workers of four slots and a cohort of nine actors created
at once in lifecycle `none` (a ready actor stays running until its cohort ends), so eight are
ready and the ninth waits for a slot. Once the run's own sessions gauge says eight are ready
(its /metrics: a killed worker's actors that were still resuming would only resume on its
replacement), the test kills the worker holding four of them (SIGKILL, found in the
substrate's own worker listing) while the cohort is open, however long the box took to get
there. The cohort then ends (the ninth placed in a freed slot, or its deadline)
and books exactly four crashes. Real processes: `agentsession run` against a real local
substrate."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import ate_args
from tests.integration.ports import fixed_port

pytestmark = pytest.mark.timeout(300)
READY = 'agentsession_sessions{state="idle"} 8.0'


def ready(port: int) -> bool:
    """The run's own gauge: eight sessions idle, their step 1 done (lifecycle none)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            return READY in answer.read().decode()
    except OSError:
        return False  # not serving yet


def test_a_worker_killed_mid_cohort_books_a_crash_for_each_ready_actor_it_held(
    tmp_path: Path,
) -> None:
    with LocalSubstrateProcess(
        workers=2,
        store=tmp_path / "store",
        extra_args=["--worker-capacity", "4"],
        log_path=tmp_path / "substrate.log",
    ) as sub:
        args = [sys.executable, "-m", "agentsession_core", "run", *ate_args(sub)]
        args += ["--script", "smoke", "--population", "spawn", "--sessions", "9"]
        args += ["--at-once", "true", "--lifecycle-mode", "none", "--think-scale", "0.05"]
        args += ["--cohort-deadline-seconds", "20s", "--hold", "30s"]
        port = fixed_port()
        args += ["--out", str(tmp_path / "out"), "--metrics-port", str(port)]
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        run = subprocess.Popen(
            args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        said: list[str] = []
        reader = threading.Thread(
            target=lambda: said.extend(line.rstrip("\n") for line in run.stderr or []),
            daemon=True,
        )
        reader.start()
        try:
            until = time.monotonic() + 180  # a hang, not a speed
            while True:
                assert run.poll() is None and time.monotonic() < until, "\n".join(said[-30:])
                if ready(port):
                    break
                time.sleep(0.2)
            # The substrate's worker listing is a JSON-only debug endpoint: the test's look.
            (victim, _) = [w for w in sub.debug_workers()["workers"] if len(w["running"]) == 4]
            os.kill(victim["pid"], signal.SIGKILL)
            run.wait(timeout=240)  # not communicate(): it would race the reader for stderr
            out = run.stdout.read() if run.stdout else ""
        finally:
            if run.poll() is None:
                run.kill()
        reader.join(10)
    text = "\n".join(said)
    warnings = [line for line in said if "of its ready actors crashed before it ended" in line]
    assert len(warnings) == 1, text[-4000:]
    assert "spawn cohort 1: 4 of its ready actors crashed" in warnings[0]
    for name in victim["running"]:
        assert name.split("/")[-1] in warnings[0]  # atespace/actor
    (stats,) = Path(out.strip().splitlines()[-1]).glob("stats.csv")
    rows = {(row["Type"], row["Name"]): row for row in csv.DictReader(stats.open())}
    assert rows[("actor", "CrashCount")]["Request Count"] == "4", rows.get(("actor", "CrashCount"))
