"""The local substrate's command line: `agentsession substrate serve` (plugged into the
agentsession command through the `agentsession.commands` entry points, as the flows' commands
are) and `python -m local_substrate serve`, the same command on its own (what launcher.py
starts), both running the substrate in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from agentsession_core.errors import AgentsessionError, UsageError
from agentsession_core.script.quantity import QuantityError, parse_quantity
from agentsession_core.substrate.protocol import POOL_NAME_PATTERN, POOL_NAME_RULE, TOKEN_ENV
from local_substrate.ate_control import GrpcTls
from local_substrate.fault_rules import LANGUAGE, parse_rules
from local_substrate.pool import ONE_ACTOR, WorkerShape
from local_substrate.server import (
    DEFAULT_TEMPLATE,
    RouterTlsServing,
    ServerConfig,
    serve_forever,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line and exit 2, as the agentsession command's bad arguments get.
        self.exit(2, f"{self.prog}: error: {message}\n")


def register(subparsers: argparse._SubParsersAction) -> None:
    """The `substrate` command of `agentsession`."""
    add_commands(subparsers.add_parser("substrate", help="the embedded local substrate"))


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m local_substrate ...`: the substrate's commands without the client's."""
    parser = _Parser(prog="python -m local_substrate", description="The local substrate.")
    add_commands(parser)
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except AgentsessionError as exc:
        print(f"local_substrate: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def add_commands(group: argparse.ArgumentParser) -> None:
    sub = group.add_subparsers(dest="substrate_command", metavar="SUBCOMMAND")
    serve = sub.add_parser(
        "serve",
        help="serve the JSON control API and router on one loopback port, and the ate control "
        "API (gRPC) on another, until SIGINT/SIGTERM",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="fault rules (--fault, repeatable; PUT /v1/debug/faults changes them while "
        "it runs):\n\n" + LANGUAGE,
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port")
    serve.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes (default 8; with --pool: their sum)",
    )
    serve.add_argument(
        "--pool",
        action="append",
        default=[],
        metavar="NAME=N[:CAPACITY[:MEMORY]]",
        help="a worker pool of N workers labelled pool=NAME (repeatable), each holding up to "
        "CAPACITY actors (default --worker-capacity) in MEMORY (default --worker-memory); "
        "actors are placed by their worker selector and stay on their pool",
    )
    serve.add_argument(
        "--worker-capacity",
        type=int,
        default=1,
        metavar="N",
        help="running actors each worker process holds at once (default 1)",
    )
    serve.add_argument(
        "--worker-memory",
        default="none",
        metavar="SIZE|none",
        help="memory of each worker, e.g. 512Mi: a placement whose actor's template memory "
        "limit would take the worker's reservations past it is refused, RESOURCE_EXHAUSTED "
        "(default none: no limit)",
    )
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
    serve.add_argument(
        "--token",
        default=None,
        help=f"refused: a command line is visible in the process list; set ${TOKEN_ENV} or "
        "give --token-file",
    )
    serve.add_argument(
        "--token-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="file holding the bearer token for both control APIs and the router "
        f"(default: ${TOKEN_ENV})",
    )
    serve.add_argument(
        "--grpc-port",
        default="0",
        metavar="PORT|none",
        help="port of the ate control API (ateapi.Control over gRPC) on --host; "
        "0 picks a free one, 'none' turns it off",
    )
    serve.add_argument(
        "--grpc-tls-cert",
        type=Path,
        default=None,
        metavar="FILE",
        help="PEM certificate chain: serve the gRPC port over TLS",
    )
    serve.add_argument(
        "--grpc-tls-key",
        type=Path,
        default=None,
        metavar="FILE",
        help="PEM private key of --grpc-tls-cert",
    )
    serve.add_argument(
        "--grpc-client-ca",
        type=Path,
        default=None,
        metavar="FILE",
        help="PEM CA: require client certificates it signed on the gRPC port (mTLS)",
    )
    serve.add_argument(
        "--router-tls-cert",
        type=Path,
        default=None,
        metavar="FILE",
        help="PEM certificate chain: also serve the router (and the JSON control API) over "
        "TLS, on a port of its own (printed as 'router (TLS) on https://...')",
    )
    serve.add_argument(
        "--router-tls-key", type=Path, default=None, metavar="FILE", help="its PEM private key"
    )
    serve.add_argument(
        "--router-client-ca",
        type=Path,
        default=None,
        metavar="FILE",
        help="PEM CA: require client certificates it signed on the TLS router port (mTLS)",
    )
    serve.add_argument("--park-timeout", type=float, default=30.0, metavar="SECONDS")
    serve.add_argument("--max-op-size", default="256Mi", help="per-op size cap")
    serve.add_argument("--max-burn-millis", type=int, default=60_000)
    serve.add_argument("--max-parallel", type=int, default=16)
    serve.add_argument(
        "--no-op-limits",
        action="store_true",
        help="do not state the three caps above with the template (a substrate that states "
        "none: the engine then learns them only from INVALID_ARGUMENT answers)",
    )
    serve.add_argument(
        "--no-data-plane",
        action="store_true",
        help="the control plane alone: pod-less workers (placed on and listed, running "
        "nothing), actors created, suspended and resumed as records only, and a router that "
        "answers every actor request 503 UNAVAILABLE (docs/SPEC.md §2.4)",
    )
    serve.add_argument(
        "--pause-budget",
        default="4Gi",
        help="paused state a worker may hold before a pause becomes a suspend",
    )
    serve.add_argument(
        "--max-buffered",
        default="1Gi",
        help="request and answer bodies the router may hold at once (at least --max-op-size); "
        "beyond it a request waits up to --park-timeout, then gets RESOURCE_EXHAUSTED",
    )
    serve.add_argument("--seed", type=int, default=0)
    serve.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="RULE",
        help="inject a fault, e.g. wake:refuse:0.2 or router:latency:exp:50ms (the rules are "
        "below)",
    )
    serve.add_argument(
        "--fault-seed", type=int, default=0, help="seed of every random choice the faults make"
    )
    serve.add_argument(
        "--embedded",
        action="store_true",
        help="for launchers: stdin is a pipe from the parent; when the parent goes (even "
        "killed), stop and delete every actor and the store",
    )
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


