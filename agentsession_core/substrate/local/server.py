"""The local substrate's server: the control API under `/v1/` and the router on every other
path, on one loopback port (docs/SPEC.md §2.1, §2.2, §2.4), and the ate wire's control API,
`ateapi.Control` over gRPC, on a second port (docs/SPEC.md §2), in the same event loop.

This module wires the parts together and owns their start and stop:
- control.py, the JSON control API handlers; ate_control.py, the gRPC ones;
- router.py, forwarding router requests to the worker hosting their actor;
- actors.py, the actors and their lifecycle (locks, parking, suspend, pause, spill);
- pool.py, the worker processes (worker.py), store.py, the snapshot store.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import grpc
from aiohttp import web

from agentsession_core.substrate.local import ate_control
from agentsession_core.substrate.local.actors import ActorLifecycle
from agentsession_core.substrate.local.control import ControlAPI
from agentsession_core.substrate.local.metrics import MetricsEndpoint, count_requests
from agentsession_core.substrate.local.pool import Pool
from agentsession_core.substrate.local.protocol import (
    Handler,
    WireError,
    elapsed_and_errors,
    is_protobuf,
    plain,
)
from agentsession_core.substrate.local.router import Router
from agentsession_core.substrate.protocol import (
    DEFAULT_TEMPLATE,
    HEALTHZ_PATH,
    METRICS_PATH,
    OPENAPI_PATH,
    is_control_path,
)


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 0
    workers: int = 8
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
    seed: int = 0
    grpc_port: int | None = 0  # None: no ate control API; 0: a free port
    grpc_tls: ate_control.GrpcTls | None = None


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
        self.control = ControlAPI(config.templates, self.lifecycle)
        self.router = Router(self.lifecycle)
        self.metrics = MetricsEndpoint(self.lifecycle)
        self.ate = ate_control.AteControl(
            config.templates, self.control.atespaces, self.lifecycle, config.token
        )
        self.grpc_server: grpc.aio.Server | None = None
        self.grpc_url = ""  # empty while the ate control API is off
        self.pool: Pool | None = None
        self.session: aiohttp.ClientSession | None = None
        self.runner: web.AppRunner | None = None
        self.url = ""
        self._scratch: Path | None = None

    # ---- start / stop -----------------------------------------------------------------

    async def start(self) -> str:
        cfg = self.config
        await asyncio.to_thread(self.store_root.mkdir, parents=True, exist_ok=True)
        self._scratch = self.store_root / f".runtime-{os.getpid()}"
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
        )
        self.lifecycle.bind(self.pool, self.session)
        await self.pool.start()
        self.runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, cfg.host, cfg.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        self.url = f"http://{host}:{port}"
        if cfg.grpc_port is not None:
            self.grpc_server, self.grpc_url = await ate_control.start(
                self.ate, cfg.host, cfg.grpc_port, cfg.grpc_tls
            )
        return self.url

    async def stop(self) -> None:
        if self.grpc_server is not None:
            await self.grpc_server.stop(grace=1.0)
        self.ate.stop()
        if self.runner is not None:
            await self.runner.cleanup()
        self.lifecycle.stop()
        if self.pool is not None:
            await self.pool.stop()
        if self.session is not None:
            await self.session.close()
        if self._scratch is not None:
            await asyncio.to_thread(shutil.rmtree, self._scratch, True)
        if self._own_store:
            await asyncio.to_thread(shutil.rmtree, self.store_root, True)

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[count_requests, elapsed_and_errors, self._auth],
            client_max_size=self.config.max_op_bytes + (1 << 20),
        )
        self.control.add_routes(app.router)
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


async def serve_forever(config: ServerConfig) -> None:
    """Run until SIGINT/SIGTERM; prints the URL it serves on."""
    server = LocalSubstrateServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        url = await server.start()
        # Two lines, in this order, always (launcher.py reads both): the first is unchanged
        # from before the ate wire, so older readers of "serving on http://..." still work.
        print(
            f"agentsession: local substrate serving on {url} "
            f"({config.workers} workers, store {server.store_root})",
            flush=True,
        )
        ate = f"on {server.grpc_url}" if server.grpc_url else "off"
        print(f"agentsession: local substrate ate control (gRPC) {ate}", flush=True)
        await stop.wait()
    finally:
        await server.stop()
