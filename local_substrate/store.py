"""The snapshot store: one directory per actor on disk, each snapshot written atomically.

Layout under the store root::

    snapshots/<atespace>/<actor>/
        LATEST                 the name of the current snapshot dir (replaced atomically)
        v000007/manifest.json  {"version", "arrays": {key: size}, "cursors": {key: n},
                                "files": {key: size}}
        v000007/ram/<key>      one RAM array, raw bytes
        v000007/files/<key>    one data-dir file

A snapshot is written into a temp dir, renamed to `v<version>`, and only then does
`LATEST` move to it (write temp + os.replace), so a crash mid-write leaves the previous
snapshot current. Older versions are removed after the switch. Nothing is fsync'ed: the
store survives a killed process, not a power cut; that is the trade a benchmark wants.

Files move between a worker's data dir and the store by hard link when both sit on one
filesystem (copy otherwise). That is safe because the glutton never writes a file in
place: every write goes to a temp file renamed over the key (see glutton.py), so a link
shared with a snapshot is never mutated.

Everything here is blocking file work: callers on an event loop run it in a thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

from agentsession_core.substrate.protocol import KEY_PATTERN

_LATEST = "LATEST"
# Present while the actor's state lives in a worker (persist.py); the snapshot that takes the
# state back into the store removes it.
LIVE = "LIVE"
_CHUNK = 1 << 20


def actor_dir(root: Path, atespace: str, name: str) -> Path:
    return root / "snapshots" / atespace / name


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def write_snapshot(
    directory: Path,
    version: int,
    arrays: dict[str, bytearray],
    cursors: dict[str, int],
    files_dir: Path | None,
) -> int:
    """Write one snapshot and make it current; returns the bytes it holds."""
    directory.mkdir(parents=True, exist_ok=True)
    final_name = f"v{version:06d}"
    tmp = directory / f".tmp-{final_name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "ram").mkdir(parents=True)
    (tmp / "files").mkdir()
    total = 0
    for key, array in arrays.items():
        with open(tmp / "ram" / key, "wb") as out:
            out.write(memoryview(array))
        total += len(array)
    files: dict[str, int] = {}
    if files_dir is not None and files_dir.is_dir():
        for entry in files_dir.iterdir():
            if entry.is_file() and KEY_PATTERN.match(entry.name):
                link_or_copy(entry, tmp / "files" / entry.name)
                files[entry.name] = entry.stat().st_size
                total += files[entry.name]
    manifest = {
        "version": version,
        "arrays": {k: len(v) for k, v in arrays.items()},
        "cursors": dict(cursors),
        "files": files,
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest))
    final = directory / final_name
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    pointer = directory / f".{_LATEST}.tmp-{os.getpid()}"
    pointer.write_text(final_name)
    os.replace(pointer, directory / _LATEST)
    (directory / LIVE).unlink(missing_ok=True)
    for old in directory.iterdir():
        if old.name != final_name and old.name.startswith("v") and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return total


def latest(directory: Path) -> Path | None:
    try:
        name = (directory / _LATEST).read_text().strip()
    except FileNotFoundError:
        return None
    return directory / name


def read_snapshot(
    directory: Path, files_dir: Path
) -> tuple[dict[str, bytearray], dict[str, int], int]:
    """Load the current snapshot: (arrays, cursors, bytes); files land in files_dir.
    An actor without a snapshot starts from the empty golden state."""
    files_dir.mkdir(parents=True, exist_ok=True)
    snap = latest(directory)
    if snap is None:
        return {}, {}, 0
    manifest = json.loads((snap / "manifest.json").read_text())
    arrays: dict[str, bytearray] = {}
    total = 0
    for key, size in manifest["arrays"].items():
        array = bytearray(size)
        view = memoryview(array)
        with open(snap / "ram" / key, "rb", buffering=0) as src:
            offset = 0
            while offset < size:
                n = src.readinto(view[offset : offset + _CHUNK * 16])
                if not n:
                    raise OSError(f"{snap / 'ram' / key}: truncated at byte {offset} of {size}")
                offset += n
        arrays[key] = array
        total += size
    for key, size in manifest["files"].items():
        target = files_dir / key
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        link_or_copy(snap / "files" / key, target)
        total += size
    return arrays, {k: int(v) for k, v in manifest["cursors"].items()}, total


def delete_actor(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
