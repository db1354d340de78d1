"""The container image's files (deployments/image/) without building it: `.ci/run`'s image
stage runs deployments/image/build-and-demo.sh end to end; these check what that stage and
the image rely on and a build would only show late or on another machine."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGE = REPO / "deployments" / "image"
CONTAINERFILE = IMAGE / "Containerfile"
SCRIPT = IMAGE / "build-and-demo.sh"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", CONTAINERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (word.upper(), rest.strip())
        for word, _, rest in (line.partition(" ") for line in lines if line and line[0] != "#")
    ]


def test_the_base_is_a_build_argument_and_the_entrypoint_is_agentsession():
    steps = _instructions()
    assert steps[0] == ("ARG", "BASE=python:3.11-slim")
    assert [args for word, args in steps if word == "FROM"] == ["${BASE} AS build", "${BASE}"]
    assert steps[-2:] == [("ENTRYPOINT", '["agentsession"]'), ("CMD", '["--help"]')]
    assert ("VOLUME", '["/artifacts"]') in steps
    assert ("WORKDIR", "/home/agentsession") in steps


def test_the_image_runs_as_a_fixed_non_root_uid():
    steps = _instructions()
    uid = int(dict(a.split("=", 1) for w, a in steps if w == "ARG" and "=" in a)["UID"])
    assert uid >= 1000
    assert ("USER", "${UID}:${UID}") in steps
    (user,) = [a for w, a in steps if w == "USER"]
    last_from = max(i for i, (w, _) in enumerate(steps) if w == "FROM")
    assert steps.index(("USER", user)) > last_from  # the final stage's, not the build's


def test_no_secret_is_baked_in():
    steps = _instructions()
    named = [a for w, a in steps if w in ("ENV", "ARG", "LABEL")]
    assert not [a for a in named if re.search(r"TOKEN|SECRET|PASSWORD|KEY", a, re.I)]
    # The index and its CA bundle reach pip as secret mounts of the RUNs that install.
    installs = [a for w, a in steps if w == "RUN" and "pip install" in a]
    assert len(installs) == 2  # the dependencies, then the package
    for install in installs:
        assert "--mount=type=secret,id=pipconf" in install
        assert "--mount=type=secret,id=cacert" in install
    # The source is copied into the build stage only; the final stage takes the venv.
    assert [a for w, a in steps if w == "COPY"] == [
        "pyproject.toml /src/pyproject.toml",
        ". /src",
        "--from=build /opt/agentsession /opt/agentsession",
    ]


def test_the_build_context_holds_what_the_wheel_is_made_of():
    """The script stages a list of paths as the build context: every package and
    force-included path of pyproject.toml's wheel, and the readme, must be in it."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    needed = {
        "pyproject.toml",
        project["project"]["readme"],
        *wheel["packages"],
        *wheel["force-include"],
    }
    staged = re.search(r'tar -C "\$REPO" [^\n]*\\\n(.*?)\n(?:if|\S)', SCRIPT.read_text(), re.S)
    assert staged, "the script's staging tar command"
    words = staged.group(1).replace("\\", " ").split()
    listed = {w for w in words if not w.startswith("-") and "$" not in w}
    assert needed <= listed, needed - listed
    assert all((REPO / path).exists() for path in listed), listed


def _as_nobody() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to run the script as a non-root user")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_the_script_skips_in_one_line_where_it_cannot_run(tmp_path):
    """Not root: one `image: skipped: …` line and exit 77, which .ci/run passes over,
    before anything is installed or written."""
    work = tmp_path / "work"
    # On stdin, from /: the user nobody may not be able to read the checkout's directories.
    done = subprocess.run(
        [*_as_nobody(), "bash", "-s"],
        input=SCRIPT.read_text(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={**os.environ, "AGENTSESSION_IMAGE_WORK": str(work)},
        check=False,
    )
    assert done.returncode == 77, done
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("image: skipped: "), done.stdout
    assert not work.exists()


def test_ci_runs_the_image_stage_after_the_test_tiers_and_skips_on_77():
    ci = (REPO / ".ci" / "run").read_text()
    slow = ci.index("pytest -m slow")
    stage = ci.index("bash deployments/image/build-and-demo.sh")
    assert ci.index('pytest -m "not slow"') < slow < stage
    assert '"$image_rc" = 77' in ci[stage:]


def test_the_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True, timeout=30)
