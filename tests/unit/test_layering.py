"""The layering contract in pyproject.toml holds, and it does catch a wrong-way import; no
module imports itself back at run time; and in the core no module does even through imports
made only for type checking (a circle there is a concept split in two: issue 35)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("agentsession_core", "local_substrate", "flows", "tasks")

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
        (
            "agentsession_core/engine/target.py",
            "import local_substrate.server",
            "the client reaches the local substrate only by its launcher",
        ),
        (
            "local_substrate/actors.py",
            "import agentsession_core.engine.params",
            "the local substrate shares only wire, quantities and errors",
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


# Run in a child with the tree on its path, so a copy of the tree is read, not this one.
CIRCLE_FINDER = """
import graphlib, sys
import grimp
types = sys.argv[1] == "types"
graph = grimp.build_graph(*sys.argv[2:], exclude_type_checking_imports=not types)
imports = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
try:
    graphlib.TopologicalSorter(imports).prepare()
except graphlib.CycleError as exc:
    print(" -> ".join(exc.args[1]))
"""


def first_circle(root: Path, *packages: str, types: bool = False) -> str:
    """The first circle of imports among `packages`' modules ("" when none): run-time
    imports only, or also those made only for type checking (`types`)."""
    result = subprocess.run(
        [sys.executable, "-c", CIRCLE_FINDER, "types" if types else "run", *packages],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_no_module_imports_itself_back_at_run_time() -> None:
    assert first_circle(REPO, *PACKAGES) == ""


def test_no_module_of_the_core_imports_itself_back_even_for_types() -> None:
    assert first_circle(REPO, "agentsession_core", types=True) == ""


def test_a_run_time_import_circle_is_found(tmp_path: Path) -> None:
    root = copy_of_the_tree(tmp_path)
    # Inside a function, as the circle this test first guarded against was.
    target = root / "agentsession_core/run/run.py"
    target.write_text(
        target.read_text() + "\n\ndef _late() -> None:\n"
        "    import agentsession_core.run.single  # noqa: F401\n"
    )
    circle = first_circle(root, *PACKAGES)
    assert "agentsession_core.run.run" in circle
    assert "agentsession_core.run.single" in circle


def test_a_circle_made_for_types_only_is_found_in_the_core(tmp_path: Path) -> None:
    root = copy_of_the_tree(tmp_path)
    target = root / "agentsession_core/run/files.py"
    target.write_text(
        target.read_text().replace(
            "log = logging.getLogger",
            "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
            "    import agentsession_core.run.run  # noqa: F401\n\nlog = logging.getLogger",
            1,
        )
    )
    assert first_circle(root, *PACKAGES) == ""  # never runs
    circle = first_circle(root, "agentsession_core", types=True)
    assert "agentsession_core.run.run" in circle and "agentsession_core.run.files" in circle
