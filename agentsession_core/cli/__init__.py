"""The `agentsession` command line: one module per command group, wired here.

Each command module exposes `register(subparsers)`, which adds its sub-commands and sets
`handler` on them; a handler takes the parsed namespace and returns the exit code.

A command line that names its command loads only that command's module: `agentsession gate`
pays for the judge, not for the engine, the campaign or the flows (each command's imports
cost about a second of CPU, and release pipelines and tests start these commands by the
hundred). `--help`, a bare `agentsession` or a name no module is called by loads them all.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from importlib import import_module
from importlib.metadata import entry_points

from agentsession_core.errors import AgentsessionError

# The engine's own command groups, in the order `--help` lists them.
COMMAND_MODULES = (
    "agentsession_core.cli.scripts",
    "agentsession_core.cli.run",
    "agentsession_core.cli.gate",
    "agentsession_core.cli.report",
    "agentsession_core.cli.history",
    "agentsession_core.cli.baseline",
    "agentsession_core.cli.control",
)
# Packages built on the engine add theirs through this entry-point group (the Prefect
# commands `campaign` and `serve` live with the flows, so the engine never imports Prefect;
# `substrate` lives with the local substrate, a platform of its own).
PLUGIN_GROUP = "agentsession.commands"
_AMBIGUOUS = re.compile(r"^(ambiguous option: -[^=\s]+)=.*? could match ", re.DOTALL)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line and exit 2, like every other bad-argument path; `--toke=VALUE` is named
        # without its value (`ambiguous option: --toke could match --token, --token-file`).
        message = _AMBIGUOUS.sub(r"\1 could match ", message)
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(unrecognized(extras))
        return parsed


def unrecognized(extras: Sequence[str]) -> str:
    """argparse's line for arguments nobody takes, naming the flags but none of the values:
    a misspelled flag's value may be a secret (`--toke=…`), and argparse would print it."""
    flags = [a.split("=", 1)[0] for a in extras if a.startswith("-") and len(a) > 1]
    values = sum(1 for a in extras if not a.startswith("-") or "=" in a)
    hidden = f"{values} value{'s' if values != 1 else ''} not shown (a value may be a secret)"
    if not flags:
        return f"unrecognized arguments: {hidden}"
    return f"unrecognized arguments: {' '.join(flags)}" + (f"; {hidden}" if values else "")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line: every command, or with `command` only the module of that name (an
    engine module or a plugin's entry point) when there is one."""
    parser = _Parser(
        prog="agentsession",
        description="Benchmark agent substrates by replaying scripted agent sessions.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    modules = [name for name in COMMAND_MODULES if name.rpartition(".")[2] == command]
    plugins = [p for p in entry_points(group=PLUGIN_GROUP) if p.name == command]
    if not modules and not plugins:
        modules = list(COMMAND_MODULES)
        plugins = sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name)
    for name in modules:
        import_module(name).register(sub)
    for plugin in plugins:
        plugin.load().register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(handler(args) or 0)
    except AgentsessionError as exc:
        print(f"agentsession: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `agentsession ... | head`: the reader left; say nothing more.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
