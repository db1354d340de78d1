"""Reading a stored run's files back, safely: the one reader behind the gate, `gate
--baseline`, `baseline: auto`, history and the report (docs/SPEC.md §6, §7).

A run directory or s3:// prefix handed to a reader may be damaged or hostile: a FIFO where
gate.json should be (opening it would wait forever for a writer), a symbolic link out of the
run, a 4 GiB file, JSON nested 100,000 deep, `NaN` where a verdict should be. So every read
goes through here:

* only regular files: the name is `lstat`ed before anything opens it, and opened with
  O_NOFOLLOW | O_NONBLOCK so a file swapped for a link or a FIFO in between is still refused;
* bounded in size: a cap per file name (CAPS, DEFAULT_CAP otherwise), checked on the size
  before reading (an s3 object's HEAD) and again on what was read;
* JSON through orjson, which refuses NaN and Infinity (JSON has neither) and nesting past
  its limit without recursing in Python, then no deeper than MAX_DEPTH levels.

Each refusal is a RunReadError: one line naming the file and what is wrong with it. Whether
a run is sealed (its manifest, and the files as it lists them) is output/stored_files.py's.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from agentsession_core.errors import UsageError, clip
from agentsession_core.output import upload
from agentsession_core.output.run_dir import ACCEPTANCE, MANIFEST

KiB = 1024
MiB = 1024 * KiB
# The biggest file of each kind a real run writes is far below its cap (a 12-hour campaign's
# gate.json is tens of KiB, hold_seconds.jsonl ~1 KiB a second, ~45 MiB): a cap only has to
# stop a reader from spending minutes and gigabytes on something no run wrote.
CAPS: dict[str, int] = {
    MANIFEST: 1 * MiB,
    ACCEPTANCE: 1 * MiB,
    "gate.json": 4 * MiB,
    "status.json": 1 * MiB,
    "campaign.json": 4 * MiB,
    "server_summary.json": 16 * MiB,
    "windows.jsonl": 16 * MiB,
    "stats.jsonl": 64 * MiB,
    "hold_seconds.jsonl": 256 * MiB,
}
# Everything else (stats_history.csv/.jsonl, gauges.jsonl, logs.txt, report.html …).
DEFAULT_CAP = 256 * MiB
# gate.json nests about 6 levels, campaign.json about 8.
MAX_DEPTH = 64
# The files a gate reads: each must be listed in the manifest when present.
GATE_FILES = ("gate.json", "windows.jsonl", "status.json", "campaign.json", "hold_seconds.jsonl")


class RunReadError(UsageError):
    """A run's file that cannot be believed: not a regular file, over its cap, not valid
    JSON, not what the schema says, or not as its manifest says (exit 2)."""


def cap_of(name: str) -> int:
    return CAPS.get(PurePosixPath(name).name, DEFAULT_CAP)


def where(location: str, name: str) -> str:
    return f"{location.rstrip('/')}/{name}"


def _size_text(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n} bytes"


def over_cap(location: str, name: str, size: int, cap: int) -> RunReadError:
    return RunReadError(
        f"{where(location, name)}: {size} bytes, over the {_size_text(cap)} cap for "
        f"{PurePosixPath(name).name}"
    )


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a file")


def _inside(root: Path, name: str) -> str:
    """root/name, refusing a name that could leave the run (a manifest lists paths)."""
    if name and "/" not in name and name not in (".", ".."):
        # A file at the top of the run, the usual case: nothing on the way to check, and no
        # Path built (history reads 10,000 runs' manifests).
        return os.path.join(root, name)
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        raise RunReadError(f"{where(str(root), name)}: not a path inside the run")
    path = root.joinpath(*parts)
    # A directory on the way that is a link could lead out of the run.
    for parent in list(path.parents)[: len(parts) - 1]:
        if parent.is_symlink():
            raise RunReadError(f"{where(str(root), name)}: under a symbolic link")
    return str(path)


def lstat_in(root: Path, name: str) -> os.stat_result | None:
    """The file's own status (None: missing); refused when it is not a regular file."""
    path = _inside(root, name)
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise RunReadError(f"{path}: cannot read ({exc.strerror or exc})") from None
    kind = _not_regular(st.st_mode)
    if kind is not None:
        raise RunReadError(f"{path}: not a regular file ({kind})")
    return st


