"""The `agentsession` command line: one module per command group, wired here.

Each command module exposes `register(subparsers)`, which adds its sub-commands and sets
`handler` on them; a handler takes the parsed namespace and returns the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from agentsession_core.errors import AgentsessionError

# Command groups, in the order `--help` lists them. A module that is not written yet is
# skipped so the CLI stays usable while the product grows.
COMMAND_MODULES = (
    "agentsession_core.cli.scripts",
    "agentsession_core.cli.substrate",
    "agentsession_core.cli.run",
    "agentsession_core.cli.campaign",
    "agentsession_core.cli.gate",
)


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
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
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
