"""Loopback ports for servers a test must start again on the same port (a substrate restarted
after a SIGKILL) or name before they start (a scrape target).

A port the kernel handed out as free (bind to port 0) lies in its ephemeral range, from which
it also picks every outgoing connection's local port: in the second between a server's death
and its restart, a busy test run's connections took such a port, and the restart failed with
"address already in use". These ports come from below that range, which the kernel never
hands out by itself; each xdist worker walks its own stretch, so two workers never race for
one.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

LOWEST = 20000
STRETCH = 1500  # ports per xdist worker, before the walk wraps
_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_low() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _walk() -> itertools.cycle[int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    span = max(STRETCH, _ephemeral_low() - LOWEST)
    slots = max(1, span // STRETCH)
    start = LOWEST + (int(worker) % slots if worker.isdigit() else 0) * STRETCH
    return itertools.cycle(range(start, start + STRETCH))


_ports = _walk()


def fixed_port() -> int:
    """A free loopback port outside the ephemeral range (this worker's next free one)."""
    for _ in range(STRETCH):
        port = next(_ports)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in this worker's stretch of {STRETCH} from {LOWEST}")
