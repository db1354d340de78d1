"""The temporary Prefect API that `agentsession campaign` starts when PREFECT_API_URL is unset,
in a session of its own.

Why not Prefect's own ephemeral server: Prefect 3.9 starts it from the first API client
(`prefect.server.api.server.SubprocessASGIServer._run_uvicorn_command`) with a plain
`subprocess.Popen`, so it sits in the CLI's process group. A Ctrl-C in the terminal (the
terminal driver sends SIGINT to the whole foreground group) or a `kill -TERM -PGID` then
killed the API under the flow that was still reporting to it: the run stopped and cleaned
up, but every later state change and log upload retried against a closed port for minutes,
ten tracebacks, exit 1 and no run directory (issue #11).

Here the same app (`prefect.server.api.server:create_app` with the same ephemeral flags, uvicorn on
127.0.0.1) runs in a new session (`start_new_session=True`): signals meant for the command never
reach it, so the flow reports its Cancelled state and the command exits 130/143 within seconds
(docs/SPEC.md §6, "Refusals and stops"). It still never outlives the command: the command stops it
once the flow has returned, and the server watches a pipe from the command, so a command killed with
SIGKILL takes it down too (EOF on its stdin → it shuts down). Its output goes to a log file
(Prefect's shutdown noise stays off the terminal); a server that cannot start is one line with the
tail of that log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from agentsession_core.errors import AgentsessionError

HOST = "127.0.0.1"
START_ATTEMPTS = 3  # a port taken between choosing it and binding it: try another
STOP_GRACE_S = 10.0
# What Prefect sets for its own ephemeral server (no UI; ephemeral services; final app).
SERVER_ENV = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT__SERVER_EPHEMERAL": "1",
    "PREFECT__SERVER_FINAL": "1",
}
LOG_TAIL_CHARS = 600


class ApiServerError(AgentsessionError):
    """The temporary API did not start (the message carries the end of its log)."""


@contextlib.contextmanager
def temporary_api(
    log_path: Path, *, timeout: float, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Start the API, yield its URL (`http://127.0.0.1:PORT/api`), stop it on the way out.
    `env`: the server's environment beside this process's (e.g. a PREFECT_HOME of its own,
    where its database lives)."""
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "ab")  # closed by the `with` below, after the server stops
    except OSError as exc:
        raise ApiServerError(
            f"cannot write the temporary Prefect API's log {log_path}: {exc}"
        ) from None
    with log:
        deadline = time.monotonic() + timeout
        for attempt in range(1, START_ATTEMPTS + 1):
            port = _free_port()
            proc = _spawn(port, log, env or {})
            try:
                url = f"http://{HOST}:{port}/api"
                if _wait_healthy(proc, url, deadline):
                    break
            except BaseException:  # Ctrl-C while it starts: leave no server behind
                _stop(proc)
                raise
            _stop(proc)
            if time.monotonic() >= deadline or attempt == START_ATTEMPTS:
                log.flush()
                raise ApiServerError(
                    f"the temporary Prefect API did not start within {timeout:g} s "
                    f"(exit code {proc.returncode}); its log {log_path} ends: {_tail(log_path)}"
                )
        try:
            yield url
        finally:
            _stop(proc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _spawn(port: int, log: BinaryIO, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "flows.api_server", str(port)],
        stdin=subprocess.PIPE,  # the lifeline: EOF when this process is gone
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # out of reach of the terminal's and the group's signals
        env={**os.environ, **env, **SERVER_ENV},
    )


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return True
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.2)
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()


def _tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(unreadable)"
    text = " ".join(text[-LOG_TAIL_CHARS:].split())
    return text or "(empty)"


# ------------------------------------------------------------------ the server process
def _leave_with_parent() -> None:
    """EOF on stdin: the command that started us is gone; shut down like on SIGTERM."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdin.buffer.read()
    os.kill(os.getpid(), signal.SIGTERM)


def serve(port: int) -> None:
    import uvicorn

    threading.Thread(target=_leave_with_parent, name="lifeline", daemon=True).start()
    uvicorn.run(
        "prefect.server.api.server:create_app",
        factory=True,
        host=HOST,
        port=port,
        log_level="error",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )


if __name__ == "__main__":  # pragma: no cover - runs as the server subprocess
    serve(int(sys.argv[1]))
