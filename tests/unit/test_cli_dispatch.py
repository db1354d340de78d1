"""The dispatcher loads only the command it is given (agentsession_core/cli/__init__.py): a
release pipeline's `agentsession gate` never pays for the engine, the campaign or the flows,
and `--help` still lists every command."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from agentsession_core.cli import build_parser

EVERY_COMMAND = {
    "scripts",
    "run",
    "gate",
    "report",
    "history",
    "baseline",
    "control",
    "campaign",
    "serve",
    "substrate",
}


def commands(parser: argparse.ArgumentParser) -> set[str]:
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


@pytest.mark.parametrize("command", ["gate", "run", "history", "campaign", "substrate"])
def test_a_named_command_loads_only_its_own_module(command: str) -> None:
    assert commands(build_parser(command)) == (
        {"campaign", "serve"} if command == "campaign" else {command}
    )


@pytest.mark.parametrize("command", [None, "serve", "no-such-command"])
def test_help_or_a_name_no_module_has_loads_them_all(command: str | None) -> None:
    assert commands(build_parser(command)) == EVERY_COMMAND


def imports_of(*argv: str) -> tuple[set[str], str]:
    """The modules `agentsession ARGV` imported (python -X importtime) and its stdout."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentsession_core", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    return {line.rpartition("|")[2].strip() for line in lines if "|" in line}, done.stdout


def test_the_gate_command_as_a_pipeline_runs_it_imports_no_engine_and_no_flows() -> None:
    imported, out = imports_of("gate", "--help")
    assert "usage: agentsession gate" in out
    assert "agentsession_core.judge.gate" in imported
    for module in ("flows.api_server", "agentsession_core.engine.params", "local_substrate.server"):
        assert module not in imported


def test_agentsession_help_lists_every_command() -> None:
    imported, out = imports_of("--help")
    assert all(name in out for name in EVERY_COMMAND)
    assert {"flows.api_server", "local_substrate.server"} <= imported
