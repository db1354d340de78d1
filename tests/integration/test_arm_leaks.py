"""Every arm's leaks set the exit code (issue 38, docs/SPEC.md §3.5, §6.8): a paired campaign
whose reference substrate is killed mid-hold cannot delete the reference arm's actors, and
`agentsession campaign` exits 3 as it does for the candidate's, with the reference's actors
in status.json's `leaked_actors` (each with `arm: reference`). Before, "[reference arm]
cleanup: 0 actors deleted, 12 left" exited 0. The hostile user's reproduction, shortened: a
real `agentsession campaign --preset release-gate` (its temporary Prefect API, the embedded
candidate) against a real standalone local substrate as the reference, killed with SIGKILL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from local_substrate.launcher import LocalSubstrateProcess

pytestmark = pytest.mark.timeout(420)
HOLDING = "agentsession - progress: hold"


def test_a_reference_arm_that_leaks_exits_3(tmp_path: Path) -> None:
    reference = LocalSubstrateProcess(workers=6, store=tmp_path / "store")
    reference.start()
    try:
        args = [sys.executable, "-m", "agentsession_core", "campaign", "--preset", "release-gate"]
        args += ["--set", "hold_minutes=1", "--set", "window_seconds=60"]
        args += ["--set", f"reference.substrate={reference.grpc_url}"]
        args += ["--set", f"reference.router={reference.url}", "--set", f"out={tmp_path / 'out'}"]
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        campaign = subprocess.Popen(
            args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        said: list[str] = []
        holding = threading.Event()

        def read() -> None:
            assert campaign.stderr is not None
            for line in campaign.stderr:
                said.append(line.rstrip("\n"))
                if HOLDING in line:
                    holding.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert holding.wait(300), "\n".join(said[-40:])
        reference.kill()  # SIGKILL: nothing of it deletes anything
        campaign.wait(timeout=300)  # not communicate(): it would race the reader for stderr
        out = campaign.stdout.read() if campaign.stdout else ""
        reader.join(10)
    finally:
        reference.stop()
    text = "\n".join(said)
    assert campaign.returncode == 3, text[-4000:]
    assert "[reference arm] cleanup: 0 actors deleted, 12 left" in text, text[-4000:]
    run_dir = Path(out.strip().splitlines()[-1])
    status = json.loads((run_dir / "status.json").read_text())
    theirs = [leak for leak in status["leaked_actors"] if leak.get("arm") == "reference"]
    assert len(theirs) == 12, status["leaked_actors"]
    assert status["reference"]["leaked_actors"] == theirs
