"""`agentsession control URL status|level X|pause|resume|stop`: steer a running run or campaign
through its control API (docs/SPEC.md §5.10) and print one line.

URL is the run's metrics address (`http://127.0.0.1:9464`, as its log's `live control on`
line says) or its /v1/status URL. The bearer token comes from AGENTSESSION_TOKEN or
--token-file, never the command line (a process list shows it): `--token` is refused by name.
Exit 0 when the run took the change (or answered the status), 2 when it refused it, could
not be reached, or the command line was bad (a level that is no level, a token file that
holds no one-line token: said without its contents).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import stat
from typing import Any

import httpx

from agentsession_core.errors import UsageError, clip
from agentsession_core.run.control_api import STATUS_PATH
from agentsession_core.run.live_control import MAX_LEVEL

TIMEOUT_S = 10.0
ACTIONS = ("status", "level", "pause", "resume", "stop")
TOKEN_ENV = "AGENTSESSION_TOKEN"
# The most a token file may hold: a bearer token is a line of some hundreds of bytes (a
# Kubernetes service-account token about 1 KiB); a bigger file is not one, and is refused
# from its size before a byte is read (/dev/zero grew the process to 23.5 GB, issue #29).
MAX_TOKEN_FILE = 64 * 1024


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "control",
        help="a running run's live control: status, level X, pause, resume, stop",
        description="Ask a running run (its metrics port) for its status or change it: "
        "`level X` sets the load to X × its base, `pause` stops new work without deleting "
        "anything, `resume` starts it again, `stop` ends the run as if its hold were over. "
        "The token: AGENTSESSION_TOKEN or --token-file.",
        # No abbreviations: `--token X` was taken as `--token-file X` (issue #29).
        allow_abbrev=False,
    )
    p.add_argument("url", metavar="URL", help="the run's metrics URL (http://host:port)")
    p.add_argument("action", choices=ACTIONS, help="what to do")
    p.add_argument(
        "value",
        nargs="?",
        metavar="X",
        help=f"level: the new level, a number > 0 and at most {MAX_LEVEL:g} (e.g. 2.5)",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="file holding the run's bearer token, one line (a regular file, at most "
        f"{MAX_TOKEN_FILE // 1024} KiB; default: ${TOKEN_ENV})",
    )
    p.add_argument(
        "--token",
        nargs="?",
        const="",
        default=None,
        metavar="TOKEN",
        help=f"refused: a command line is visible in the process list; set ${TOKEN_ENV} or "
        "give --token-file FILE",
    )
    p.set_defaults(handler=control)


def status_url(url: str) -> str:
    """The /v1/status URL of a run's metrics URL (its /metrics URL or the bare address)."""
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"URL: {url!r} is not an http:// URL")
    base = url.rstrip("/")
    for suffix in (STATUS_PATH, "/metrics"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base + STATUS_PATH


def change_of(action: str, value: str | None) -> dict[str, Any] | None:
    """The PATCH body of an action (None: a GET)."""
    if action != "level" and value is not None:
        raise UsageError(f"{action}: takes no value (got {value!r})")
    if action == "status":
        return None
    if action == "level":
        if value is None:
            raise UsageError("level: give the new level, e.g. `level 2.5`")
        try:
            level = float(value)
        except ValueError:
            raise UsageError(f"level: {clip(value)} is not a number") from None
        if not (math.isfinite(level) and 0 < level <= MAX_LEVEL):
            # The run's own line for it (docs/SPEC.md §5.10), said before anything is sent: a
            # NaN or an infinity cannot even be sent as JSON.
            shown = " ".join(value.split())[:40]
            raise UsageError(f"level: {shown} must be > 0 and at most {MAX_LEVEL:g}")
        return {"level": level}
    return {"pause": {"paused": True}, "resume": {"paused": False}, "stop": {"stopped": True}}[
        action
    ]


def token_of(args: argparse.Namespace) -> str | None:
    """The bearer token: --token-file's, else AGENTSESSION_TOKEN's, else none. A token on the
    command line is refused by name, never echoed."""
    if args.token is not None:
        raise UsageError(
            f"--token: a token on the command line is visible in the process list; set "
            f"{TOKEN_ENV}, or give --token-file FILE"
        )
    if args.token_file:
        place = f"--token-file {args.token_file}"
        if (token := checked_token(read_token_file(args.token_file), place)) is None:
            raise UsageError(f"{place}: holds no token")
        return token
    if text := os.environ.get(TOKEN_ENV):
        return checked_token(text, TOKEN_ENV)
    return None


def read_token_file(path: str) -> str:
    """A token file's text: a regular file of at most MAX_TOKEN_FILE bytes, refused from its
    kind and size before a byte is read (a FIFO is opened without waiting for a writer)."""
    place = f"--token-file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"{place}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{place}: not a regular file ({_kind(info.st_mode)})")
        if info.st_size > MAX_TOKEN_FILE:
            raise UsageError(
                f"{place}: {info.st_size} bytes; a token file holds at most "
                f"{MAX_TOKEN_FILE // 1024} KiB"
            )
        data = b""
        while len(data) <= MAX_TOKEN_FILE:  # one byte more: a file that grew meanwhile
            chunk = os.read(fd, MAX_TOKEN_FILE + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        raise UsageError(f"{place}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_TOKEN_FILE:
        raise UsageError(f"{place}: more than {MAX_TOKEN_FILE // 1024} KiB; not a token file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{place}: not UTF-8 text; a token is one line of text") from None


def checked_token(text: str, place: str) -> str | None:
    """The one-line token `text` holds (surrounding whitespace dropped), or None when empty.
    What is wrong is said without the contents: a token, or a system file given by
    mistake, must not reach a terminal or a log."""
    lines = text.strip().splitlines()
    if len(lines) > 1:
        raise UsageError(f"{place}: holds {len(lines)} lines; a token is one line")
    token = lines[0].strip() if lines else ""
    if not token:
        return None
    if not all(33 <= ord(c) <= 126 for c in token):
        raise UsageError(
            f"{place}: holds a character a bearer token cannot have (a space, a control "
            "character or a non-ASCII one); a token is one word of visible ASCII"
        )
    return token


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def status_line(doc: dict[str, Any]) -> str:
    """One line of a status document."""

    def rate(value: Any) -> str:
        return "–" if value is None else f"{value:g}"

    parts = [
        f"{doc.get('state')}",
        f"level {doc.get('level'):g}",
        "paused" if doc.get("paused") else "running",
        f"intended {rate(doc.get('intended_rate'))} achieved {rate(doc.get('achieved_rate'))} "
        f"{doc.get('rate_unit')}",
    ]
    if doc.get("residents") is not None:
        parts.append(f"residents {doc['residents']}")
    if (window := doc.get("window")) is not None:
        parts.append(f"window {window.get('index')} at {window.get('level'):g}x")
    if doc.get("stopped"):
        parts.append("stopping")
    parts.append(f"{doc.get('elapsed_seconds', 0):.0f} s")
    return ", ".join(parts)


def control(args: argparse.Namespace) -> int:
    url = status_url(args.url)
    body = change_of(args.action, args.value)
    headers = {}
    if (token := token_of(args)) is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        with httpx.Client(timeout=TIMEOUT_S) as client:
            if body is None:
                response = client.get(url, headers=headers)
            else:
                response = client.patch(url, headers=headers, json=body)
    except httpx.HTTPError as exc:
        raise UsageError(f"{url}: {type(exc).__name__}: {exc}") from None
    try:
        doc = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        doc = {}
    if response.status_code != 200:
        # The API's refusals are one JSON line; any other body (a front that is not the
        # control API, HTTP's own 400 for a header it cannot take) may echo what it was
        # sent, the token included, so only its status is said.
        why = doc.get("error") if isinstance(doc, dict) else None
        said = " ".join(why.split())[:300] if isinstance(why, str) else response.reason_phrase
        raise UsageError(f"{url}: refused ({response.status_code}): {said}")
    print(status_line(doc))
    return 0


__all__ = [
    "MAX_TOKEN_FILE",
    "change_of",
    "checked_token",
    "control",
    "read_token_file",
    "register",
    "status_line",
    "status_url",
    "token_of",
]
