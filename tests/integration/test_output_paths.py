"""A file named on the command line is written only as a regular file (issue 38,
docs/SPEC.md §7): `agentsession gate --junit PATH` (and `report -o`, `history -o`) refuses a
character device, a FIFO, a symlink or a directory at PATH in one line, exit 2, and leaves
it as it was; as root, `--junit /dev/null` had replaced the machine's /dev/null with a
regular file. An empty PATH names no file and is refused too; a regular file is replaced
whole. Real `agentsession` processes; every node is made by the test under its tmp dir."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit import gate_runs
from tests.unit.gate_runs import seconds


def agentsession(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentsession_core", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return gate_runs.write_run(tmp_path_factory.mktemp("runs"), 1, seconds(p50_ms=40, seconds=60))


def refused(result: subprocess.CompletedProcess[str], flag: str, path: Path, what: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one line, no traceback
    assert lines[0].startswith(f"agentsession: {flag} {path}: {what} is there; refused"), lines
    assert result.stdout == ""


def test_a_character_device_at_the_junit_path_is_refused_and_left_alone(
    run: Path, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("mknod of a character device needs root (CI runs as root)")
    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
    refused(
        agentsession("gate", str(run), "--junit", str(device)),
        "--junit",
        device,
        ("a character device"),
    )
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert os.lstat(device).st_rdev == os.makedev(1, 3)


def test_a_fifo_a_symlink_and_a_directory_are_refused_and_left_alone(
    run: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "ci.fifo"
    os.mkfifo(fifo)
    refused(agentsession("gate", str(run), "--junit", str(fifo)), "--junit", fifo, "a FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)

    target = tmp_path / "elsewhere.xml"
    target.write_text("not ours\n")
    link = tmp_path / "junit.xml"
    link.symlink_to(target)
    result = agentsession("gate", str(run), "--junit", str(link))
    refused(result, "--junit", link, "a symbolic link")
    assert link.is_symlink() and target.read_text() == "not ours\n"

    folder = tmp_path / "out"
    folder.mkdir()
    refused(agentsession("report", str(run), "-o", str(folder)), "--output", folder, "a directory")
    refused(
        agentsession("history", str(run.parents[3]), "-o", str(fifo)), "--output", fifo, ("a FIFO")
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_an_empty_junit_path_is_refused(run: Path) -> None:
    result = agentsession("gate", str(run), "--junit", "")
    assert result.returncode == 2, result
    assert result.stderr.strip() == "agentsession: --junit '': names no file", result.stderr


def test_a_regular_file_is_replaced_whole(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "junit.xml"
    out.write_text("x" * 100_000)  # longer than the report: nothing of it may remain
    result = agentsession("gate", str(run), "--junit", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert text.startswith("<?xml") and "x" * 100 not in text
    assert stat.S_ISREG(os.lstat(out).st_mode)
