"""A latency is never negative (issue 38, docs/SPEC.md §4.5): a spawn cohort whose deadline
passes before an actor's turn in the ramp came books that actor as failing at the deadline,
from the moment it was due at the latest, never as a sample that ends before it began. The
hostile user's run (`--cohort-deadline-seconds 1ms`, eight actors on a ramp) had
ActorTimeToReady at -348.8 ms on average and -699 ms at least in stats.csv. A real
`agentsession run` against the embedded local substrate; stats.csv read as written."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path


def test_a_cohort_deadline_before_the_ramp_ends_books_no_negative_latency(
    tmp_path: Path,
) -> None:
    args = [sys.executable, "-m", "agentsession_core", "run", "--script", "smoke"]
    args += ["--population", "spawn", "--sessions", "8", "--cohort-deadline-seconds", "1ms"]
    args += ["--hold", "5s", "--think-scale", "0.05", "--out", str(tmp_path / "out")]
    done = subprocess.run(args, capture_output=True, text=True, timeout=180)
    # No cohort had every actor ready: the run says so and fails (docs/SPEC.md §4.5).
    assert done.returncode == 1, done.stderr[-3000:]
    assert "none of" in done.stderr and "not ready by the deadline" in done.stderr
    (stats,) = (Path(done.stdout.strip().splitlines()[-1])).glob("stats.csv")
    rows = {row["Name"]: row for row in csv.DictReader(stats.open())}
    ready = rows["ActorTimeToReady"]
    assert int(ready["Request Count"]) >= 8 and ready["Failure Count"] == ready["Request Count"]
    for name, row in rows.items():
        for column in ("Min Response Time", "Average Response Time", "Median Response Time"):
            assert float(row[column]) >= 0, (name, column, row[column])
