"""The layering contract in pyproject.toml holds, and it does catch a wrong-way import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("agentsession_core", "flows", "tasks")

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter not installed")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_of_the_tree(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_its_contracts() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "bad_import", "contract"),
    [
        (
            "agentsession_core/measure/histogram.py",
            "import agentsession_core.campaign",
            "each layer of agentsession_core imports only the layers below it",
        ),
        (
            "agentsession_core/script/quantity.py",
            "import prefect",
            "agentsession_core never imports Prefect, flows or tasks",
        ),
        (
            "agentsession_core/cli/run.py",
            "import flows.campaign",
            "agentsession_core never imports Prefect, flows or tasks",
        ),
    ],
)
def test_a_wrong_way_import_breaks_a_contract(
    tmp_path: Path, module: str, bad_import: str, contract: str
) -> None:
    root = copy_of_the_tree(tmp_path)
    target = root / module
    target.write_text(target.read_text() + f"\n{bad_import}  # noqa\n")
    result = lint_imports(root)
    assert result.returncode != 0
    assert f"{contract} BROKEN" in result.stdout
