"""The local substrate's server: the control API under `/v1/` and the router on every other
path, on one loopback port (docs/SPEC.md §2.1, §2.2, §2.4), and the ate wire's control API,
`ateapi.Control` over gRPC, on a second port (docs/SPEC.md §2), in the same event loop.

This module wires the parts together and owns their start and stop:
- control_plane.py, every control operation, whichever wire asks; control.py, the JSON
  control API's thin adapter over it; ate_control.py, the gRPC one;
- router.py, forwarding router requests to the worker hosting their actor;
- actors.py, the actors and their lifecycle (locks, parking, suspend, pause, spill) on the
  state machine the in-memory fake runs too (agentsession_core/substrate/actor_machine.py);
- pool.py, the worker processes (worker.py) and their slots (placement.py: which worker a
  wake goes to), store.py, the snapshot store;
- faults.py, faults on demand; buffers.py, the router's buffer budget; persist.py, the
  actors kept across a restart; lifeline.py, dying with an embedding parent
  (docs/SPEC.md §2.4).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import ssl
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import grpc
from aiohttp import web

from agentsession_core.substrate.op_limits import OpLimits
from agentsession_core.substrate.protocol import (
    DEFAULT_TEMPLATE,
    HEALTHZ_PATH,
    METRICS_PATH,
    OPENAPI_PATH,
    is_control_path,
)
from local_substrate import ate_control, http_errors, lifeline, persist
from local_substrate.actors import Actor, ActorLifecycle
from local_substrate.buffers import ByteBudget
from local_substrate.control import ControlAPI
from local_substrate.control_plane import ControlPlane
from local_substrate.fault_rules import parse_rules
from local_substrate.faults import Faults
from local_substrate.http_errors import MAX_REQUEST_LINE
from local_substrate.metrics import MetricsEndpoint, count_requests
from local_substrate.pool import Pool, WorkerShape
from local_substrate.protocol import (
    Handler,
    WireError,
    elapsed_and_errors,
    is_protobuf,
    plain,
)
from local_substrate.router import Router

_LIVE = ("RUNNING", "PAUSED")


@dataclass(frozen=True)
class RouterTlsServing:
    """The https router port's certificate chain and key files, and the CA client
    certificates must chain to (None: no client certificate asked for; given: mTLS)."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        if self.client_ca_file is not None:
            context.load_verify_locations(self.client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
        return context


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 0
    workers: int = 8
    # Worker pools (docs/SPEC.md §2.6): name → workers, each labelled `pool: NAME`; when
    # given, the substrate has exactly these workers (`workers` is their sum).
    pools: dict[str, int] = field(default_factory=dict)
    # Many actors per worker (docs/SPEC.md §2.7): every worker's capacity and memory, unless
    # its pool has a shape of its own.
    worker_shape: WorkerShape = field(default_factory=WorkerShape)
    pool_shapes: dict[str, WorkerShape] = field(default_factory=dict)
    store: Path | None = None  # None: a temp dir removed at exit
    templates: dict[tuple[str, str], int | None] = field(
        default_factory=lambda: {DEFAULT_TEMPLATE: 1 << 30}
    )
    token: str | None = None
    park_timeout: float = 30.0
    pause_budget: int = 4 << 30
    max_op_bytes: int = 256 << 20
    max_burn_millis: int = 60_000
    max_parallel: int = 16
    # Said with every template on both wires (op_limits.py), so preflight can refuse a script
    # the caps would refuse on every step; off to rehearse a substrate that states none.
    state_op_limits: bool = True
    seed: int = 0
    grpc_port: int | None = 0  # None: no ate control API; 0: a free port
    grpc_tls: ate_control.GrpcTls | None = None
    # The router (and the JSON control API beside it) over TLS on a port of its own, as a
    # real router's https listener beside its http one (docs/SPEC.md §2.2); None: none.
    router_tls: RouterTlsServing | None = None
    max_buffered_bytes: int = 1 << 30  # request + answer bodies the router holds at once
    faults: list[str] = field(default_factory=list)  # fault_rules.py's language
    fault_seed: int = 0
    embedded: bool = False  # stop, and wipe the store, when the parent goes (lifeline.py)
    # False: pod-less workers and a router that routes nothing (`--no-data-plane`, pool.py):
    # the control plane alone, as a platform load tests it (docs/SPEC.md §2.4).
    data_plane: bool = True

    @property
    def op_limits(self) -> OpLimits | None:
        if not self.state_op_limits:
            return None
        return OpLimits(self.max_op_bytes, self.max_burn_millis, self.max_parallel)

    @property
    def max_request_bytes(self) -> int:
        """The router's per-request body cap: one op's payload plus room for its framing."""
        return self.max_op_bytes + (1 << 20)


# A clean stop suspends live actors so a restart finds them whole; bounded, since a stop
# must end (the launcher kills after its own stop timeout).
PARK_AT_STOP = 10.0


class LocalSubstrateServer:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._own_store = config.store is None
        self.store_root = (
            Path(tempfile.mkdtemp(prefix="agentsession-store-"))
            if config.store is None
            else Path(config.store)
        )
        self.lifecycle = ActorLifecycle(
            self.store_root, park_timeout=config.park_timeout, pause_budget=config.pause_budget
        )
        self.faults = self.lifecycle.faults = Faults(parse_rules(config.faults), config.fault_seed)
        self.plane = ControlPlane(config.templates, self.lifecycle, config.op_limits)
        self.control = ControlAPI(self.plane)
        self.buffers = ByteBudget(
            config.max_buffered_bytes, config.max_request_bytes, config.park_timeout
        )
        self.router = Router(self.lifecycle, self.buffers)
        self.metrics = MetricsEndpoint(self.lifecycle)
        self.ate = ate_control.AteControl(self.plane, config.token)
        self.grpc_server: grpc.aio.Server | None = None
        self.grpc_url = ""  # empty while the ate control API is off
        self.pool: Pool | None = None
        self.session: aiohttp.ClientSession | None = None
        self.runner: web.AppRunner | None = None
        self.url = ""
        self.tls_url = ""  # the https router port's URL; empty without router_tls
        self._scratch: Path | None = None

    # ---- start / stop -----------------------------------------------------------------

    async def start(self) -> str:
        cfg = self.config
        await asyncio.to_thread(self.store_root.mkdir, parents=True, exist_ok=True)
        await self._reload()
        self._scratch = self.store_root / f"{persist.RUNTIME_PREFIX}{os.getpid()}"
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=False),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False,
        )
        self.pool = Pool(
            cfg.workers,
            self._scratch,
            [
                "--max-op-bytes",
                str(cfg.max_op_bytes),
                "--max-burn-millis",
                str(cfg.max_burn_millis),
                "--max-parallel",
                str(cfg.max_parallel),
            ],
            self.lifecycle.worker_died,
            seed=cfg.seed,
            pools=cfg.pools,
            shape=cfg.worker_shape,
            shapes=cfg.pool_shapes,
            data_plane=cfg.data_plane,
        )
        self.lifecycle.bind(self.pool, self.session)
        await self.pool.start()
        self.runner = web.AppRunner(
            self.app(),
            access_log=None,
            handle_signals=False,
            # A request line or header up to this long reaches the handlers, which refuse a
            # name over its limit with the wire's JSON 400; past it aiohttp's parser answers
            # a plain-text 400, said in one line (http_errors.py), never a traceback.
            max_line_size=MAX_REQUEST_LINE,
            max_field_size=MAX_REQUEST_LINE,
            logger=http_errors.logger(),
        )
        await self.runner.setup()
        site = web.TCPSite(self.runner, cfg.host, cfg.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        self.url = f"http://{host}:{port}"
        if cfg.router_tls is not None:
            tls_site = web.TCPSite(self.runner, cfg.host, 0, ssl_context=cfg.router_tls.context())
            await tls_site.start()
            tls_port = tls_site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.tls_url = f"https://{host}:{tls_port}"
        if cfg.grpc_port is not None:
            self.grpc_server, self.grpc_url = await ate_control.start(
                self.ate, cfg.host, cfg.grpc_port, cfg.grpc_tls
            )
        return self.url

    async def _reload(self) -> None:
        """The actors an existing store holds (persist.py): a restart keeps them."""
        saved = await asyncio.to_thread(persist.scan, self.store_root)
        for s in saved:
            actor = Actor(
                s.atespace,
                s.name,
                s.template,
                s.limit,
                uid=s.uid,
                created_ns=s.created_ns,
                selector=s.selector,
                pool=s.pool,
            )
            actor.version = s.version
            actor.status = "CRASHED" if s.live else "SUSPENDED"
            self.lifecycle.actors[(s.atespace, s.name)] = actor
            self.lifecycle.keep_placements(actor)
            self.plane.atespaces.add(s.atespace)
        if saved:
            crashed = sum(s.live for s in saved)
            print(
                f"agentsession substrate: kept {len(saved)} actors from the store "
                f"{self.store_root} ({crashed} CRASHED: their state was in a worker when "
                "the last server went away)",
                file=sys.stderr,
                flush=True,
            )

    async def stop(self, *, wipe: bool = False) -> None:
        """Stop serving. A kept store keeps the actors, parked first; `wipe` (an embedded
        substrate whose parent died) deletes them and the store instead."""
        if self.grpc_server is not None:
            await self.grpc_server.stop(grace=1.0)
        self.ate.stop()
        self.faults.stop()
        if self.runner is not None:
            await self.runner.cleanup()
        if self.pool is not None and not (wipe or self._own_store):
            await self._park_all()
        self.lifecycle.stop()
        if self.pool is not None:
            await self.pool.stop()
        if self.session is not None:
            await self.session.close()
        if self._scratch is not None:
            await asyncio.to_thread(shutil.rmtree, self._scratch, True)
        if self._own_store:
            await asyncio.to_thread(shutil.rmtree, self.store_root, True)
        elif wipe:
            await asyncio.to_thread(persist.wipe, self.store_root)

    async def _park_all(self) -> None:
        live = [a for a in self.lifecycle.actors.values() if a.status in _LIVE]
        if not live:
            return
        tasks = [asyncio.ensure_future(self.lifecycle.suspend(a, faults=False)) for a in live]
        done, pending = await asyncio.wait(tasks, timeout=PARK_AT_STOP)
        for task in pending:
            task.cancel()
        failed = len(pending) + sum(1 for t in done if t.exception() is not None)
        if failed:
            print(
                f"agentsession substrate: {failed} of {len(live)} live actors could not be "
                "suspended at stop; they come back CRASHED",
                file=sys.stderr,
                flush=True,
            )

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[count_requests, elapsed_and_errors, self._auth, self.faults.middleware],
            client_max_size=self.config.max_request_bytes,
        )
        self.control.add_routes(app.router)
        self.faults.add_routes(app.router)
        self.metrics.install(app, self.lifecycle.metrics)
        # Last: the router takes every path the control API did not claim.
        app.router.add_route("*", "/{route:.*}", self.router.route)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        token = self.config.token
        # The OpenAPI document and liveness stay open so a prober needs no secret.
        if token and request.path not in (OPENAPI_PATH, HEALTHZ_PATH):
            if request.headers.get("Authorization", "") != f"Bearer {token}":
                if is_protobuf(request) and not is_control_path(request.path):
                    return plain(401, "unauthenticated")  # the ate wire's router (router.py)
                raise WireError(
                    "UNAUTHENTICATED",
                    "missing or wrong bearer token",
                    router=not is_control_path(request.path) and request.path != METRICS_PATH,
                )
        return await handler(request)


