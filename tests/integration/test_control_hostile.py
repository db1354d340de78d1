"""A hostile user against live control (issue #29, docs/SPEC.md §5.10), over a real run on the
local substrate and real sockets: `agentsession control` with levels that are no level, token
files that are no token (/dev/zero, a FIFO, a big file, several lines, a system file), a
token on the command line; the control API with a body of nested brackets; a run whose
metrics port is taken. Each ends in one line naming the place, a non-zero exit, never a
traceback, and never a token's or a file's contents."""

from __future__ import annotations

import os
import re
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest

from agentsession_core.run.control_api import MAX_BODY
from agentsession_core.run.live_control import MAX_LEVEL
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_args

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CLI = [sys.executable, "-m", "agentsession_core"]
SECRET = "do-not-print-me"
# The command's address space: a command that reads /dev/zero whole dies here within
# seconds instead of taking the machine's memory (the finding grew to 23.5 GB).
MEMORY_LIMIT = 2 << 30
# Caps that only catch a hang (a reader waiting on a FIFO for ever, a run that never
# starts): a command here takes the time to start Python, however busy the machine.
COMMAND_CAP_S = 120
START_CAP_S = 300


def small_run(substrate: LocalSubstrateProcess, out: Path, *more: str) -> list[str]:
    return [
        *CLI,
        "run",
        *ate_args(substrate),
        "--script",
        "smoke",
        "--population",
        "turnover",
        "--sessions",
        "3",
        "--awake",
        "1",
        "--target-rps",
        "0.5",
        "--registration-quiet-seconds",
        "0.3s",
        "--think-scale",
        "0.05",
        "--progress",
        "plain",
        "--out",
        str(out),
        *more,
    ]


def environment(token: str | None = TOKEN) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("AGENTSESSION_TOKEN", "PREFECT_API_URL")
    }
    if token is not None:
        env["AGENTSESSION_TOKEN"] = token
    return env


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def control(
    url: str, *args: str, token: str | None = TOKEN, timeout: float = COMMAND_CAP_S
) -> subprocess.CompletedProcess[str]:
    """`agentsession control URL …` in its own process, its memory bounded."""
    return subprocess.run(
        [*CLI, "control", url, *args],
        env=environment(token),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limit_memory,
    )


def one_line(done: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The one line a refused command said (and nothing on stdout)."""
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == code, (done.returncode, done.stderr[-3000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert done.stdout == "" and len(lines[0]) < 400, (done.stdout, lines[0])
    return lines[0]


@dataclass
class LiveRun:
    proc: subprocess.Popen[bytes]
    url: str  # its /v1/status
    out: Path

    def logs(self) -> str:
        return "".join(p.read_text() for p in self.out.glob("runs/*/*/*/*/logs.txt"))


@pytest.fixture(scope="module")
def live(
    substrate: LocalSubstrateProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveRun]:
    """A run with its control API on a free port, its hold far longer than the module takes,
    for the module's tests in any order. After the last of them, the run steered by them
    all still stops by hand: exit 0, no traceback, its run directory printed (checked here,
    so that no test has to come last; a failure shows as an error at that test's teardown)."""
    root = tmp_path_factory.mktemp("live")
    err = root / "stderr"
    args = small_run(substrate, root / "art", "--metrics-port", "0", "--hold", "3600s")
    with err.open("wb") as sink:
        proc = subprocess.Popen(args, env=environment(), stdout=subprocess.PIPE, stderr=sink)
    try:
        deadline = time.monotonic() + START_CAP_S
        found = None
        while found is None and time.monotonic() < deadline and proc.poll() is None:
            found = re.search(r"live control on (\S+)", err.read_text())
            time.sleep(0.2)
        assert found is not None, err.read_text()[-3000:]
        run = LiveRun(proc, found.group(1), root / "art")
        yield run
        done = control(run.url, "stop")
        assert done.returncode == 0, done.stderr
        out, _ = proc.communicate(timeout=START_CAP_S)
        assert proc.returncode == 0, run.logs()[-3000:]
        assert "Traceback" not in run.logs()
        assert Path(out.decode().strip().splitlines()[-1]).is_dir()
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=START_CAP_S)


def level_of(live: LiveRun) -> float:
    answer = httpx.get(live.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    return float(answer.json()["level"])


@pytest.mark.parametrize(
    "value", ["nan", "inf", "-inf", "-1", "0", f"{MAX_LEVEL * 1.5:g}", "1e400"]
)
def test_a_level_that_is_no_level_is_one_usage_line(live: LiveRun, value: str) -> None:
    line = one_line(control(live.url, "level", "--", value))
    assert line.startswith("agentsession: level:") and value in line, line
    assert f"at most {MAX_LEVEL:g}" in line, line
    assert level_of(live) == 1.0  # nothing was sent


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "big", "directory"])
def test_a_token_file_is_read_within_a_bound(live: LiveRun, tmp_path: Path, kind: str) -> None:
    path = Path(kind)
    if kind == "fifo":
        path = tmp_path / "token.fifo"
        os.mkfifo(path)  # nobody writes: a reader that opens it waits for ever
    elif kind == "big":
        path = tmp_path / "token.big"
        path.write_text(SECRET * 200_000)
    elif kind == "directory":
        path = tmp_path
    # Read within a bound: a FIFO nobody writes would hold the command past its cap.
    line = one_line(control(live.url, "status", "--token-file", str(path), token=None))
    assert f"--token-file {path}:" in line and SECRET not in line, line
    if kind == "big":
        assert "KiB" in line, line
    else:
        assert "not a regular file" in line, line


