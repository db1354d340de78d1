"""How `agentsession run` ends when its run did not complete (issue #29): one line on stderr
saying the run failed and why, before the last line, which stays the run directory. Real
processes: the command and a local substrate whose every wake is refused once the fill is
done, so the turnover's resident set stays short (engine/populations/turnover.py
`problem()`, docs/SPEC.md §4.2)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from local_substrate.launcher import LocalSubstrateProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

CLI = [sys.executable, "-m", "agentsession_core"]


def test_a_run_whose_resident_set_stayed_short_says_it_failed_and_why(tmp_path: Path) -> None:
    with LocalSubstrateProcess(
        workers=4, store=tmp_path / "store", park_timeout=5, log_path=tmp_path / "substrate.log"
    ) as substrate:
        args = [
            *CLI,
            "run",
            "--substrate",
            substrate.url,
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
            "8s",
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
            started = time.monotonic()
            out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
    stderr = "".join(seen) + err
    assert "Traceback" not in stderr, stderr[-3000:]
    assert proc.returncode == 1, stderr[-3000:]
    assert time.monotonic() - started < 90
    run_dir = Path(out.strip().splitlines()[-1])
    status = orjson.loads((run_dir / "status.json").read_bytes())
    reason = status["abort_reason"]
    assert status["status"] == "failed" and reason.startswith("turnover: the resident set"), status
    # The last line on stderr says the run failed, and why; the reason is said once.
    last = stderr.strip().splitlines()[-1]
    assert last == f"agentsession run: failed: {reason}", stderr[-3000:]
    assert stderr.count(reason) == 1, stderr[-3000:]
