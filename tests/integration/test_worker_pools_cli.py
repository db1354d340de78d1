"""`target.worker_pools` as a person types it (issue 29, docs/SPEC.md §2.6), through the real
`agentsession run` command: the `{fast: 3, slow: 1}` form its `--help` shows and the
upstream flag form `name:weight,name:weight` are both taken, as a flag and through `--set`;
a weight past the bound (1e26 once passed, then crashed the run with "Integer exceeds 64-bit
range") is refused in one line naming `target.worker_pools`, before anything starts; and a
short real run with pools on the embedded local substrate completes, each pool carrying wakes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentsession_core.engine.target_params import MAX_POOL_WEIGHT
from tests.integration.terminal import SMALL_TURNOVER

pytestmark = pytest.mark.timeout(600)
CLI = [sys.executable, "-m", "agentsession_core"]
# Caps that only catch a hang, however busy the machine: a refusal, a short run.
COMMAND_CAP_S = 120
RUN_CAP_S = 300


def command(args: list[str], timeout: float = COMMAND_CAP_S) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def printed_pools(args: list[str]) -> object:
    done = command(["run", "--print-params", *args])
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)["target"]["worker_pools"]


def test_the_help_shows_the_forms_that_are_taken() -> None:
    shown = command(["run", "--help"]).stdout
    assert "{pool: weight}" in shown and "name:weight,name:weight" in shown


@pytest.mark.parametrize(
    "args",
    [
        ["--worker-pools", "{fast: 3, slow: 1}"],  # the form --help shows
        ["--worker-pools", "fast:3,slow:1"],  # upstream's flag form
        ["--worker-pools", "fast: 3, slow: 1"],
        ["--set", "target.worker_pools={fast: 3, slow: 1}"],
        ["--set", "target.worker_pools=fast:3,slow:1"],
    ],
    ids=lambda a: " ".join(a),
)
def test_both_forms_are_taken_on_the_command_line(args: list[str]) -> None:
    assert printed_pools(args) == {"fast": 3, "slow": 1}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--worker-pools", "fast:100000000000000000000000000,slow:1"], "weight"),
        (["--worker-pools", "{fast: 100000000000000000000000000, slow: 1}"], "weight"),
        (["--set", "target.worker_pools={fast: 1e26}"], "weight"),
        (["--worker-pools", f"fast:{MAX_POOL_WEIGHT + 1}"], f"at most {MAX_POOL_WEIGHT:,}"),
        (["--worker-pools", "{fast: 3, slow"], "target.worker_pools"),
        (["--worker-pools", "{fast: [1]}"], "weight"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else a,
)
def test_absurd_weights_are_refused_in_one_line_before_anything_starts(
    args: list[str], says: str, tmp_path: Path
) -> None:
    out = tmp_path / "art"
    done = command(["run", "--script", "smoke", "--hold", "2s", "--out", str(out), *args])
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert "parameter target.worker_pools" in lines[0] and says in lines[0], lines[0]
    assert "Traceback" not in done.stderr and len(lines[0]) < 400
    assert not out.exists()


def test_a_short_run_with_the_help_form_of_pools_completes(tmp_path: Path) -> None:
    args = ["run", *SMALL_TURNOVER, "--hold", "4s", "--seed", "3", "--progress", "plain"]
    args += ["--worker-pools", "{fast: 3, slow: 1}", "--out", str(tmp_path)]
    done = command(args, timeout=RUN_CAP_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "completed", status
    campaign = json.loads((run_dir / "campaign.json").read_text())
    assert campaign["params"]["target"]["worker_pools"] == {"fast": 3, "slow": 1}
    rows = {
        json.loads(line)["metric"]
        for line in (run_dir / "stats.jsonl").read_text().splitlines()
        if line.strip()
    }
    # Every wake is booked on its pool's row too: the pools carried the turnover.
    pools = {row.split(":pool=", 1)[1] for row in rows if ":pool=" in row}
    assert pools and pools <= {"fast", "slow"}, sorted(rows)