def test_a_token_file_of_several_lines_is_refused_without_its_contents(
    live: LiveRun, tmp_path: Path
) -> None:
    several = tmp_path / "token"
    several.write_text(f"{SECRET}-1\n{SECRET}-2\n{SECRET}-3\n")
    line = one_line(control(live.url, "status", "--token-file", str(several), token=None))
    assert f"--token-file {several}: holds 3 lines; a token is one line" in line, line
    assert SECRET not in line
    system = one_line(control(live.url, "status", "--token-file", "/etc/passwd", token=None))
    assert "--token-file /etc/passwd: holds" in system and "root" not in system, system
    # The environment's token alike.
    env = one_line(control(live.url, "status", token=f"{SECRET}\n{SECRET}"))
    assert "AGENTSESSION_TOKEN: holds 2 lines; a token is one line" in env and SECRET not in env
    spaced = one_line(control(live.url, "status", token=f"{SECRET} {SECRET}"))
    assert "AGENTSESSION_TOKEN:" in spaced and SECRET not in spaced, spaced
    # A good token file still works (its line break and spaces around it are no part of it).
    good = tmp_path / "good"
    good.write_text(f"  {TOKEN}\n")
    done = control(live.url, "status", "--token-file", str(good), token=None)
    assert done.returncode == 0 and done.stdout.startswith(("hold", "fill", "register")), done


@pytest.mark.parametrize(
    "args",
    [
        ["--token", SECRET],
        [f"--token={SECRET}"],
        ["--toke", SECRET],
        [f"--toke={SECRET}"],
        [f"--tok={SECRET}"],
    ],
)
def test_a_token_on_the_command_line_is_refused_by_name(live: LiveRun, args: list[str]) -> None:
    line = one_line(control(live.url, "status", *args, token=None))
    assert SECRET not in line, line
    if args[0].startswith("--token"):
        assert "--token: a token on the command line is visible in the process list" in line
        assert "AGENTSESSION_TOKEN" in line and "--token-file FILE" in line, line
    else:
        assert "unrecognized arguments: --to" in line and "not shown" in line, line


def test_a_body_of_nested_brackets_is_a_400_in_one_line(live: LiveRun) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    bodies = [
        b"[" * 2000 + b"]" * 2000,  # the finding: 4,000 bytes, a RecursionError
        b'{"level": ' + b"[" * 1900 + b"]" * 1900 + b"}",
        b'{"paused": ' + b"[" * 1000 + b"]" * 1000 + b"}",
        b'{"stopped": ' + b"[" * 900 + b"]" * 900 + b"}",
        b'{"level": NaN}',
        b'{"level": 1e400}',
    ]
    for body in bodies:
        assert len(body) <= MAX_BODY
        answer = httpx.patch(live.url, content=body, headers=auth, timeout=10)
        assert answer.status_code == 400, (body[:40], answer.status_code, answer.text[:300])
        error = orjson.loads(answer.content)["error"]
        assert "\n" not in error and len(error) < 300, error
    big = httpx.patch(live.url, content=b" " * (MAX_BODY + 1) + b"{}", headers=auth, timeout=10)
    assert big.status_code == 413 and "\n" not in big.json()["error"]
    logs = live.logs()
    assert "Traceback" not in logs and "RecursionError" not in logs, logs[-3000:]
    assert "Error handling request" not in logs, logs[-3000:]
    assert level_of(live) == 1.0


def test_a_metrics_port_in_use_refuses_the_run_in_one_line(
    substrate: LocalSubstrateProcess, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            small_run(substrate, tmp_path / "art", "--metrics-port", str(port), "--hold", "2s"),
            env=environment(),
            capture_output=True,
            text=True,
            timeout=START_CAP_S,
        )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if str(port) in line]
    assert len(said) == 1, done.stderr[-3000:]
    assert f"metrics_port {port}: 127.0.0.1:{port} is already in use" in said[0], said
    assert "refused" in said[0], said
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "refused" and str(port) in status["abort_reason"], status
    assert status["actors_created"] == 0
