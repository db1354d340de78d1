"""A paired campaign whose reference is its own target is refused in one line (issue 38,
docs/SPEC.md §6.8): a release gate against itself passes whatever the build (the hostile user
saw one pass with no word), and both arms would share one platform's workers. The same
control endpoint or the same router endpoint is enough, written with or without the
scheme's default port; a second deployment (another port) is a legitimate A/A rehearsal.
A real `agentsession campaign` process, refused before any Prefect API starts."""

from __future__ import annotations

import subprocess
import sys

import pytest


def campaign(*sets: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "agentsession_core", "campaign", "--preset", "release-gate"]
    for value in sets:
        args += ["--set", value]
    return subprocess.run([*args, "--print-params"], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("sets", "field", "shown"),
    [
        (
            [
                "target.substrate=grpc://10.0.0.5:9443",
                "target.router=http://10.0.0.5:8080",
                "reference.substrate=grpc://10.0.0.5:9443",
                "reference.router=http://10.0.0.6:8080",
            ],
            "substrate",
            "grpc://10.0.0.5:9443",
        ),
        (
            [
                "target.substrate=grpcs://ate.example:443",
                "target.router=https://router.example",
                "reference.substrate=grpcs://ate-prod.example",
                "reference.router=https://ROUTER.example:443",
            ],
            "router",
            "https://ROUTER.example:443",
        ),
    ],
)
def test_a_reference_that_is_the_target_is_refused(sets: list[str], field: str, shown: str) -> None:
    done = campaign(*sets)
    assert done.returncode == 2, done
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert f"reference.{field} is target.{field} ('{shown}'): a paired campaign against itself" in (
        line
    ), line


def test_a_second_deployment_is_a_reference() -> None:
    done = campaign(
        "target.substrate=grpc://10.0.0.5:9443",
        "target.router=http://10.0.0.5:8080",
        "reference.substrate=grpc://10.0.0.5:9444",
        "reference.router=http://10.0.0.5:8081",
    )
    assert done.returncode == 0, done.stderr
