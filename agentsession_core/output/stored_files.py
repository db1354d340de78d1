"""A stored run's files, wherever they are (a local run directory or an s3:// prefix), and
whether its manifest seals them (docs/SPEC.md §6, §7). Every read goes through
output/run_reader.py: regular files only, a cap per file, JSON without NaN or runaway
nesting.

`open_files` is where a location becomes a run's files: a directory, a file:// URL, a path
to one of its files (e.g. gate.json) or an s3:// prefix; anything else is refused. The report
reads a run through `StoredFiles`, so it is rebuilt the same way from a local copy or an
uploaded one, sealed or not.

`check_sealed` is what a gate believes before anything else: manifest.json present and
complete, every file it lists present with its size and sha256, and none of the files the
gate reads present without being listed.

`open_sealed` is history's lighter form of it (docs/SPEC.md §6.4): the same manifest, every
listed file present with its listed size and none of the gate's files unlisted, but only the
files it then reads are hashed, from the very bytes it reads (`SealedFiles.read`). A history
of 10,000 nights would otherwise hash every night's every file (a real run's are megabytes:
stats_history, gauges, hold_seconds, report.html) to show figures from its gate.json alone.

Everything is synchronous (boto3): async callers use asyncio.to_thread.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from agentsession_core.errors import clip
from agentsession_core.output import upload
from agentsession_core.output.run_dir import MANIFEST
from agentsession_core.output.run_reader import (
    GATE_FILES,
    RunReadError,
    cap_of,
    lstat_in,
    over_cap,
    parse_json,
    read_json_file,
    read_run_file,
    read_s3,
    stream_local,
    where,
)


class StoredFiles:
    """A run's files at `location` (a directory path, or an s3:// prefix without a trailing
    slash: `open_files` makes one)."""

    def __init__(self, location: str, endpoint_url: str | None = None) -> None:
        self.location = location
        self.endpoint_url = endpoint_url

    @property
    def is_s3(self) -> bool:
        return upload.is_s3(self.location)

    @property
    def local_dir(self) -> Path | None:
        return None if self.is_s3 else Path(self.location)

    def read(self, name: str) -> bytes | None:
        """The file's bytes, or None when the run has no such file; bounded and regular
        files only (output/run_reader.py)."""
        return read_run_file(self.location, name, endpoint_url=self.endpoint_url)

    def json(self, name: str) -> dict[str, Any] | None:
        """A JSON object file, strictly: invalid JSON is a RunReadError naming it."""
        data = self.read(name)
        if data is None:
            return None
        value = parse_json(data, where(self.location, name))
        if not isinstance(value, dict):
            raise RunReadError(f"{where(self.location, name)}: expected a JSON object")
        return value

    def text(self, name: str) -> str | None:
        data = self.read(name)
        return None if data is None else data.decode("utf-8", "replace")

    def names(self) -> list[str]:
        """The run's files (relative paths, sorted; temp files left out)."""
        if self.is_s3:
            try:
                keys = upload.list_objects(self.location, endpoint_url=self.endpoint_url)
            except upload.UploadError as exc:
                raise RunReadError(f"cannot list {self.location}: {exc}") from None
            return [k for k in keys if k and not k.endswith(".tmp")]
        root = Path(self.location)
        # is_symlink: a link is no file of the run (listing it would link out of the run).
        return sorted(
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and not p.is_symlink() and not p.name.endswith(".tmp")
        )


def open_files(location: str, *, endpoint_url: str | None = None) -> StoredFiles:
    """The files of the run at a directory, a file:// URL, a path to one of its files (e.g.
    gate.json, even one that is no regular file: refused when read) or an s3:// prefix; an
    unusable location is refused (RunReadError, exit 2)."""
    if location.startswith("s3://"):
        try:
            upload.split_s3(location)
        except upload.UploadError as exc:
            raise RunReadError(str(exc)) from None
        return StoredFiles(location.rstrip("/"), endpoint_url)
    path = Path(location.removeprefix("file://"))
    if not path.is_dir() and (path.is_file() or path.name == "gate.json"):
        path = path.parent
    if not path.is_dir():
        raise RunReadError(f"{location}: no such run directory")
    return StoredFiles(str(path), endpoint_url)