def parse_pools(specs: list[str]) -> dict[str, int]:
    """`--pool NAME=N[:CAPACITY[:MEMORY]]` flags as {name: workers}; the error names the flag."""
    return {name: workers for name, (workers, _) in parse_pool_specs(specs).items()}


def parse_capacity(text: str | int, where: str) -> int:
    value = str(text).strip()
    if not value.isdigit() or int(value) < 1:
        raise UsageError(f"{where}: a worker's capacity is a whole number of actors, at least 1")
    return int(value)


def parse_memory(text: str, where: str) -> int | None:
    """A worker's memory: a size, or `none` for no limit."""
    if text.strip().lower() == "none":
        return None
    size = parse_size(text, where)
    if size < 1:
        raise UsageError(f"{where}: a worker's memory must be above 0 (or none)")
    return size


def parse_pool_specs(
    specs: list[str], default: WorkerShape = ONE_ACTOR
) -> dict[str, tuple[int, WorkerShape]]:
    """`--pool NAME=N[:CAPACITY[:MEMORY]]` flags as {name: (workers, their shape)}, the
    shape's parts not given taken from `default`; the error names the flag."""
    pools: dict[str, tuple[int, WorkerShape]] = {}
    for spec in specs:
        where = f"--pool {spec!r}"
        name, eq, rest = spec.partition("=")
        name = name.strip()
        count, *shape = rest.split(":")
        if not eq or not count.strip().isdigit() or int(count) < 1 or len(shape) > 2:
            raise UsageError(
                f"{where}: expected NAME=N[:CAPACITY[:MEMORY]] with N workers, at least 1 "
                "(e.g. fast=2, or fast=2:4:512Mi for 2 workers of 4 actors in 512Mi each)"
            )
        if not POOL_NAME_PATTERN.match(name):
            raise UsageError(f"{where}: the pool name must be {POOL_NAME_RULE}")
        if name in pools:
            raise UsageError(f"{where}: pool {name!r} given twice")
        capacity = parse_capacity(shape[0], where) if shape else default.capacity
        memory = parse_memory(shape[1], where) if len(shape) > 1 else default.memory
        pools[name] = (int(count), WorkerShape(capacity, memory))
    return pools


def refuse_workers_no_template_fits(
    templates: dict[tuple[str, str], int | None],
    shapes: list[WorkerShape],
    args: argparse.Namespace,
) -> None:
    """Workers whose memory is below every template's limit could never hold an actor: a
    placement reserves the template's limit, so every wake would be refused for as long as
    the substrate runs (issue 38: `--worker-memory 1` was accepted). Refused at start, in one
    line; a template that fits no worker while another does is the caller's to avoid."""
    memories = [s.memory for s in shapes]
    limits = [limit for limit in templates.values()]
    if None in memories or None in limits or not memories:
        return
    largest = max(m for m in memories if m is not None)
    smallest = min(limit for limit in limits if limit is not None)
    if smallest <= largest:
        return
    name = next(f"{ns}/{n}" for (ns, n), limit in templates.items() if limit == smallest)
    flag = "--pool" if args.pool else "--worker-memory"
    raise UsageError(
        f"{flag}: no template fits in a worker: the largest worker has {largest} bytes, the "
        f"smallest template ({name}) reserves {smallest} bytes for each actor; give workers "
        "at least that, or a smaller template (--template NAMESPACE/NAME=SIZE)"
    )