def stream_local(root: Path, name: str, cap: int, sink: Any) -> bool:
    """Feed the file's bytes to `sink` (False: missing), refusing what is not a regular file
    or is over `cap`, before reading or while reading."""
    st = lstat_in(root, name)
    if st is None:
        return False
    if st.st_size > cap:
        raise over_cap(str(root), name, st.st_size, cap)
    path = _inside(root, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError as exc:  # ELOOP: swapped for a link since the lstat
        raise RunReadError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        kind = _not_regular(os.fstat(fd).st_mode)
        if kind is not None:  # swapped for a FIFO or a device since the lstat
            raise RunReadError(f"{path}: not a regular file ({kind})")
        total = 0
        while total <= cap and (chunk := os.read(fd, min(MiB, cap + 1 - total))):
            total += len(chunk)
            if total > cap:  # grew since the lstat
                raise over_cap(str(root), name, total, cap)
            sink(chunk)
    except OSError as exc:
        raise RunReadError(f"{path}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return True


def _read_local(root: Path, name: str, cap: int) -> bytes | None:
    chunks: list[bytes] = []
    return b"".join(chunks) if stream_local(root, name, cap, chunks.append) else None


def read_s3(location: str, name: str, cap: int, endpoint_url: str | None) -> bytes | None:
    url = where(location, name)
    try:
        head = upload.head_object(url, endpoint_url=endpoint_url)
        if head is None:
            return None
        if head["size"] > cap:
            raise over_cap(location, name, head["size"], cap)
        data = upload.read_object(url, endpoint_url=endpoint_url, max_bytes=cap)
    except upload.NoSuchObject:
        return None
    except upload.UploadError as exc:
        raise RunReadError(f"cannot read {exc}") from None
    if len(data) > cap:
        raise over_cap(location, name, len(data), cap)
    return data


def read_run_file(
    location: str, name: str, *, cap: int | None = None, endpoint_url: str | None = None
) -> bytes | None:
    """A run's file (a directory or an s3:// prefix), or None when it has no such file."""
    limit = cap_of(name) if cap is None else cap
    if upload.is_s3(location):
        return read_s3(location.rstrip("/"), name, limit, endpoint_url)
    return _read_local(Path(location), name, limit)


# --------------------------------------------------------------------------- JSON
# Everything but brackets and quotes (bytes.translate deletes them).
_NOT_STRUCTURE = bytes(i for i in range(256) if i not in b'[]{}"')
_INNERMOST = re.compile(rb"\{\}|\[\]")


def _text_depth_ok(data: bytes, limit: int) -> bool:
    """Whether JSON text orjson has parsed (so valid JSON) nests arrays and objects no more
    than `limit` deep (the outermost is level 1), from the text at C speed rather than by
    walking the value: with the escaped backslashes and quotes gone every quote delimits a
    string; without the strings only brackets are left, and each pass takes away the
    innermost pairs, one level, so they are gone after as many passes as they nest deep."""
    text = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    brackets = b"".join(text.split(b'"')[::2])
    for _ in range(limit):
        if not brackets:
            return True
        brackets = _INNERMOST.sub(b"", brackets)
    return not brackets


def parse_json(data: bytes | str, place: str) -> Any:
    """A JSON value, or a RunReadError naming `place` (a file, or a file's line)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise RunReadError(f"{place}: not valid JSON ({_why(exc)})") from None
    if isinstance(value, dict | list) and not _text_depth_ok(
        data.encode("utf-8") if isinstance(data, str) else bytes(data), MAX_DEPTH
    ):
        raise RunReadError(f"{place}: not valid JSON (nested deeper than {MAX_DEPTH} levels)")
    return value


def _why(exc: orjson.JSONDecodeError) -> str:
    text = exc.doc if isinstance(exc.doc, str) else ""
    at = text[exc.pos : exc.pos + 9].lstrip("-")
    if at.startswith(("NaN", "Infinity")) or "infinity" in exc.msg:
        return f"a non-finite number at line {exc.lineno} column {exc.colno}: JSON has none"
    if "depth" in exc.msg or "recursion" in exc.msg:
        return f"nested deeper than {MAX_DEPTH} levels"
    return clip(str(exc), 160)


def read_json_file(
    location: str, name: str, *, cap: int | None = None, endpoint_url: str | None = None
) -> dict[str, Any] | None:
    """A run's JSON object file, or None when missing."""
    data = read_run_file(location, name, cap=cap, endpoint_url=endpoint_url)
    if data is None:
        return None
    value = parse_json(data, where(location, name))
    if not isinstance(value, dict):
        raise RunReadError(f"{where(location, name)}: expected a JSON object")
    return value


def parse_jsonl(data: bytes, place: str) -> list[dict[str, Any]]:
    """Every line a JSON object; a RunReadError names the first line that is not."""
    out = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        value = parse_json(line, f"{place} line {number}")
        if not isinstance(value, dict):
            raise RunReadError(f"{place} line {number}: expected a JSON object")
        out.append(value)
    return out


def check_status(doc: dict[str, Any] | None, place: str) -> dict[str, Any] | None:
    """status.json's shape: what a gate reads of it (status, abort_reason) is text."""
    if doc is None:
        return None
    for key in ("status", "abort_reason", "phase"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            raise RunReadError(f"{place}: {key} is {clip(doc[key])}, not text")
    return doc


def check_campaign(doc: dict[str, Any] | None, place: str) -> dict[str, Any] | None:
    """campaign.json's shape: `params` is an object when present."""
    if doc is None:
        return None
    if doc.get("params") is not None and not isinstance(doc["params"], dict):
        raise RunReadError(f"{place}: params is {clip(doc['params'])}, not an object")
    return doc


__all__ = [
    "CAPS",
    "DEFAULT_CAP",
    "GATE_FILES",
    "MAX_DEPTH",
    "RunReadError",
    "cap_of",
    "check_campaign",
    "check_status",
    "lstat_in",
    "over_cap",
    "parse_json",
    "parse_jsonl",
    "read_json_file",
    "read_run_file",
    "read_s3",
    "stream_local",
    "where",
]
