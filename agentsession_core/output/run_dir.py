"""The run directory: upstream-compatible layout, atomic writes, the run log, the manifest.

Layout (docs/SPEC.md §7): ``<dest>/runs/<name>/run_date=YYYY-MM-DD/run_ts=<unix>/run_tag=<tag>/``
(the date is UTC). Files are written as the run goes; JSON and whole-file rewrites go through
``atomic_write`` (a temp file and a rename), so a crash leaves either the old or the new
content, never half. manifest.json is written last and lists every other file with its size
and sha256.

A full or vanished disk must still end a run with its final status.json and manifest.json (issue
#11, docs/SPEC.md §7: never a stuck `running`). So the run reserves room for its manifest when it
starts (`reserve_manifest`), status.json and the manifest fall back to overwriting their own blocks
in place when no new file fits (`in_place=True`), a lost run directory is made again for them, and
logs.txt keeps its first write error instead of printing a traceback per line. Everything here is
synchronous and thread-safe: async callers use asyncio.to_thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import orjson

from agentsession_core.errors import UsageError

_log = logging.getLogger("agentsession")

MANIFEST = "manifest.json"
# An acceptance of the run (judge/acceptance.py, docs/SPEC.md §6.3) sits beside its files but
# is none of them: the manifest never lists it, so accepting a run leaves its seal as it was.
ACCEPTANCE = "acceptance.json"
LOG_FILE = "logs.txt"
# Room held for manifest.json from the start (about 50 entries; a run writes about 15).
MANIFEST_RESERVE = 8 * 1024
# Runs of one name and tag a second may start before the next is refused (RunDir.create).
MAX_SAME_SECOND = 100
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _local_root(dest: str) -> Path:
    if dest.startswith("s3://"):
        raise UsageError(
            f"dest {dest!r}: s3:// destinations are not supported yet; "
            "use a local path or file:// URL"
        )
    if dest.startswith("file://"):
        parts = urlsplit(dest)
        if parts.netloc not in ("", "localhost"):
            raise UsageError(
                f"dest {dest!r}: file:// URLs must name a local path (file:///abs/path)"
            )
        return Path(parts.path)
    if "://" in dest:
        raise UsageError(f"dest {dest!r}: unsupported scheme; use a local path or file:// URL")
    if not dest:
        raise UsageError("dest: empty; use a local path or file:// URL")
    return Path(dest)


def _segment(parameter: str, value: str) -> str:
    if not _SEGMENT.match(value):
        raise UsageError(
            f"{parameter} {value!r}: must match {_SEGMENT.pattern} (it becomes a directory name)"
        )
    return value


def atomic_write(path: Path, data: bytes | str) -> Path:
    """`data` (text as UTF-8) at `path` through a temp file in the same directory, fsync and a
    rename: readers and a crash see the old content or the new, never half of it."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _naming(exc, path) from None
    try:
        os.fchmod(fd, 0o644)  # artifacts are for readers other than us (gates, uploaders)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _naming(exc, path) from None
        raise
    return path


def _naming(exc: OSError, path: Path) -> OSError:
    """The error names the artifact, not a temp file (`status.json: No space left ...`)."""
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


