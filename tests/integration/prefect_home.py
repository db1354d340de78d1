"""Prefect homes whose database is already migrated, for every Prefect API the slow tier starts.

A Prefect API started on an empty database first runs every migration: about 8.5 s of CPU,
against 4 s on a migrated one (2026-12-06, this 2-core VM), and the slow tier starts a few
dozen APIs (each flow module's own, each `agentsession campaign` without PREFECT_API_URL,
the API-gone tests' `prefect server start`). The suite is CPU-bound on two cores, so one
database is migrated once per pytest session, by the first process that needs it (the xdist
workers share a directory, tests/conftest.py SHARED_DIR_ENV, and a lock), and each home
gets a copy. The copy is Prefect's own schema at its own head, made by the same server the
product starts (flows/api_server.py): the APIs under test are the real ones, only their first
start's migrations are done ahead.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

SHARED_DIR_ENV = "AGENTSESSION_TEST_SHARED_DIR"
DATABASE = "prefect.db"  # where a Prefect server keeps its SQLite database under its home
STARTUP_TIMEOUT_S = 300  # catches a server that never comes up, on however busy a box


def migrated_database() -> Path:
    """The session's migrated database, made on first use."""
    root = Path(os.environ[SHARED_DIR_ENV])
    made = root / "migrated-prefect" / DATABASE
    with open(root / "migrated-prefect.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait for the one migrating
        if not made.exists():
            _migrate(made)
    return made


def _migrate(into: Path) -> None:
    from flows.api_server import temporary_api

    home = Path(tempfile.mkdtemp(prefix="migrating-", dir=into.parent.parent))
    with temporary_api(
        home / "api.log", timeout=STARTUP_TIMEOUT_S, env={"PREFECT_HOME": str(home)}
    ):
        pass  # it answered its health check: the migrations are done
    # The server keeps SQLite in WAL mode: fold the log into the file before copying it alone.
    with contextlib.closing(sqlite3.connect(home / DATABASE)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    into.parent.mkdir(exist_ok=True)
    partial = into.with_suffix(".partial")
    shutil.copyfile(home / DATABASE, partial)
    os.replace(partial, into)  # whole or not at all, for a worker that finds it later
    shutil.rmtree(home, ignore_errors=True)


def seed(home: Path) -> Path:
    """`home` with a migrated database, unless it has one already; returns `home`."""
    home.mkdir(parents=True, exist_ok=True)
    if not (home / DATABASE).exists():
        shutil.copyfile(migrated_database(), home / DATABASE)
    return home
