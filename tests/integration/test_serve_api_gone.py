"""`agentsession serve` stopped by SIGTERM (or Ctrl-C) after its Prefect API went away (issue
#29): it takes its own way out, saying so in one line, exit 143 (130), never a traceback (it
took Prefect's graceful way, 75-150 s and two tracebacks, retrying the API). With the API
there, a SIGTERM stays Prefect's graceful stop (schedules paused, exit 0). Real processes: a
Prefect API started here (flows/api_server.py's server, analytics off), `agentsession serve`
against it; the API is killed, then each serve process gets its signal.

Each signal goes to a serve process that has said it serves: it says so once its runner has
started (flows/serve.py), when both ways out are in place. The API is gone once its process
has been reaped: nothing answers on its port from then on."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from flows.api_server import SERVER_ENV
from tests.integration.prefect_home import seed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CLI = [sys.executable, "-m", "agentsession_core"]
SERVING = "Your deployments are being served"
# No nightly run may fall due while the test serves (prefect.yaml's is 02:00 UTC daily).
FAR_CRON = "0 12 1 1 *"
# Caps that only catch a hang: a start, a stop.
START_CAP_S = 300.0
STOP_CAP_S = 300.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def prefect_env(home: Path) -> dict[str, str]:
    """The environment a person serving from one box has: telemetry off (no network here),
    a Prefect home of the test's own; logs go to the API as by default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
    )
    return env


def wait_for(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout:g} s")


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def start_serving(env: dict[str, str], url: str, where: Path) -> subprocess.Popen[bytes]:
    """`agentsession serve` against `url`, once it says it serves (its output under `where`)."""
    where.mkdir()
    out_path = where / "stdout"
    with out_path.open("wb") as out, (where / "stderr").open("wb") as err:
        serve = subprocess.Popen(
            [*CLI, "serve", "--cron", FAR_CRON],
            env={**env, "PREFECT_API_URL": url},
            stdout=out,
            stderr=err,
        )
    wait_for(
        lambda: SERVING in out_path.read_text(errors="replace") or serve.poll() is not None,
        START_CAP_S,
        "serve did not start serving",
    )
    assert serve.poll() is None, (where / "stderr").read_text()[-3000:]
    return serve


def stopped(serve: subprocess.Popen[bytes], how: signal.Signals) -> int | None:
    """Its exit code (None: still running after STOP_CAP_S)."""
    serve.send_signal(how)
    try:
        return serve.wait(STOP_CAP_S)
    except subprocess.TimeoutExpired:
        return None


def test_serve_stops_on_a_signal_when_its_api_went_away(tmp_path: Path) -> None:
    env = prefect_env(seed(tmp_path / "prefect-home"))  # its database migrated ahead
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    api_log = (tmp_path / "api.log").open("wb")
    api = subprocess.Popen(
        [sys.executable, "-m", "flows.api_server", str(port)],
        stdin=subprocess.PIPE,
        stdout=api_log,
        stderr=subprocess.STDOUT,
        env={**env, **SERVER_ENV},
        start_new_session=True,
    )
    serves: list[subprocess.Popen[bytes]] = []
    try:
        wait_for(lambda: healthy(url), START_CAP_S, "the Prefect API did not start")
        # With its API there, a SIGTERM or a Ctrl-C is Prefect's graceful stop: schedules
        # paused, exit 0.
        for how in (signal.SIGTERM, signal.SIGINT):
            serves.append(start_serving(env, url, tmp_path / f"with-api-{how.name}"))
            code = stopped(serves[-1], how)
            err = (tmp_path / f"with-api-{how.name}" / "stderr").read_text(errors="replace")
            assert (code, "Traceback" in err) == (0, False), (how.name, code, err[-3000:])
            assert "All deployments have been paused" in err and "went away" not in err, err
        # The API goes away (a crash, a host gone), then a SIGTERM, and a Ctrl-C to another.
        ends = {}
        for how in (signal.SIGTERM, signal.SIGINT):
            serves.append(start_serving(env, url, tmp_path / how.name))
        said_before = {
            how: (tmp_path / how.name / "stderr").read_text(errors="replace")
            for how in (signal.SIGTERM, signal.SIGINT)
        }
        api.kill()
        api.wait(STOP_CAP_S)
        for how, serve in zip((signal.SIGTERM, signal.SIGINT), serves[2:], strict=True):
            ends[how] = stopped(serve, how)
    finally:
        for serve in serves:
            if serve.poll() is None:
                serve.kill()
                serve.wait()
        if api.poll() is None:
            api.kill()
            api.wait()
        api_log.close()
    for how, exit_code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        code = ends[how]
        err = (tmp_path / how.name / "stderr").read_text(errors="replace")
        after = err[len(said_before[how]) :]
        assert "Traceback" not in err, (how.name, err[-5000:])
        assert code == exit_code, (how.name, code, after[-3000:])
        said = [line for line in after.splitlines() if "went away; stopping" in line]
        assert said == [
            f"agentsession serve: the Prefect API at {url} went away; stopping without it"
        ], (how.name, after[-3000:])
        # Its other lines about the API are one line each (no traceback), at most a few.
        assert len([line for line in after.splitlines() if line.strip()]) <= 5, after[-3000:]
