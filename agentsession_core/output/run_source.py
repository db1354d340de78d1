"""A finished (or half-finished) run's files, wherever they are: a local run directory or an
``s3://`` prefix. The report reads a run through this, so it is rebuilt the same way from a
local copy or from an uploaded one.

Everything is synchronous (boto3): async callers use asyncio.to_thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentsession_core.output import upload
from agentsession_core.output.run_reader import RunReadError, parse_json, read_run_file, where


class RunSourceError(RunReadError):
    """The run cannot be read at all (no such directory, the store refused), or one of its
    files is not a regular file or is over its cap (output/run_reader.py)."""


@dataclass
class RunSource:
    """`location` is a directory path or an s3:// prefix (no trailing slash)."""

    location: str
    endpoint_url: str | None = None

    @property
    def is_s3(self) -> bool:
        return upload.is_s3(self.location)

    @property
    def local_dir(self) -> Path | None:
        return None if self.is_s3 else Path(self.location)

    def read(self, name: str) -> bytes | None:
        """The file's bytes, or None when the run has no such file; bounded and regular
        files only, as every reader of a run (output/run_reader.py)."""
        try:
            return read_run_file(self.location, name, endpoint_url=self.endpoint_url)
        except RunSourceError:
            raise
        except RunReadError as exc:
            raise RunSourceError(str(exc)) from None

    def json(self, name: str) -> dict[str, Any] | None:
        """A JSON object file, strictly: invalid JSON is a RunSourceError naming it."""
        data = self.read(name)
        if data is None:
            return None
        try:
            value = parse_json(data, where(self.location, name))
        except RunReadError as exc:
            raise RunSourceError(str(exc)) from None
        if not isinstance(value, dict):
            raise RunSourceError(f"{where(self.location, name)}: expected a JSON object")
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
                raise RunSourceError(f"cannot list {self.location}: {exc}") from None
            return [k for k in keys if k and not k.endswith(".tmp")]
        root = Path(self.location)
        # is_symlink: a link is no file of the run (listing it would link out of the run).
        return sorted(
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and not p.is_symlink() and not p.name.endswith(".tmp")
        )


def open_run(location: str, *, endpoint_url: str | None = None) -> RunSource:
    """A RunSource for a run directory, a file:// URL, a path to one of its files (e.g.
    gate.json) or an s3:// prefix; an unusable location is refused (exit 2)."""
    if location.startswith("s3://"):
        try:
            upload.split_s3(location)
        except upload.UploadError as exc:
            raise RunSourceError(str(exc)) from None
        return RunSource(location.rstrip("/"), endpoint_url)
    path = Path(location.removeprefix("file://"))
    if path.is_file():
        path = path.parent
    if not path.is_dir():
        raise RunSourceError(f"{location}: no such run directory")
    return RunSource(str(path))


__all__ = ["RunSource", "RunSourceError", "open_run"]