def overwrite_in_place(path: Path, data: bytes) -> Path:
    """`data` over the existing file's own blocks (no new file, no O_TRUNC first), the last
    resort when a disk is full: a final status or manifest still lands. Not atomic, so only
    used after an atomic write failed."""
    fd = os.open(path, os.O_WRONLY)
    try:
        view = memoryview(data)
        done = 0
        while done < len(data):
            done += os.pwrite(fd, view[done:], done)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def describe_os_error(exc: OSError) -> str:
    """`PATH: No space left on device` (a write to a temp file names no path: the reason)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{exc.filename}: {reason}" if exc.filename else reason


class RunLogHandler(logging.FileHandler):
    """logs.txt. The first write error (a full or vanished disk) is kept in `failure` and
    ends the writing; logging's default would print a traceback on stderr for every later
    line. The run sees `failure` and ends with the reason."""

    failure: OSError | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.failure is None:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)
        elif self.failure is None:
            self.failure = error

    def close(self) -> None:
        try:
            super().close()
        except OSError as exc:  # the unwritten tail of a full disk
            self.failure = self.failure or exc


class RunDir:
    """One run's artifact directory."""

    def __init__(self, path: Path, copy: int = 1) -> None:
        self.path = path
        self.copy = copy  # 2, 3 …: the run_tag=<tag>.N this run got (create)
        self._lock = threading.Lock()

    @classmethod
    def create(cls, dest: str, name: str, tag: str, started_unix: float) -> RunDir:
        """A new run directory, created exclusively (docs/SPEC.md §7): two runs with the same
        name and tag started in the same second would otherwise share one directory, one
        logs.txt and last-writer-wins files. The second gets ``run_tag=<tag>.2`` (then .3 …),
        still a tag segment, so the layout and judge/run_index.py's parse_location hold."""
        root = _local_root(dest)
        date = time.strftime("%Y-%m-%d", time.gmtime(started_unix))
        parent = (
            root
            / "runs"
            / _segment("name", name)
            / f"run_date={date}"
            / f"run_ts={int(started_unix)}"
        )
        path = parent / f"run_tag={_segment('tag', tag)}"
        try:
            parent.mkdir(parents=True, exist_ok=True)
            for copy in range(1, MAX_SAME_SECOND + 1):
                if copy > 1:
                    path = parent / f"run_tag={tag}.{copy}"
                try:
                    os.mkdir(path)  # no exist_ok: the one atomic claim of this directory
                    break
                except FileExistsError:
                    continue
            else:
                raise UsageError(
                    f"dest {dest!r}: {MAX_SAME_SECOND} runs named {name!r} tagged {tag!r} "
                    f"already started in second {int(started_unix)}; give each its own --tag"
                )
        except OSError as exc:
            raise UsageError(f"dest {dest!r}: cannot create {path}: {exc.strerror}") from exc
        if copy > 1:
            _log.warning(
                "run directory %s already existed (another run named %s tagged %s started in "
                "the same second): this run writes to %s",
                parent / f"run_tag={tag}",
                name,
                tag,
                path.name,
            )
        return cls(path, copy)

    def file(self, name: str) -> Path:
        target = (self.path / name).resolve()
        if self.path.resolve() not in target.parents:
            raise ValueError(f"artifact name {name!r} escapes the run directory")
        return target

    def write_bytes(self, name: str, data: bytes) -> Path:
        target = self.file(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write(target, data)

    def write_text(self, name: str, text: str) -> Path:
        return self.write_bytes(name, text.encode("utf-8"))

    def write_json(self, name: str, obj: Any, *, in_place: bool = False) -> Path:
        """`obj` as indented JSON; `in_place`: when no new file fits (a full disk), overwrite
        the existing file's blocks instead (status.json, the manifest)."""
        data = orjson.dumps(
            obj,
            option=orjson.OPT_INDENT_2
            | orjson.OPT_SORT_KEYS
            | orjson.OPT_SERIALIZE_NUMPY
            | orjson.OPT_NON_STR_KEYS,
        )
        try:
            return self.write_bytes(name, data + b"\n")
        except OSError:
            target = self.file(name)
            if not (in_place and target.is_file()):
                raise
            return overwrite_in_place(target, data + b"\n")

    def open_append(self, name: str) -> TextIO:
        """A line-buffered append handle (stats_history.csv, stats.jsonl as it grows)."""
        target = self.file(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        return open(target, "a", encoding="utf-8", buffering=1)

    def append_text(self, name: str, text: str) -> None:
        """Add `text` at the end of a file that grows as the run goes; "" leaves it alone."""
        if text:
            try:
                with self.open_append(name) as f:
                    f.write(text)
            except OSError as exc:
                raise _naming(exc, self.file(name)) from None

    def has_content(self, name: str) -> bool:
        target = self.file(name)
        return target.is_file() and target.stat().st_size > 0

    def log_handler(self, level: int = logging.INFO) -> RunLogHandler:
        """A handler writing logs.txt; attach it to the run's logger."""
        handler = RunLogHandler(self.file(LOG_FILE), encoding="utf-8")
        handler.setLevel(level)
        handler.setFormatter(
            logging.Formatter(
                "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s",
                datefmt="%Y-%m-%dT%H:%M:%S",
            )
        )
        return handler

    def files(self) -> list[str]:
        """Relative paths of every regular file except the manifest, an acceptance record
        and temp files."""
        out = []
        for p in sorted(self.path.rglob("*")):
            rel = p.relative_to(self.path).as_posix()
            if p.is_file() and rel not in (MANIFEST, ACCEPTANCE) and not p.name.endswith(".tmp"):
                out.append(rel)
        return out

    def reserve_manifest(self) -> Path:
        """At the start: a placeholder holding MANIFEST_RESERVE bytes, so the real manifest
        fits even when the disk fills up during the run."""
        note = b'{"version": 1, "files": [], "incomplete": "the run has not ended"}\n'
        return self.write_bytes(MANIFEST, note + b" " * (MANIFEST_RESERVE - len(note)))

    def write_manifest(self, problem: str | None = None) -> Path:
        """Written last: every file with size and sha256; `problem` says why some are missing
        (a file that could not be written)."""
        with self._lock:
            entries = []
            for rel in self.files():
                try:
                    size, digest = _size_and_sha256(self.path / rel)
                except FileNotFoundError:  # removed under us: not part of the run any more
                    continue
                entries.append({"path": rel, "size": size, "sha256": digest})
            document: dict[str, Any] = {"version": 1, "files": entries}
            if problem:
                document["incomplete"] = problem
            return self.write_json(MANIFEST, document, in_place=True)


def _size_and_sha256(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def verify_manifest(path: str | os.PathLike[str]) -> list[str]:
    """Problems found checking a run directory (or its manifest.json) against the manifest."""
    run = Path(path)
    if run.name == MANIFEST:
        run = run.parent
    manifest_path = run / MANIFEST
    try:
        manifest = orjson.loads(manifest_path.read_bytes())
        entries = manifest["files"]
    except FileNotFoundError:
        return [f"{manifest_path}: missing"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        return [f"{manifest_path}: unreadable ({exc})"]
    problems = []
    listed = set()
    for entry in entries:
        rel = entry.get("path", "?")
        listed.add(rel)
        file = run / rel
        if not file.is_file():
            problems.append(f"{rel}: missing")
            continue
        size, digest = _size_and_sha256(file)
        if size != entry.get("size"):
            problems.append(f"{rel}: size {size} != manifest {entry.get('size')}")
        elif digest != entry.get("sha256"):
            problems.append(f"{rel}: sha256 differs from the manifest")
    for rel in RunDir(run).files():
        if rel not in listed:
            problems.append(f"{rel}: not in the manifest")
    return problems