def _shape_text(pool: Pool) -> str:
    """How many actors the workers hold, when not one each with no memory limit."""
    shapes = {pool.shape_of(w.pool) for w in pool.workers.values()}
    if shapes == {WorkerShape()}:
        return ""
    said = [
        f"{shape.capacity} actors each"
        + (f" in {shape.memory} bytes" if shape.memory is not None else "")
        for shape in sorted(shapes, key=lambda s: (s.capacity, s.memory or 0))
    ]
    return " / ".join(said) + ", "


async def serve_forever(config: ServerConfig) -> None:
    """Run until SIGINT/SIGTERM (or, embedded, until the parent goes); prints the URLs it
    serves on."""
    server = LocalSubstrateServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    orphaned = asyncio.Event()
    watch: asyncio.Task[None] | None = None
    if config.embedded:

        async def watch_parent() -> None:
            await lifeline.parent_gone()
            print("agentsession substrate: parent gone; stopping", file=sys.stderr, flush=True)
            orphaned.set()
            stop.set()

        watch = asyncio.create_task(watch_parent())
    try:
        url = await server.start()
        # Two lines, in this order, always (launcher.py reads both): the first is unchanged
        # from before the ate wire, so older readers of "serving on http://..." still work.
        assert server.pool is not None
        pools = ", ".join(f"{name}={count}" for name, count in config.pools.items())
        print(
            f"agentsession: local substrate serving on {url} "
            f"({server.pool.size} workers{f' in pools {pools}' if pools else ''}, "
            f"{_shape_text(server.pool)}store {server.store_root}"
            f"{'' if config.data_plane else ', no data plane'})",
            flush=True,
        )
        if server.tls_url:  # between the two lines above: launcher.py reads it when present
            print(f"agentsession: local substrate router (TLS) on {server.tls_url}", flush=True)
        ate = f"on {server.grpc_url}" if server.grpc_url else "off"
        print(f"agentsession: local substrate ate control (gRPC) {ate}", flush=True)
        if server.faults.rules:
            shown = ", ".join(rule.text for rule in server.faults.rules)
            print(
                f"agentsession substrate: fault rules: {shown} (seed {config.fault_seed})",
                file=sys.stderr,
                flush=True,
            )
        await stop.wait()
    finally:
        if watch is not None:
            watch.cancel()
        await server.stop(wipe=orphaned.is_set())
