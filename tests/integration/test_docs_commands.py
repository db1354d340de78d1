"""Every command the getting-started page shows runs as it says, pasted into bash.

The page's `shell` blocks are read, continuation lines joined. Each command is run as shown
except where a person's run would not fit a test: the install (`python3 -m venv … && pip
install -e .`) is what made this test's own environment, so its `agentsession campaign
--preset demo` is run with `--print-params` (the preset resolved and validated; the demo
itself runs, shortened, in test_ate_demo.py); `bash .ci/run` is CI itself; `xdg-open` is
replaced by a check that the file exists and `OTHER_RUN` by the run itself. The run the page
reads is a short judged campaign named like the demo's, written where the demo writes, with
rules a healthy substrate holds at any speed and the generator's void rule off (a shared test
machine saturates it), so its verdict is a pass the gate must exit 0 for."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import run_campaign_blocking

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs/getting-started.md"
BIN = Path(sys.executable).parent
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e . && "

pytestmark = pytest.mark.timeout(240)


def page_commands() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```shell\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.sub(r"\s+#\s.*$", "", line).strip()  # a trailing comment
            if command:
                commands.append(" ".join(command.split()))
    return commands


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A directory laid out as the page expects: .venv/bin (this test's environment) and
    ./artifacts holding one judged campaign named like the demo, which passed."""
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv/bin").symlink_to(BIN)
    pop = {"sessions": 6, "awake": 2, "target_rps": 2, "registration_quiet_seconds": 1}
    params = CampaignParams(
        name="demo",
        tag="demo",
        script="smoke",
        think_scale=0.05,
        hold_minutes=5 / 60,
        window_seconds=5,
        abort={"rules": [], "delay_seconds": 5},
        thresholds=["TimeToWake: count >= 1", "Step_*: failure_ratio < 0.01"],
        population=pop,
        target={"local_workers": 3},
        generator={"void_when_saturated": False},
        out=str(tmp_path / "artifacts"),
    )
    result = run_campaign_blocking(params)
    assert result.verdict == "pass", result.reason
    return tmp_path


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=180, env=env
    )


def test_every_getting_started_command_runs(clone: Path) -> None:
    commands = page_commands()
    demo, find_run, gate, show, compare, ci = commands  # the page's six, in order

    assert demo.startswith(INSTALL) and (BIN / "agentsession").exists()
    shown = bash(demo.removeprefix(INSTALL) + " --print-params", clone)
    assert shown.returncode == 0, shown.stderr[-2000:]
    preset = json.loads(shown.stdout)
    # What the page says the demo is: the smoke script, a turnover, two levels, 30 s windows.
    assert (preset["name"], preset["script"], preset["population"]["kind"]) == (
        "demo",
        "smoke",
        "turnover",
    )
    assert len(preset["levels"]) == 2 and preset["window_seconds"] == 30

    assert ci == "bash .ci/run" and "mkdocs build --strict" in (REPO / ".ci/run").read_text()

    assert show.startswith("xdg-open ") and "OTHER_RUN" in compare
    script = "\n".join(
        [
            "set -e",
            find_run,
            'test -n "$RUN"',
            f"{gate} > gate.out || echo $? > gate.code",
            show.replace("xdg-open", "test -f", 1),
            compare.replace("OTHER_RUN", '"$RUN"'),
            'echo "$RUN"',
        ]
    )
    done = bash(script, clone)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    run_dir = clone / done.stdout.strip().splitlines()[-1]
    # The gate printed the run's verdict and exited 0 for its pass (no gate.code written).
    verdict = json.loads((clone / "gate.out").read_text())["verdict"]
    assert verdict == json.loads((run_dir / "gate.json").read_text())["verdict"] == "pass"
    assert not (clone / "gate.code").exists()
    assert "<html" in (clone / "compare.html").read_text()[:200].lower()
