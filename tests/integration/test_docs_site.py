"""The documentation site builds in strict mode and its pages show in a real browser: headless
Chromium renders the home page and the generated parameter reference (kept in
$AGENTSESSION_SCREENSHOTS when set)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_report_browser import CHROMIUM, chromium

REPO = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).parent / "mkdocs"

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not MKDOCS.exists():
        pytest.skip("mkdocs is not installed (the docs extra)")
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return out


def look(page: Path, tmp_path: Path, name: str, expect: tuple[str, ...]) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed")
    assert page.is_file(), page
    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / f"{name}-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = dom.stdout.decode()
    for text in expect:
        assert text in parsed, text
    shot = tmp_path / f"{name}.png"
    done = chromium(
        f"--screenshot={shot}",
        "--window-size=1400,1800",
        "--hide-scrollbars",
        page.as_uri(),
        profile=tmp_path / f"{name}-shot",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 60_000, len(data)  # a styled page with text, not a blank one
    keep = os.environ.get("AGENTSESSION_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / f"docs-{shot.name}")


def test_the_home_page_shows_in_chromium(site: Path, tmp_path: Path) -> None:
    look(
        site / "index.html",
        tmp_path,
        "home",
        ("agent substrates", "Getting started", "Parameters", 'src="images/report.png"'),
    )
    assert (site / "images/report.png").is_file()


def test_the_parameter_reference_shows_in_chromium(site: Path, tmp_path: Path) -> None:
    look(
        site / "reference/parameters/index.html",
        tmp_path,
        "parameters",
        ("Parameter reference", "population.awake", "--target-rps", "campaign: <code>turnover"),
    )
