"""agentsession_core's public names: all importable, listed once, and loaded lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agentsession_core


def test_every_public_name_resolves_and_all_matches_the_table() -> None:
    public = set(agentsession_core._PUBLIC)
    assert set(agentsession_core.__all__) == public | {"__version__"}
    for name in sorted(public):
        assert getattr(agentsession_core, name) is not None, name


def test_importing_the_package_loads_no_engine() -> None:
    probe = (
        "import sys, agentsession_core as ag; "
        "print(sorted(m for m in sys.modules if m.startswith('agentsession_core')));"
        "ag.load_script; print('numpy' in sys.modules, 'aiohttp' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    loaded, heavy = done.stdout.strip().splitlines()
    assert loaded == "['agentsession_core', 'agentsession_core.version']"
    assert heavy == "False False"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        agentsession_core.NoSuchThing  # noqa: B018
