"""Refusals are verdicts too (issue #11): a campaign or run that cannot start (substrate
unreachable, bad credentials, a template too small) ends `void` with the reason, said in
ONE line with no traceback; `agentsession gate` exits 2 on it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import run_campaign_blocking
from agentsession_core.output.run_dir import verify_manifest
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_args, ate_target

pytestmark = pytest.mark.timeout(600)
CLI = [sys.executable, "-m", "agentsession_core"]
# Caps that only catch a hang: a command's few seconds of work, however busy the machine.
COMMAND_CAP_S = 120
CAMPAIGN_CAP_S = 400  # it starts a temporary Prefect API first


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gate(run_dir: Path) -> int:
    done = subprocess.run([*CLI, "gate", str(run_dir)], capture_output=True, timeout=COMMAND_CAP_S)
    return done.returncode


def assert_void(run_dir: Path, *reason: str) -> None:
    doc = (
        orjson.loads((run_dir / "gate.json").read_bytes())
        if (run_dir / "gate.json").exists()
        else None
    )
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "refused" and status["actors_created"] == 0, status
    if doc is not None:
        assert doc["verdict"] == "void", doc
        assert all(part in doc["reason"] for part in reason), doc["reason"]
    assert verify_manifest(run_dir) == []
    assert gate(run_dir) == 2


def test_a_campaign_against_an_unreachable_substrate_is_void_in_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    done = subprocess.run(
        [
            *CLI,
            "campaign",
            "--preset",
            "demo",
            "--set",
            f"dest={tmp_path / 'art'}",
            "--set",
            f"target.substrate={url}",
            "--set",
            "target.protocol=json",  # the demo preset speaks ate; this closed port is JSON's
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=CAMPAIGN_CAP_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]  # a verdict was reached: void
    err = done.stderr
    assert "Traceback" not in err, err
    said = [line for line in err.splitlines() if url in line]
    assert len(said) == 1 and "refused" in said[0], err
    errors = [line for line in err.splitlines() if "ERROR" in line]
    assert errors == said, err
    assert "verdict: void" in err
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    assert_void(run_dir, "could not start", url)


def test_a_run_with_bad_credentials_is_refused_in_one_line(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            *CLI,
            "run",
            *ate_args(substrate),
            "--script",
            "smoke",
            "--hold",
            "1s",
            "--out",
            str(tmp_path / "art"),
            "--progress",
            "plain",
        ],
        capture_output=True,
        text=True,
        # The token in the environment: `--token` on a command line is refused.
        env={**os.environ, "AGENTSESSION_TOKEN": "not-the-token"},
        timeout=COMMAND_CAP_S,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused" in lines[0] and "UNAUTHENTICATED" in lines[0], lines
    assert "not-the-token" not in done.stderr
    assert_void(Path(done.stdout.strip().splitlines()[-1]))


def test_a_template_too_small_is_a_void_campaign(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    params = CampaignParams(
        out=str(tmp_path / "art"),
        script="smoke",
        hold_minutes=0.1,
        window_seconds=3,
        target=ate_target(substrate, token=TOKEN, template="test/small"),
        population={"sessions": 2, "awake": 1},
    )
    result = run_campaign_blocking(params)
    assert result.verdict == "void" and result.exit_code == 2, result.reason
    assert "min_actor_memory" in result.reason and "test/small" in result.reason
    assert_void(result.run_dir, "could not start", "test/small")
