"""How `agentsession run` ends when its run did not complete (issue #29): one line on stderr
saying the run failed and why, before the last line, which stays the run directory. Real
processes: the command and a local substrate whose every wake is refused once the fill is
done, so the turnover's resident set stays short (engine/populations/turnover.py
`problem()`, docs/SPEC.md §4.2). The hold is ended by hand (its control API, §5.10) once
the refusals cost the set residents, as if its duration had ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest

from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import ate_args
from tests.integration.ports import fixed_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

CLI = [sys.executable, "-m", "agentsession_core"]


def booked_a_gap(out: Path) -> bool:
    """A tick booked a ResidentShortfall in the run's stats_history.jsonl."""
    for path in out.glob("**/stats_history.jsonl"):
        for line in path.read_text().splitlines():
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:  # caught mid-write: the next poll reads it
                continue
            if (row.get("type"), row.get("name")) == ("turnover", "ResidentShortfall"):
                if row.get("events", 0) > 0:
                    return True
    return False


def test_a_run_whose_resident_set_stayed_short_says_it_failed_and_why(tmp_path: Path) -> None:
    with LocalSubstrateProcess(
        workers=4, store=tmp_path / "store", park_timeout=5, log_path=tmp_path / "substrate.log"
    ) as substrate:
        port = fixed_port()
        args = [
            *CLI,
            "run",
            *ate_args(substrate),
            "--script",
            "smoke",
            "--population",
            "turnover",
            "--sessions",
            "6",
            "--awake",
            "2",
            "--target-rps",
            "2",
            "--registration-quiet-seconds",
            "0.5s",
            "--think-scale",
            "0.05",
            "--hold",
            "120s",  # ended by hand below
            "--metrics-port",
            str(port),
            "--progress",
            "plain",
            "--out",
            str(tmp_path / "art"),
        ]
        env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL",)}
        proc = subprocess.Popen(
            args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        seen: list[str] = []
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                seen.append(line)
                if "turnover fill done" in line:
                    break
            else:
                pytest.fail(f"the run never reached its hold: {''.join(seen)[-3000:]}")
            # From now on no wake gets a worker: every swap leaves the resident set short.
            substrate.set_faults(["wake:refuse:1"])
            while not booked_a_gap(tmp_path / "art"):  # its books, rewritten every second
                assert proc.poll() is None, "the run ended before the refusals cost it"
                time.sleep(0.2)
            control = f"http://127.0.0.1:{port}/v1/status"
            assert httpx.patch(control, json={"stopped": True}, timeout=10).is_success
            out, err = proc.communicate(timeout=120)  # its cleanup
        finally:
            proc.kill()
    stderr = "".join(seen) + err
    assert "Traceback" not in stderr, stderr[-3000:]
    assert proc.returncode == 1, stderr[-3000:]
    run_dir = Path(out.strip().splitlines()[-1])
    status = orjson.loads((run_dir / "status.json").read_bytes())
    reason = status["abort_reason"]
    assert status["status"] == "failed" and reason.startswith("turnover: the resident set"), status
    # The last line on stderr says the run failed, and why; the reason is said once.
    last = stderr.strip().splitlines()[-1]
    assert last == f"agentsession run: failed: {reason}", stderr[-3000:]
    assert stderr.count(reason) == 1, stderr[-3000:]
