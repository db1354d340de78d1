"""report.html opens in a real browser: headless Chromium parses it and takes a screenshot."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agentsession_core.output.report import write_report
from tests.unit.test_report import build_run

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
    pytest.mark.timeout(120),
]


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        timeout=90,
    )


def test_the_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    build_run(run_dir)
    page = write_report(run_dir)

    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "p1")
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout.decode()
    assert text.count("<svg") == 4 and "polyline" in text and "FAIL" in text

    shot = tmp_path / "report.png"
    done = chromium(
        f"--screenshot={shot}", "--window-size=1000,1800", page.as_uri(), profile=tmp_path / "p2"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # charts and tables, not a blank page