def parse_grpc_port(text: str) -> int | None:
    if text.strip().lower() == "none":
        return None
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise UsageError(f"--grpc-port {text!r}: expected a port number, 0 or 'none'")
    return port


def _pem(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror or exc}") from None


def grpc_tls(args: argparse.Namespace, port: int | None) -> GrpcTls | None:
    cert, key, ca = args.grpc_tls_cert, args.grpc_tls_key, args.grpc_client_ca
    if cert is None and key is None and ca is None:
        return None
    if port is None:
        raise UsageError("--grpc-tls-*/--grpc-client-ca given with --grpc-port none")
    if cert is None or key is None:
        raise UsageError("gRPC TLS needs both --grpc-tls-cert and --grpc-tls-key")
    return GrpcTls(
        cert_chain=_pem(cert, "--grpc-tls-cert"),
        private_key=_pem(key, "--grpc-tls-key"),
        client_ca=_pem(ca, "--grpc-client-ca") if ca is not None else None,
    )


def router_tls(args: argparse.Namespace) -> RouterTlsServing | None:
    cert, key, ca = args.router_tls_cert, args.router_tls_key, args.router_client_ca
    if cert is None and key is None and ca is None:
        return None
    if cert is None or key is None:
        raise UsageError("router TLS needs both --router-tls-cert and --router-tls-key")
    serving = RouterTlsServing(cert, key, ca)
    try:
        serving.context()  # refused here, in one line, before anything starts
    except (OSError, ValueError) as exc:
        raise UsageError(f"--router-tls-cert/--router-tls-key/--router-client-ca: {exc}") from None
    return serving


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    if args.token is not None:
        # Kept as a flag so that it is refused by name: without it argparse would take
        # `--token` as an abbreviation of `--token-file`.
        raise UsageError(
            "--token: a token on the command line is visible in the process list; set "
            f"{TOKEN_ENV}, or give --token-file FILE"
        )
    shape = WorkerShape(
        parse_capacity(args.worker_capacity, f"--worker-capacity {args.worker_capacity}"),
        parse_memory(args.worker_memory, f"--worker-memory {args.worker_memory!r}"),
    )
    pool_specs = parse_pool_specs(args.pool, shape)
    pools = {name: workers for name, (workers, _) in pool_specs.items()}
    if pools and args.workers is not None and args.workers != sum(pools.values()):
        raise UsageError(
            f"--workers {args.workers}: with --pool the workers are the pools' "
            f"{sum(pools.values())}; leave --workers out"
        )
    workers = sum(pools.values()) if pools else (8 if args.workers is None else args.workers)
    if workers < 1:
        raise UsageError(f"--workers {args.workers}: need at least 1")
    if args.park_timeout <= 0:
        raise UsageError(f"--park-timeout {args.park_timeout}: must be > 0")
    max_op = parse_size(args.max_op_size, "--max-op-size")
    budget = parse_size(args.pause_budget, "--pause-budget")
    buffered = parse_size(args.max_buffered, "--max-buffered")
    if buffered < max_op:
        raise UsageError(
            f"--max-buffered {args.max_buffered}: must be at least --max-op-size "
            f"{args.max_op_size}, or one op's body could never be buffered"
        )
    parse_rules(args.fault)  # refused here, in one line, before anything starts
    templates = parse_templates(args.template)
    shapes = [shape] if not pool_specs else [pool for _, pool in pool_specs.values()]
    refuse_workers_no_template_fits(templates, shapes, args)
    grpc_port = parse_grpc_port(args.grpc_port)
    return ServerConfig(
        host=args.host,
        port=args.port,
        workers=workers,
        pools=pools,
        worker_shape=shape,
        pool_shapes={name: pool_shape for name, (_, pool_shape) in pool_specs.items()},
        store=args.store,
        templates=templates,
        token=_token(args.token_file) or os.environ.get(TOKEN_ENV) or None,
        park_timeout=args.park_timeout,
        pause_budget=budget,
        max_op_bytes=max_op,
        max_burn_millis=args.max_burn_millis,
        max_parallel=args.max_parallel,
        state_op_limits=not args.no_op_limits,
        seed=args.seed,
        grpc_port=grpc_port,
        grpc_tls=grpc_tls(args, grpc_port),
        router_tls=router_tls(args),
        max_buffered_bytes=buffered,
        faults=[rule.strip() for rule in args.fault],
        fault_seed=args.fault_seed,
        embedded=args.embedded,
        data_plane=not args.no_data_plane,
    )


def _token(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--token-file {path}: {exc}") from None
    if not token:
        raise UsageError(f"--token-file {path}: the file holds no token")
    return token


def run_serve(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    # Read once; the worker processes inherit this environment and have no use for it.
    os.environ.pop(TOKEN_ENV, None)
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve_forever(config))
    else:
        uvloop.run(serve_forever(config))
    return 0
