"""The `agentsession` command line: one module per command group, wired here.

Each command module exposes `register(subparsers)`, which adds its sub-commands and sets
`handler` on them; a handler takes the parsed namespace and returns the exit code.
"""

from __future__ import annotations

import argparse
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
    "agentsession_core.cli.control",
)
# Packages built on the engine add theirs through this entry-point group (the Prefect
# commands `campaign` and `serve` live with the flows, so the engine never imports Prefect;
# `substrate` lives with the local substrate, a platform of its own).
PLUGIN_GROUP = "agentsession.commands"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line and exit 2, like every other bad-argument path.
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agentsession",
        description="Benchmark agent substrates by replaying scripted agent sessions.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        import_module(name).register(sub)
    for plugin in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        plugin.load().register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
