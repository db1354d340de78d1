"""Commands run the way a person runs them: in a terminal of their own (a real
pseudo-terminal as the controlling terminal of a new session), so a Ctrl-C typed there is
the terminal driver's SIGINT to the whole foreground process group, not a signal aimed at
one PID.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# A small turnover `agentsession run` (6 sessions, 2 awake, 2 swaps/s on 4 local workers) for
# the tests that drive the command as a person does; each adds its own --out, --hold, ...
SMALL_TURNOVER = (
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
    "--local-workers",
    "4",
    "--think-scale",
    "0.05",
)

CTRL_C = b"\x03"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class Session:
    exit_code: int
    output: str  # everything the terminal showed (stdout and stderr), colours removed
    after_signal_s: float  # from the signal to the command's exit

    @property
    def lines(self) -> list[str]:
        return [line.rstrip("\r") for line in self.output.splitlines()]

    def run_dir(self) -> Path:
        """The run directory the command printed (its last line naming one)."""
        for line in reversed(self.lines):
            text = line.strip().removeprefix("^C")
            if text.startswith("/") and "run_tag=" in text:
                return Path(text)
        raise AssertionError(f"no run directory printed:\n{self.output[-3000:]}")


def ctrl_c(pid: int, master: int) -> None:
    """What a person's Ctrl-C does: the terminal turns ^C into SIGINT for the foreground
    process group."""
    os.write(master, CTRL_C)


def sigterm_group(pid: int, master: int) -> None:
    """`kill -TERM -PGID`: every process of the command's group (the session leader's)."""
    os.killpg(pid, signal.SIGTERM)


def in_terminal(
    argv: list[str],
    env: dict[str, str],
    *,
    when: str,
    then: Callable[[int, int], None],
    delay_s: float = 2.0,
    timeout_s: float = 240.0,
) -> Session:
    """Run `argv` on a new pseudo-terminal; `delay_s` after `when` first shows up, call
    `then(pid, master)`; wait for the exit (killing the group on `timeout_s`)."""
    pid, master = pty.fork()
    if pid == 0:  # the child: session leader with the pty as its controlling terminal
        try:
            # A person's shell starts a command with default signal dispositions and nothing
            # blocked. An ignored or blocked signal survives exec, and the pytest worker may
            # have come to ignore or block SIGINT (a library's thread, an earlier test): the
            # command must not inherit that.
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
                signal.signal(signum, signal.SIG_DFL)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    seen = b""
    started = time.monotonic()
    signalled: float | None = None
    fire_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            if now - started > timeout_s:
                os.killpg(pid, signal.SIGKILL)
                raise AssertionError(f"no exit within {timeout_s} s:\n{_text(seen)[-3000:]}")
            if fire_at is None and when.encode() in seen:
                fire_at = now + delay_s
            if fire_at is not None and signalled is None and now >= fire_at:
                then(pid, master)
                signalled = time.monotonic()
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the terminal's last user left
                    chunk = b""
                if not chunk:
                    break
                seen += chunk
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(master)
    if signalled is None:
        raise AssertionError(f"never saw {when!r}:\n{_text(seen)[-3000:]}")
    return Session(os.waitstatus_to_exitcode(status), _text(seen), time.monotonic() - signalled)


def _text(raw: bytes) -> str:
    return _ANSI.sub("", raw.decode("utf-8", "replace"))


def processes_with_env(marker: str) -> list[str]:
    """Command lines of live processes whose environment holds `marker` (NAME=VALUE)."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def wait_gone(marker: str, timeout_s: float = 20.0) -> list[str]:
    """The processes still carrying `marker` after up to `timeout_s` (empty: all gone)."""
    deadline = time.monotonic() + timeout_s
    while (left := processes_with_env(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