# --------------------------------------------------------------------------- sealed
Entries = list[tuple[str, int, str]]  # (path, size, sha256) as the manifest lists them


def _entries(location: str, manifest: dict[str, Any] | None) -> Entries:
    place = where(location, MANIFEST)
    if manifest is None:
        raise RunReadError(
            f"{place}: missing: the run was never sealed (killed, or still being written "
            "or uploaded); a gate believes only a sealed run"
        )
    if manifest.get("incomplete"):
        raise RunReadError(
            f"{place}: the run is incomplete ({clip(manifest['incomplete'], 120)}); "
            "a gate believes only a complete run"
        )
    files = manifest.get("files")
    if not isinstance(files, list):
        raise RunReadError(f"{place}: no list of files (not a manifest)")
    out = []
    for entry in files:
        path = entry.get("path") if isinstance(entry, dict) else None
        size = entry.get("size") if isinstance(entry, dict) else None
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if (
            not isinstance(path, str)
            or not isinstance(size, int)
            or isinstance(size, bool)
            or size < 0
            or not isinstance(digest, str)
            or len(digest) != 64
        ):
            raise RunReadError(f"{place}: an entry is not {{path, size, sha256}}: {clip(entry)}")
        out.append((path, size, digest.lower()))
    return out


def _sha256_local(root: Path, name: str, cap: int) -> str:
    h = hashlib.sha256()
    stream_local(root, name, cap, h.update)
    return h.hexdigest()


def _size_refusal(location: str, name: str, size: int | None, listed: int) -> None:
    """A listed file missing (`size` None), over its cap, or not of its listed size."""
    if size is None:
        raise RunReadError(f"{where(location, name)}: missing (listed in {MANIFEST})")
    cap = cap_of(name)
    if size > cap:
        raise over_cap(location, name, size, cap)
    if size != listed:
        raise RunReadError(
            f"{where(location, name)}: altered: {size} bytes, {MANIFEST} says {listed}"
        )


def _unlisted_refusal(location: str, entries: Entries, present: Any) -> None:
    """One of the gate's files present (`present(name)`) but not listed in the manifest."""
    listed = {name for name, _, _ in entries}
    for name in GATE_FILES:
        if name not in listed and present(name):
            raise RunReadError(f"{where(location, name)}: not listed in {MANIFEST}")


def _sizes_local(root: Path, entries: Entries) -> None:
    location = str(root)
    for name, size, _ in entries:
        st = lstat_in(root, name)
        _size_refusal(location, name, None if st is None else st.st_size, size)
    _unlisted_refusal(location, entries, lambda name: lstat_in(root, name) is not None)


def _sizes_s3(location: str, entries: Entries, endpoint_url: str | None) -> None:
    try:
        sizes = upload.list_sizes(location, endpoint_url=endpoint_url)
    except upload.UploadError as exc:
        raise RunReadError(f"cannot list {exc}") from None
    for name, size, _ in entries:
        _size_refusal(location, name, sizes.get(name), size)
    _unlisted_refusal(location, entries, sizes.__contains__)


def _check_local(root: Path, entries: Entries) -> None:
    _sizes_local(root, entries)
    for name, _, digest in entries:
        if _sha256_local(root, name, cap_of(name)) != digest:
            raise RunReadError(f"{where(str(root), name)}: altered: sha256 differs from {MANIFEST}")


