"""A file the user names on the command line (`gate --junit`, `report -o`, `history -o`): it is
written only as a regular file, atomically beside its final name (a temp file and a rename,
output/run_dir.py `atomic_write`), and anything else at that path is refused in one line
naming the flag and what is there (docs/SPEC.md §7). A rename replaces whatever the name
points at: as root, `gate --junit /dev/null` replaced the machine's /dev/null with a regular
file; a FIFO a CI job reads from, or a symlink into another tree, went the same way (issue
38). A name checked and then replaced can still be swapped in between by someone else; the
check is repeated just before the write to keep that window to one rename.

A file named by the environment for appending (GitHub Actions' `GITHUB_STEP_SUMMARY`, which
every step of a job adds to) is never replaced: `append_output` adds to its end, and only to
a regular file (opened without following a symbolic link and without waiting on a FIFO, then
looked at)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from agentsession_core.errors import UsageError
from agentsession_core.output.run_dir import atomic_write, describe_os_error

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def output_file(flag: str, value: str | None) -> Path | None:
    """The path `flag` names, refused unless it is absent or a regular file; None when the
    flag was not given. An empty value names no file and is refused too."""
    if value is None:
        return None
    if not value.strip():
        raise UsageError(f"{flag} {value!r}: names no file")
    path = Path(value).absolute()
    _refuse_other_kinds(flag, path)
    return path


def write_output(flag: str, path: Path, data: bytes | str) -> Path:
    """`data` at `path` as a regular file, atomically; the path checked again first."""
    _refuse_other_kinds(flag, path)
    try:
        return atomic_write(path, data)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write it: {describe_os_error(exc)}") from None


def append_output(label: str, path: Path, data: str) -> None:
    """`data` added to the end of the regular file at `path` (created when absent), after a
    blank line when the file already holds something; anything else there, or a write that
    fails, is a UsageError naming `label` and the path. Never truncates."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise UsageError(f"{label} {path}: cannot open it: {_open_error(exc)}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
            raise UsageError(f"{label} {path}: {what} is there; only a regular file is added to")
        body = (("\n" if info.st_size else "") + data).encode()
        while body:
            body = body[os.write(fd, body) :]
    except OSError as exc:
        raise UsageError(f"{label} {path}: cannot write it: {describe_os_error(exc)}") from None
    finally:
        os.close(fd)


def _open_error(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link is there; only a regular file is added to"
    if exc.errno == errno.ENXIO:
        return "a FIFO no one reads is there; only a regular file is added to"
    return exc.strerror or str(exc)


def _refuse_other_kinds(flag: str, path: Path) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot look at it: {describe_os_error(exc)}") from None
    if stat.S_ISREG(mode):
        return
    what = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise UsageError(
        f"{flag} {path}: {what} is there; refused: only a regular file is written (replaced "
        "whole, through a temp file beside it)"
    )


__all__ = ["append_output", "output_file", "write_output"]
