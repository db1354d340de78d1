"""`agentsession substrate serve`: run the local substrate in the foreground."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from agentsession_core.errors import UsageError
from agentsession_core.script.quantity import QuantityError, parse_quantity
from agentsession_core.substrate.local.server import (
    DEFAULT_TEMPLATE,
    ServerConfig,
    serve_forever,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser("substrate", help="the embedded local substrate")
    sub = group.add_subparsers(dest="substrate_command", metavar="SUBCOMMAND")
    serve = sub.add_parser(
        "serve",
        help="serve the control API and router on one loopback port until SIGINT/SIGTERM",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port")
    serve.add_argument("--workers", type=int, default=8)
    serve.add_argument(
        "--store",
        type=Path,
        default=None,
        help="snapshot store dir, kept at exit (default: a temp dir, removed)",
    )
    serve.add_argument(
        "--template",
        action="append",
        default=[],
        metavar="NS/NAME=SIZE",
        help="a template and its memory limit (SIZE 'none' for no limit); "
        f"default {DEFAULT_TEMPLATE[0]}/{DEFAULT_TEMPLATE[1]}=1Gi",
    )
    serve.add_argument("--token", default=None, help="bearer token for control and router")
    serve.add_argument("--park-timeout", type=float, default=30.0, metavar="SECONDS")
    serve.add_argument("--max-op-size", default="256Mi", help="per-op size cap")
    serve.add_argument("--max-burn-millis", type=int, default=60_000)
    serve.add_argument("--max-parallel", type=int, default=16)
    serve.add_argument(
        "--pause-budget",
        default="4Gi",
        help="paused state a worker may hold before a pause becomes a suspend",
    )
    serve.add_argument("--seed", type=int, default=0)
    serve.set_defaults(handler=run_serve)
    group.set_defaults(handler=lambda args: _usage(group))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def parse_size(text: str, where: str) -> int:
    """A size flag as whole bytes, parsed like a script's sizes; the error names the flag."""
    try:
        return parse_quantity(text.strip())
    except QuantityError as exc:
        raise UsageError(f"{where}: {exc}") from None


def parse_templates(specs: list[str]) -> dict[tuple[str, str], int | None]:
    templates: dict[tuple[str, str], int | None] = {DEFAULT_TEMPLATE: 1 << 30}
    for spec in specs:
        where = f"--template {spec!r}"
        ref, eq, size = spec.partition("=")
        namespace, slash, name = ref.partition("/")
        if not (eq and slash and namespace and name and size):
            raise UsageError(
                f"{where}: expected NS/NAME=SIZE, e.g. benchmark-workloads/glutton=1Gi"
            )
        limit = None if size.lower() == "none" else parse_size(size, where)
        templates[(namespace, name)] = limit
    return templates


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    if args.workers < 1:
        raise UsageError(f"--workers {args.workers}: need at least 1")
    if args.park_timeout <= 0:
        raise UsageError(f"--park-timeout {args.park_timeout}: must be > 0")
    max_op = parse_size(args.max_op_size, "--max-op-size")
    budget = parse_size(args.pause_budget, "--pause-budget")
    return ServerConfig(
        host=args.host,
        port=args.port,
        workers=args.workers,
        store=args.store,
        templates=parse_templates(args.template),
        token=args.token,
        park_timeout=args.park_timeout,
        pause_budget=budget,
        max_op_bytes=max_op,
        max_burn_millis=args.max_burn_millis,
        max_parallel=args.max_parallel,
        seed=args.seed,
    )


def run_serve(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve_forever(config))
    else:
        uvloop.run(serve_forever(config))
    return 0