def _check_s3(location: str, entries: Entries, endpoint_url: str | None) -> str:
    """How the objects were checked ("checksums" or "bytes"), or a RunReadError."""
    _sizes_s3(location, entries, endpoint_url)
    read_bytes = 0
    for name, _, digest in entries:
        place = where(location, name)
        try:
            head = upload.head_object(place, endpoint_url=endpoint_url)
        except upload.UploadError as exc:
            raise RunReadError(f"cannot read {exc}") from None
        if head is None:
            raise RunReadError(f"{place}: missing (listed in {MANIFEST})")
        # The store's own checksum first (it computed it from the bytes it holds), then the
        # sha256 metadata our uploader wrote after the store had verified the body; only an
        # object with neither (put by something else) is read and hashed.
        wanted = base64.b64encode(bytes.fromhex(digest)).decode("ascii")
        if head["checksum_sha256"] is not None:
            same = head["checksum_sha256"] == wanted
        elif head["sha256"] is not None:
            same = str(head["sha256"]).lower() == digest
        else:
            data = read_s3(location, name, cap_of(name), endpoint_url) or b""
            read_bytes += len(data)
            same = hashlib.sha256(data).hexdigest() == digest
        if not same:
            raise RunReadError(f"{place}: altered: sha256 differs from {MANIFEST}")
    return "bytes" if read_bytes else "checksums"


class SealedFiles(StoredFiles):
    """A run whose manifest lists every file present with its size (`open_sealed`); `read`
    returns a file's bytes only when their sha256 is the one the manifest lists."""

    def __init__(self, location: str, entries: Entries, endpoint_url: str | None) -> None:
        super().__init__(location, endpoint_url)
        self.listed = {name: (size, digest) for name, size, digest in entries}

    def read(self, name: str) -> bytes | None:
        """A listed file's bytes, checked against the manifest; None for a file it does not
        list (`open_sealed` made sure none of the gate's files is present unlisted)."""
        entry = self.listed.get(name)
        if entry is None:
            return None
        data = read_run_file(self.location, name, endpoint_url=self.endpoint_url)
        place = where(self.location, name)
        if data is None:
            raise RunReadError(f"{place}: missing (listed in {MANIFEST})")
        size, digest = entry
        if len(data) != size:
            raise RunReadError(f"{place}: altered: {len(data)} bytes, {MANIFEST} says {size}")
        if hashlib.sha256(data).hexdigest() != digest:
            raise RunReadError(f"{place}: altered: sha256 differs from {MANIFEST}")
        return data


def open_sealed(location: str, *, endpoint_url: str | None = None) -> SealedFiles:
    """History's check of a sealed run (module docstring): refused (RunReadError, the same
    one line `check_sealed` gives) when the manifest is missing or incomplete, a listed file
    is missing or of another size, or a gate's file is present unlisted; the files are then
    read through the SealedFiles, which hashes each as it is read."""
    manifest = read_json_file(location, MANIFEST, endpoint_url=endpoint_url)
    entries = _entries(location, manifest)
    if upload.is_s3(location):
        _sizes_s3(location.rstrip("/"), entries, endpoint_url)
        return SealedFiles(location.rstrip("/"), entries, endpoint_url)
    _sizes_local(Path(location), entries)
    return SealedFiles(location, entries, endpoint_url)


def check_sealed(location: str, *, endpoint_url: str | None = None) -> str:
    """Refuse (RunReadError, one line naming the file) a run whose manifest is missing or
    incomplete, or whose files are not as it lists them. Returns how an s3 run was checked
    ("checksums": the stored checksums and sizes; "bytes": some objects were read) or
    "bytes" for a local run (every file hashed)."""
    manifest = read_json_file(location, MANIFEST, endpoint_url=endpoint_url)
    entries = _entries(location, manifest)
    if upload.is_s3(location):
        return _check_s3(location.rstrip("/"), entries, endpoint_url)
    _check_local(Path(location), entries)
    return "bytes"


__all__ = [
    "Entries",
    "SealedFiles",
    "StoredFiles",
    "check_sealed",
    "open_files",
    "open_sealed",
]
