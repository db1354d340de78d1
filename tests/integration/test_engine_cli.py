"""`agentsession run` as a user runs it (a subprocess against the local substrate):
SIGINT mid-hold cleans up and says so; refused runs exit 1 with one clear line and create
no actor."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.interface import Substrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_args

RUN = [sys.executable, "-m", "agentsession_core", "run", "--progress", "plain"]
# Caps that only catch a hang, however busy the machine: a run's start, a command's exit.
START_CAP_S = 300
EXIT_CAP_S = 300
# A target where nothing listens, on the ate wire.
DEAD = ["--substrate", "grpc://127.0.0.1:9", "--router", "http://127.0.0.1:9"]


def start(
    args: list[str], tmp_path: Path, *, token: str | None = None
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    # The token in the environment: `--token` on a command line is refused.
    env = {k: v for k, v in os.environ.items() if k != "AGENTSESSION_TOKEN"}
    if token is not None:
        env["AGENTSESSION_TOKEN"] = token
    proc = subprocess.Popen(
        [*RUN, *args, "--out", str(tmp_path / "artifacts")],
        stdout=out.open("wb"),
        stderr=err.open("wb"),
        env=env,
    )
    return proc, out, err


def status_files(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "artifacts").glob("runs/*/*/*/*/status.json"))


def wait_for_phase(tmp_path: Path, phase: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_CAP_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended early"
        for path in status_files(tmp_path):
            try:
                if json.loads(path.read_text())["phase"] == phase:
                    return
            except (ValueError, KeyError):
                pass  # caught between writes
        time.sleep(0.2)
    raise AssertionError(f"phase {phase} never reached")


def error_lines(err: Path) -> list[str]:
    return [
        line
        for line in err.read_text().splitlines()
        if " ERROR " in line or line.startswith("agentsession")
    ]


async def test_sigint_mid_hold_cancels_cleans_up_and_writes_artifacts(
    substrate: LocalSubstrateProcess, client: Substrate, tmp_path: Path
) -> None:
    atespace = "cli-sigint"
    proc, out, err = start(
        [
            *ate_args(substrate),
            "--atespace",
            atespace,
            "--script",
            "smoke",
            "--population",
            "closed",
            "--sessions",
            "3",
            "--think-scale",
            "0.05",
            "--hold",
            "5m",
            "--seed",
            "7",
        ],
        tmp_path,
        token=TOKEN,
    )
    try:
        # The hold begins once every session's actor exists (registration, docs/SPEC.md §4.1).
        await asyncio.to_thread(wait_for_phase, tmp_path, "hold", proc)
        assert len(await client.list_actors(atespace)) == 3  # the load is running
        proc.send_signal(signal.SIGINT)
        rc = await asyncio.to_thread(proc.wait, EXIT_CAP_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 130, err.read_text()[-2000:]
    run_dir = Path(out.read_text().splitlines()[-1])
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "cancelled" and status["exit_code"] == 130
    assert status["abort_reason"] == "received SIGINT"
    assert status["stats_generated"] and status["phase"] == "done"
    assert status["actors_created"] == status["actors_deleted"] == 3
    assert status["leaked_actors"] == []
    assert (run_dir / "stats.jsonl").stat().st_size > 0
    assert verify_manifest(run_dir) == []
    assert await client.list_actors(atespace) == []


def test_a_script_that_fails_validation_exits_1_before_anything_exists(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmin_actor_memory: 64Mi\nsteps: []\n")
    proc, out, err = start([*DEAD, "--script", str(bad)], tmp_path)
    assert proc.wait(EXIT_CAP_S) == 1
    lines = err.read_text().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "steps" in lines[0], lines
    assert out.read_text() == ""
    assert not (tmp_path / "artifacts").exists()


def test_a_refused_connection_exits_1_with_one_error_line(tmp_path: Path) -> None:
    proc, out, err = start([*DEAD, "--script", "smoke", "--hold", "1s"], tmp_path)
    assert proc.wait(EXIT_CAP_S) == 1
    errors = error_lines(err)
    assert len(errors) == 1, errors
    assert "grpc://127.0.0.1:9" in errors[0] and "GetActorTemplate" in errors[0], errors
    run_dir = Path(out.read_text().splitlines()[-1])
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "refused" and status["actors_created"] == 0
    assert verify_manifest(run_dir) == []


async def test_a_template_below_min_actor_memory_exits_1_and_creates_nothing(
    substrate: LocalSubstrateProcess, client: Substrate, tmp_path: Path
) -> None:
    atespace = "cli-small-template"
    proc, out, err = start(
        [
            *ate_args(substrate),
            "--atespace",
            atespace,
            "--script",
            "smoke",
            "--template",
            "test/small",
            "--hold",
            "1s",
        ],
        tmp_path,
        token=TOKEN,
    )
    assert await asyncio.to_thread(proc.wait, EXIT_CAP_S) == 1
    errors = error_lines(err)
    assert len(errors) == 1, errors
    assert "test/small" in errors[0] and "1Mi" in errors[0] and "64Mi" in errors[0]
    run_dir = Path(out.read_text().splitlines()[-1])
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "refused" and status["actors_created"] == 0
    # Refused before EnsureAtespace: no actor exists under the run's atespace.
    try:
        assert await client.list_actors(atespace) == []
    except SubstrateError as exc:
        assert exc.code == "NOT_FOUND"  # the atespace was never created


# `agentsession run` through the CLI's own main, its run directory named as if it started in
# the second given (RunDir.create, which names and claims the directory, told that second; the
# run's own clock is untouched). Two runs so told collide in one directory name however long
# each takes to start: the collision is made, not waited for.
IN_SECOND = (
    "import sys\n"
    "from agentsession_core.cli import main\n"
    "from agentsession_core.output.run_dir import RunDir\n"
    "create = RunDir.create.__func__\n"
    "second = float(sys.argv[1])\n"
    "RunDir.create = classmethod(\n"
    "    lambda cls, dest, name, tag, started_unix: create(cls, dest, name, tag, second)\n"
    ")\n"
    "sys.exit(main(sys.argv[2:]))\n"
)


def test_two_runs_started_in_the_same_second_get_two_directories(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    out = tmp_path / "artifacts"
    env = {**os.environ, "AGENTSESSION_TOKEN": TOKEN}
    second = float(int(time.time()))
    args = ["run", "--progress", "plain", *ate_args(substrate), "--script", "smoke"]
    args += ["--sessions", "1", "--think-scale", "0.05", "--hold", "1s"]
    args += ["--name", "twins", "--tag", "t", "--out", str(out)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", IN_SECOND, str(second), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for _ in range(2)
    ]
    done = [p.communicate(timeout=EXIT_CAP_S) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in done]
    dirs = sorted(Path(stdout.strip().splitlines()[-1]) for stdout, _ in done)
    assert [d.name for d in dirs] == ["run_tag=t", "run_tag=t.2"], dirs
    day = time.strftime("%Y-%m-%d", time.gmtime(second))
    same_second = out / "runs" / "twins" / f"run_date={day}" / f"run_ts={int(second)}"
    assert dirs[0].parent == dirs[1].parent == same_second
    # Each directory holds one run: its own log, its own atespace (the second's named after
    # its copy), a manifest that verifies.
    atespaces = []
    for run_dir in dirs:
        campaign = json.loads((run_dir / "campaign.json").read_text())
        atespaces.append(campaign["atespace"])
        log = (run_dir / "logs.txt").read_text()
        assert log.count("sessions registered") == log.count("cleanup:") == 1, log
        assert verify_manifest(run_dir) == []
    assert re.fullmatch(r"twins-\d+", atespaces[0]), atespaces
    assert re.fullmatch(r"twins-\d+-2", atespaces[1]), atespaces
    # The second run said where it went, in one line.
    moved = [line for _, err in done for line in err.splitlines() if "already existed" in line]
    assert len(moved) == 1 and "run_tag=t.2" in moved[0], moved
