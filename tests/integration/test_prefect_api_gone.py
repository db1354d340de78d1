"""A campaign whose Prefect API dies mid-hold (issue 38, docs/SPEC.md §6.5): a nightly's
server killed (SIGKILL, by its process group) while the campaign holds its second window.

Before: the hold overran its end by about a minute while each task's state was retried, ten
tracebacks reached the console, the campaign exited 1 six minutes later with no run
directory, gate.json blamed a ConnectError on the substrate, and once the API was back the
target's one-campaign slot stayed taken: the next campaign waited on it forever.

Now, over real processes (a real `prefect server start`, two real `agentsession campaign`
commands, the embedded local substrate): the campaign says once that the API went away,
judges every one of its windows on its own clock, exits 0 with its verdict and its run
directory printed last and no traceback; its gate is the load's. With the API restarted on
its database, the next campaign on the same target takes the dead campaign's slot over at
at once (Prefect freed it, or it takes the slot over naming the dead campaign's flow run) and
runs to its end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.integration.ports import fixed_port
from tests.integration.prefect_home import seed

pytestmark = pytest.mark.timeout(900)
SERVER_UP_WITHIN_S = 300  # a hang, not a speed: the API's start on a crowded box


class PrefectServer:
    """`prefect server start` on a fixed port with its own home (its SQLite database)."""

    def __init__(self, home: Path, port: int) -> None:
        self.home, self.port = home, port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self) -> None:
        env = {
            **os.environ,
            "PREFECT_HOME": str(self.home),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
            "PREFECT_UI_ENABLED": "false",
        }
        env.pop("PREFECT_API_URL", None)
        log = (self.home / "server.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(self.port)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        until = time.monotonic() + SERVER_UP_WITHIN_S
        while True:
            assert self.proc.poll() is None, (self.home / "server.log").read_text()[-3000:]
            assert time.monotonic() < until, (self.home / "server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{self.api}/health", timeout=5):
                    return
            except OSError:
                time.sleep(0.5)

    def kill(self) -> None:
        """SIGKILL to the server and every process it started (its own session)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Campaign:
    """`agentsession campaign --preset demo` against `api`, its stderr read as it comes."""

    def __init__(self, api: str, out: Path, *sets: str) -> None:
        args = [sys.executable, "-m", "agentsession_core", "campaign", "--preset", "demo"]
        for value in (f"out={out}", "generator.void_when_saturated=false", *sets):
            args += ["--set", value]
        env = {**os.environ, "PREFECT_API_URL": api}
        self.proc = subprocess.Popen(
            args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self.events: dict[str, threading.Event] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def when(self, text: str) -> threading.Event:
        return self.events.setdefault(text, threading.Event())

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            for text, event in list(self.events.items()):
                if text in line:
                    event.set()

    def finish(self) -> tuple[int, str, str]:
        # Not communicate(): it would read stderr too, racing the reader for its lines.
        self.proc.wait(timeout=600)
        out = self.proc.stdout.read() if self.proc.stdout else ""  # one line: the run dir
        self._reader.join(10)
        return self.proc.returncode, out, "\n".join(self.lines)


def test_a_campaign_whose_prefect_api_dies_finishes_and_frees_its_target(
    tmp_path: Path,
) -> None:
    home = seed(tmp_path / "prefect-home")  # its database migrated ahead (prefect_home.py)
    server = PrefectServer(home, fixed_port())
    server.start()
    try:
        first = Campaign(
            server.api,
            tmp_path / "first",
            "hold_minutes=0.3",
            "ramp_minutes=0.3",
            "window_seconds=9",
        )
        held = first.when("Task run 'hold-0' - Finished")
        until = time.monotonic() + 600  # a hang, not a speed
        while not held.wait(1.0):
            assert first.proc.poll() is None and time.monotonic() < until, first.lines[-40:]
        server.kill()  # during hold-1
        code, out, said = first.finish()
        # The API back on its database: the next campaign on this target starts.
        server.start()
        second = Campaign(
            server.api,
            tmp_path / "second",
            "hold_minutes=0.15",
            "ramp_minutes=0.15",
            "window_seconds=9",
        )
        code2, out2, said2 = second.finish()
    finally:
        server.kill()

    assert code == 0, said[-5000:]
    assert "Traceback" not in said, said[-5000:]
    (gone,) = [line for line in said.splitlines() if "went away during" in line and "ERROR" in line]
    assert f"the Prefect API at {server.api} went away during hold-" in gone, gone
    assert "the campaign goes on without it, on its own clock" in gone, gone
    run_dir = Path(out.strip().splitlines()[-1])
    assert run_dir.is_dir() and (run_dir / "manifest.json").exists(), out
    assert said.strip().splitlines()[-1].startswith("verdict: pass"), said[-3000:]
    assert f"agentsession campaign: the Prefect API at {server.api} went away" in said
    # Every window judged, on the load's clock: the hold was not cut short nor stretched.
    windows = [json.loads(line) for line in (run_dir / "windows.jsonl").read_text().splitlines()]
    assert [w["outcome"] for w in windows] == ["pass"] * 4, windows
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "completed" and status["leaked_actors"] == [], status
    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == "pass", gate
    assert "ConnectError" not in json.dumps(gate)

    # The dead campaign's slot is free at once: Prefect released it, or (its count left taken
    # in the database, its lease lost with the server's memory) the next campaign took it
    # over, naming the flow run that held it (tests/integration/test_target_slot_takeover.py).
    assert code2 == 0, said2[-5000:]
    took = [line for line in said2.splitlines() if "took over target" in line]
    assert all("from flow run demo-demo (pid " in line for line in took), took
    if "waiting for the global concurrency limit" in said2:
        assert took, said2[-3000:]
    second_dir = Path(out2.strip().splitlines()[-1])
    assert json.loads((second_dir / "status.json").read_text())["status"] == "completed"
