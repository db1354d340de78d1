"""`agentsession control URL status|level X|pause|resume|stop`: steer a running run or campaign
through its control API (docs/SPEC.md §5.10) and print one line.

URL is the run's metrics address (`http://127.0.0.1:9464`, as its log's `live control on`
line says) or its /v1/status URL. The bearer token comes from AGENTSESSION_TOKEN or
--token-file, never the command line (a process list shows it). Exit 0 when the run took
the change (or answered the status), 2 when it refused it or could not be reached.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import httpx

from agentsession_core.engine.control_api import STATUS_PATH
from agentsession_core.errors import UsageError

TIMEOUT_S = 10.0
ACTIONS = ("status", "level", "pause", "resume", "stop")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "control",
        help="a running run's live control: status, level X, pause, resume, stop",
        description="Ask a running run (its metrics port) for its status or change it: "
        "`level X` sets the load to X × its base, `pause` stops new work without deleting "
        "anything, `resume` starts it again, `stop` ends the run as if its hold were over. "
        "The token: AGENTSESSION_TOKEN or --token-file.",
    )
    p.add_argument("url", metavar="URL", help="the run's metrics URL (http://host:port)")
    p.add_argument("action", choices=ACTIONS, help="what to do")
    p.add_argument("value", nargs="?", metavar="X", help="level: the new level (e.g. 2.5)")
    p.add_argument("--token-file", metavar="FILE", help="file holding the run's bearer token")
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
            return {"level": float(value)}
        except ValueError:
            raise UsageError(f"level: {value!r} is not a number") from None
    return {"pause": {"paused": True}, "resume": {"paused": False}, "stop": {"stopped": True}}[
        action
    ]


def token_of(args: argparse.Namespace) -> str | None:
    if args.token_file:
        try:
            return Path(args.token_file).read_text().strip() or None
        except OSError as exc:
            raise UsageError(f"--token-file {args.token_file}: {exc.strerror or exc}") from None
    return os.environ.get("AGENTSESSION_TOKEN") or None


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
    except json.JSONDecodeError:
        doc = {}
    if response.status_code != 200:
        why = doc.get("error") if isinstance(doc, dict) else None
        raise UsageError(f"{url}: refused ({response.status_code}): {why or response.text[:200]}")
    print(status_line(doc))
    return 0


__all__ = ["change_of", "control", "register", "status_line", "status_url"]
