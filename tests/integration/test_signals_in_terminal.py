"""Stopping a command the way a person does (issue #11): Ctrl-C typed in its terminal and
SIGTERM to its whole process group, not a signal aimed at one PID.

`agentsession campaign` runs here with no PREFECT_API_URL, so it starts its own temporary
Prefect API, which must survive the signal (flows/api_server.py): the command exits
130/143 within seconds, prints its run directory, no traceback, every actor deleted, the
artifacts sealed, and no process of its left behind.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import orjson
import pytest

from agentsession_core.output.run_dir import verify_manifest
from tests.integration.terminal import (
    SMALL_TURNOVER,
    Session,
    ctrl_c,
    in_terminal,
    sigterm_group,
    wait_gone,
)

pytestmark = pytest.mark.timeout(300)
AGENTSESSION = str(Path(sys.executable).with_name("agentsession"))


def command_env() -> tuple[dict[str, str], str]:
    """The test's environment without an API URL (the command starts its own API), plus a
    marker that finds every process the command started."""
    marker = f"AGENTSESSION_TEST_MARK={uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env[marker.split("=")[0]] = marker.split("=")[1]
    env["TERM"] = "xterm"
    return env, marker


def campaign_argv(out: Path) -> list[str]:
    sets = [
        "name=term",
        "tag=t1",
        f"dest={out}",
        "hold_minutes=2",
        "window_seconds=30",
        "levels=[1.0]",
        "abort.rules=[]",
        "population.sessions=6",
        "population.awake=2",
        "population.registration_quiet_seconds=0.5",
        "target.local_workers=4",
    ]
    argv = [AGENTSESSION, "campaign", "--preset", "demo"]
    for setting in sets:
        argv += ["--set", setting]
    return argv


def assert_stopped_cleanly(session: Session, code: int, signal_name: str) -> Path:
    assert session.exit_code == code, session.output[-3000:]
    assert session.after_signal_s < 10, (session.after_signal_s, session.output[-3000:])
    assert "Traceback" not in session.output, session.output[-5000:]
    assert "Error logging to API" not in session.output, session.output[-3000:]
    run_dir = session.run_dir()
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "cancelled" and status["exit_code"] == code, status
    assert status["abort_reason"] == f"received {signal_name}", status
    assert status["leaked_actors"] == [], status
    assert status["actors_created"] > 0 and status["actors_deleted"] == status["actors_created"]
    assert verify_manifest(run_dir) == []
    return run_dir


def assert_campaign_stopped(session: Session, code: int, signal_name: str, marker: str) -> None:
    run_dir = assert_stopped_cleanly(session, code, signal_name)
    said = [line for line in session.lines if line.startswith("agentsession campaign:")]
    assert len(said) == 2 and f"cancelled: received {signal_name}" in said[-1], said
    gate = orjson.loads((run_dir / "gate.json").read_bytes())
    assert gate["verdict"] == "void" and "cancelled" in gate["reason"], gate
    # The temporary API and the local substrate ended with the command.
    assert wait_gone(marker) == []


def test_ctrl_c_in_a_terminal_stops_a_campaign_mid_hold(tmp_path: Path) -> None:
    env, marker = command_env()
    session = in_terminal(
        campaign_argv(tmp_path / "art"), env, when="turnover fill done", then=ctrl_c
    )
    assert_campaign_stopped(session, 130, "SIGINT", marker)


def test_sigterm_to_the_process_group_stops_a_campaign_mid_hold(tmp_path: Path) -> None:
    env, marker = command_env()
    session = in_terminal(
        campaign_argv(tmp_path / "art"), env, when="turnover fill done", then=sigterm_group
    )
    assert_campaign_stopped(session, 143, "SIGTERM", marker)


# On a crowded machine this Ctrl-C was once lost and the campaign ran on; in one round's full
# slow tier it was lost in 3 of 3 runs (the ^C echoed, the campaign ran to its end), while
# the test alone passed every time. Since then it has passed in every full run, the cause
# never found (docs/limits.md, known limits). Kept running, so an XPASS shows it holds.
@pytest.mark.xfail(
    strict=False,
    reason="a Ctrl-C during the temporary Prefect API's start is lost in a full slow tier "
    "(docs/limits.md, known limits)",
)
def test_ctrl_c_while_the_prefect_api_starts_leaves_nothing_behind(tmp_path: Path) -> None:
    env, marker = command_env()
    session = in_terminal(
        campaign_argv(tmp_path / "art"),
        env,
        when="starting a temporary Prefect API",
        then=ctrl_c,
        delay_s=0.5,
    )
    assert session.exit_code == 130, session.output
    assert "Traceback" not in session.output
    assert "stopped by SIGINT; nothing had started" in session.output
    assert not (tmp_path / "art").exists()
    assert wait_gone(marker) == []


@pytest.mark.parametrize(
    ("then", "code", "name"), [(ctrl_c, 130, "SIGINT"), (sigterm_group, 143, "SIGTERM")]
)
def test_a_run_in_a_terminal_stops_on_ctrl_c_and_on_sigterm_to_its_group(
    tmp_path: Path, then, code: int, name: str
) -> None:
    assert_run_stops(tmp_path, then, code, name, [])


def test_a_sharded_run_stops_on_ctrl_c_without_its_dask_workers_dying(tmp_path: Path) -> None:
    """The local Dask cluster's worker processes are out of the command's group: the
    coordinator stops every shard and each deletes its actors (engine/shards/own_group.py)."""
    assert_run_stops(tmp_path, ctrl_c, 130, "SIGINT", ["--shards", "2"])


def assert_run_stops(tmp_path: Path, then, code: int, name: str, extra: list[str]) -> None:
    env, marker = command_env()
    argv = [
        AGENTSESSION,
        "run",
        *SMALL_TURNOVER,
        "--hold",
        "120s",
        "--out",
        str(tmp_path / "art"),
        "--progress",
        "plain",
        *extra,
    ]
    session = in_terminal(argv, env, when="hold 120s", then=then)
    assert_stopped_cleanly(session, code, name)
    assert sum(f"received {name}" in line for line in session.lines) == 1, session.output
    assert wait_gone(marker) == []


@pytest.mark.parametrize(("then", "name"), [(ctrl_c, "SIGINT"), (sigterm_group, "SIGTERM")])
def test_a_local_substrate_started_by_hand_stops_with_its_workers(
    tmp_path: Path, then, name: str
) -> None:
    """`agentsession substrate serve` in a terminal of its own: the signal reaches its workers
    and their fork server as well as the server, and only the server acts on it: it stops
    its workers, so no worker prints a traceback or dies first (which the pool would take
    for a crash and replace), and nothing of it is left."""
    env, marker = command_env()
    argv = [AGENTSESSION, "substrate", "serve", "--port", "0", "--workers", "3"]
    argv += ["--store", str(tmp_path / "store")]
    session = in_terminal(argv, env, when="ate control (gRPC) on", then=then, delay_s=1.0)
    assert session.exit_code == 0, (name, session.output[-3000:])
    assert session.after_signal_s < 10, session.after_signal_s
    assert "Traceback" not in session.output, session.output[-5000:]
    assert "replacing it" not in session.output, session.output[-3000:]
    assert wait_gone(marker) == []
