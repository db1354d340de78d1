"""A tmpfs mounted for one test (a disk to fill, a read-only directory): root and mount(8),
else the test skips; unmounted lazily at the end, whatever the test left open."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(mount: Path, options: str) -> Iterator[Path]:
    mount.mkdir(exist_ok=True)
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip(f"a tmpfs ({options}) needs root and mount(8)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
