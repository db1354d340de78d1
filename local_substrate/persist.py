"""The local substrate's actors across a restart (docs/SPEC.md §2.4): what the snapshot store
keeps besides the snapshots, so a substrate started again on the same store serves the
same actors, and forgets nothing it leaves on disk.

Beside the snapshots of each actor (store.py), its directory holds:

    snapshots/<atespace>/<actor>/
        actor.json   {"template": [ns, name], "limit", "uid", "created_ns", "selector",
                     "pool"}, written at CreateActor and again when the actor is first
                     bound to a pool (docs/SPEC.md §2.6), removed with the directory at
                     DeleteActor
        LIVE         present while the actor's state is in a worker (RUNNING or PAUSED):
                     written before a load, removed by the snapshot write that moves the
                     state back into the store (store.write_snapshot)

On start with an existing store (`scan`): each actor with an actor.json comes back,
SUSPENDED at its latest snapshot (or the empty golden state), or CRASHED when LIVE says its
state was in a worker when the last server went away (kill -9, a power cut): that state is
gone, and a client replaces a crashed actor (§3.4) rather than silently running on an older
snapshot. A directory without actor.json (half created, or from an older version) is
deleted, as are the dead server's runtime dirs: nothing stays on disk that nobody knows
about. A clean stop (SIGTERM) suspends its running and paused actors first (server.py), so
they come back SUSPENDED with all their state.

An embedded substrate whose parent died (lifeline.py) deletes its whole store instead
(`wipe`): the run that owned the actors is gone and nobody will ask for them again.

Everything here is blocking file work: callers on an event loop run it in a thread.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentsession_core.substrate.protocol import NAME_PATTERN
from local_substrate import store

if TYPE_CHECKING:
    from local_substrate.actors import Actor

META = "actor.json"
RUNTIME_PREFIX = ".runtime-"


@dataclass(frozen=True)
class SavedActor:
    atespace: str
    name: str
    template: tuple[str, str]
    limit: int | None
    uid: str
    created_ns: int
    version: int
    live: bool  # its state was in a worker when the last server went away
    selector: dict[str, str] = field(default_factory=dict)
    pool: str | None = None  # the pool its snapshots belong to


def record_actor(directory: Path, actor: Actor) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    meta = {
        "template": list(actor.template),
        "limit": actor.limit,
        "uid": actor.uid,
        "created_ns": actor.created_ns,
        "selector": actor.selector,
        "pool": actor.pool,
    }
    tmp = directory / f".{META}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, directory / META)


def going_live(directory: Path) -> Path | None:
    """Mark the actor's state as about to live in a worker; its latest snapshot (or None)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / store.LIVE).touch()
    return store.latest(directory)


def scan(root: Path) -> list[SavedActor]:
    """The actors a store holds, after removing what no actor owns (see the module doc)."""
    for stale in root.glob(f"{RUNTIME_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)
    saved: list[SavedActor] = []
    snapshots = root / "snapshots"
    if not snapshots.is_dir():
        return saved
    for space in sorted(snapshots.iterdir()):
        if not (space.is_dir() and NAME_PATTERN.match(space.name)):
            _remove(space)
            continue
        for directory in sorted(space.iterdir()):
            actor = _load(space.name, directory)
            if actor is None:
                _remove(directory)
            else:
                saved.append(actor)
        if not any(space.iterdir()):
            space.rmdir()
    return saved


def _load(atespace: str, directory: Path) -> SavedActor | None:
    if not (directory.is_dir() and NAME_PATTERN.match(directory.name)):
        return None
    try:
        meta = json.loads((directory / META).read_text())
        template = (str(meta["template"][0]), str(meta["template"][1]))
        limit = None if meta["limit"] is None else int(meta["limit"])
        uid, created_ns = str(meta["uid"]), int(meta["created_ns"])
        # Absent in a store from before worker pools: no selector, no pool.
        selector = {str(k): str(v) for k, v in (meta.get("selector") or {}).items()}
        pool = None if meta.get("pool") is None else str(meta["pool"])
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    for tmp in directory.glob(".tmp-*"):  # a snapshot write cut short
        shutil.rmtree(tmp, ignore_errors=True)
    latest = store.latest(directory)
    version = int(latest.name[1:]) if latest is not None and latest.name[1:].isdigit() else 0
    live = (directory / store.LIVE).exists()
    return SavedActor(
        atespace, directory.name, template, limit, uid, created_ns, version, live, selector, pool
    )


def wipe(root: Path) -> None:
    """Remove the store's actors and runtime dirs, then the store itself if nothing else is
    in it (a directory someone shares with other files keeps them)."""
    shutil.rmtree(root / "snapshots", ignore_errors=True)
    for stale in root.glob(f"{RUNTIME_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)
    try:
        root.rmdir()
    except OSError:
        pass


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
