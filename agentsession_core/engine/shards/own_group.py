"""Dask worker preload: a local shard's worker process leaves the command's process group.

A terminal's Ctrl-C (SIGINT to the whole foreground process group) and `kill -TERM -PGID` are
meant for the command: the coordinator takes them, stops every shard's load and lets each
shard delete its actors (docs/SPEC.md §6, "Refusals and stops"). Reaching the local
cluster's worker processes too, they died with KeyboardInterrupt tracebacks in the middle of
that cleanup (issue #11). In a group of their own they are stopped only by their nanny (by
PID) or when the command is gone (Dask's worker process exits when its parent does).

Only `dask_setup` acts, in the worker process: importing this module does nothing.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any


def dask_setup(worker: Any) -> None:
    with contextlib.suppress(OSError):  # already a group leader, or not allowed: as it was
        os.setpgid(0, 0)
