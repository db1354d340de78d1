"""The local substrate's server: the control API under `/v1/` and the router on every other
path, on one loopback port (docs/SPEC.md §2.1, §2.2, §2.4).

Actor lifecycle. Every actor has an asyncio.Lock; every lifecycle change (resume, suspend,
pause, delete, and the implicit resume of a parked router request) runs under it, so
concurrent calls on one actor are serialised in arrival order, never interleaved. States:

    SUSPENDED --resume--> RESUMING --> RUNNING --suspend--> SUSPENDING --> SUSPENDED
                                       RUNNING --pause----> PAUSING    --> PAUSED
    PAUSED --resume--> RESUMING --> RUNNING          any --worker died--> CRASHED

Calls that find the actor already where they lead are no-ops (resume of a RUNNING actor,
suspend of a SUSPENDED one). A CRASHED actor answers ABORTED "... crashed" to everything
but GetActor and DeleteActor.

Where the state lives. RUNNING: in its worker. SUSPENDED: in the snapshot store (or
nowhere: a new actor's golden state is empty). PAUSED: in the worker it ran on, which is
free for other actors meanwhile; resume takes that worker when it is free (a local swap),
otherwise the paused state is spilled to the store and loaded on any free worker
(migration on demand). A worker keeps at most `pause_budget` bytes of paused state; a
pause beyond it is carried out as a suspend. Paused state dies with its worker.

Router. A request to a RUNNING actor whose lock is free goes straight through (counted in
flight, so a suspend waits for it to finish). Otherwise the request parks: it queues on
the lock, resumes the actor if needed, and then goes through. Waiting for a free worker
is bounded by `park_timeout`: RESOURCE_EXHAUSTED 503 past it. Router verdicts carry
`x-ate-router: 1`; the glutton's own answers pass through without it.

SuspendActor `?async=true` takes the lock at once if it is free (so a later call queues
behind it), answers 202 and finishes in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from agentsession_core.substrate.local import store
from agentsession_core.substrate.local.openapi import openapi_document
from agentsession_core.substrate.local.pool import Pool, WorkerProc
from agentsession_core.substrate.local.protocol import (
    TARGET_HEADER,
    WireError,
    elapsed_and_errors,
    json_response,
    read_object,
)
from agentsession_core.substrate.local.worker import SECRET_HEADER

DEFAULT_TEMPLATE = ("benchmark-workloads", "glutton")
_ACTOR_TAIL = re.compile(r"^([^:]+)(?::(resume|suspend|pause))?$")


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


@dataclass(eq=False)
class Actor:
    atespace: str
    name: str
    template: tuple[str, str]
    limit: int | None
    status: str = "SUSPENDED"
    worker: WorkerProc | None = None
    paused_on: WorkerProc | None = None
    version: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    inflight: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    deleted: bool = False

    @property
    def key(self) -> str:
        return f"{self.atespace}/{self.name}"

    def describe(self) -> dict[str, Any]:
        where = self.worker or self.paused_on
        return {
            "atespace": self.atespace,
            "name": self.name,
            "status": self.status,
            "worker": where.name if where else None,
            "version": self.version,
            "template": {"namespace": self.template[0], "name": self.template[1]},
        }


class WorkerFailed(Exception):
    """An admin call to a worker got no usable answer."""


class LocalSubstrateServer:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._own_store = config.store is None
        self.store_root = (
            Path(tempfile.mkdtemp(prefix="agentsession-store-"))
            if config.store is None
            else Path(config.store)
        )
        self.atespaces: set[str] = set()
        self.actors: dict[tuple[str, str], Actor] = {}
        self.pool: Pool | None = None
        self.session: aiohttp.ClientSession | None = None
        self.runner: web.AppRunner | None = None
        self.url = ""
        self._background: set[asyncio.Task[Any]] = set()
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
            self._on_crash,
            seed=cfg.seed,
        )
        await self.pool.start()
        self.runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, cfg.host, cfg.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        self.url = f"http://{host}:{port}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        for task in list(self._background):
            task.cancel()
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
            middlewares=[elapsed_and_errors, self._auth],
            client_max_size=self.config.max_op_bytes + (1 << 20),
        )
        r = app.router
        r.add_get("/openapi.json", self.openapi)
        r.add_get("/v1/healthz", self.healthz)
        r.add_get("/v1/debug/workers", self.debug_workers)
        r.add_get("/v1/templates/{ns}/{name}", self.get_template)
        r.add_put("/v1/atespaces/{a}", self.ensure_atespace)
        r.add_post("/v1/atespaces/{a}/actors", self.create_actor)
        r.add_get("/v1/atespaces/{a}/actors", self.list_actors)
        r.add_route("*", "/v1/atespaces/{a}/actors/{tail}", self.actor_call)
        r.add_route("*", "/{route:.*}", self.route)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler) -> web.StreamResponse:
        token = self.config.token
        if token and request.path not in ("/openapi.json", "/v1/healthz"):
            if request.headers.get("Authorization", "") != f"Bearer {token}":
                raise WireError(
                    "UNAUTHENTICATED",
                    "missing or wrong bearer token",
                    router=not _is_control(request.path),
                )
        return await handler(request)

    # ---- control API --------------------------------------------------------------------

    async def openapi(self, request: web.Request) -> web.Response:
        return json_response(openapi_document())

    async def healthz(self, request: web.Request) -> web.Response:
        assert self.pool is not None
        return json_response({"ok": True, "workers": len(self.pool.workers)})

    async def debug_workers(self, request: web.Request) -> web.Response:
        assert self.pool is not None
        workers = [
            {
                "name": w.name,
                "pid": w.pid,
                "port": w.port,
                "alive": w.alive,
                "actor": w.hosting,
                "paused": sorted(w.paused),
            }
            for w in sorted(self.pool.workers.values(), key=lambda w: w.slot)
        ]
        return json_response(
            {"workers": workers, "free": self.pool.free_count(), "crashes": self.pool.crashes}
        )

    async def get_template(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        if (ns, name) not in self.config.templates:
            raise WireError("NOT_FOUND", f"template {ns}/{name} not found")
        limit = self.config.templates[(ns, name)]
        return json_response({"namespace": ns, "name": name, "memory_limit_bytes": limit})

    async def ensure_atespace(self, request: web.Request) -> web.Response:
        atespace = _name(request.match_info["a"], "atespace")
        self.atespaces.add(atespace)
        return json_response({"name": atespace})

    def _atespace(self, request: web.Request) -> str:
        atespace = request.match_info["a"]
        if atespace not in self.atespaces:
            raise WireError("NOT_FOUND", f"atespace {atespace!r} not found (PUT it first)")
        return atespace

    async def create_actor(self, request: web.Request) -> web.Response:
        atespace = self._atespace(request)
        where = f"CreateActor in {atespace}"
        body = await read_object(request, where)
        name = _name(body.get("name"), f"{where}: field 'name'")
        template = body.get("template") or {}
        if not isinstance(template, dict):
            raise WireError("INVALID_ARGUMENT", f"{where}: field 'template' must be an object")
        ref = (
            str(template.get("namespace", DEFAULT_TEMPLATE[0])),
            str(template.get("name", DEFAULT_TEMPLATE[1])),
        )
        if ref not in self.config.templates:
            raise WireError("NOT_FOUND", f"{where}: template {ref[0]}/{ref[1]} not found")
        if (atespace, name) in self.actors:
            raise WireError("ALREADY_EXISTS", f"actor {atespace}/{name} already exists")
        actor = Actor(atespace, name, ref, self.config.templates[ref])
        actor.idle.set()
        self.actors[(atespace, name)] = actor
        return json_response(actor.describe(), status=200)

    async def list_actors(self, request: web.Request) -> web.Response:
        atespace = self._atespace(request)
        token = request.query.get("page_token", "")
        try:
            size = int(request.query.get("page_size", "100"))
        except ValueError:
            raise WireError("INVALID_ARGUMENT", "page_size must be an integer") from None
        size = max(1, min(size, 1000))
        names = sorted(n for (a, n) in self.actors if a == atespace and n > token)
        page = names[:size]
        next_token = page[-1] if len(names) > size else ""
        return json_response(
            {
                "actors": [self.actors[(atespace, n)].describe() for n in page],
                "next_page_token": next_token,
            }
        )

    def _actor(self, atespace: str, name: str, *, router: bool = False) -> Actor:
        actor = self.actors.get((atespace, name))
        if actor is None or actor.deleted:
            if router:
                raise WireError(
                    "ACTOR_NOT_FOUND", f"actor {atespace}/{name} not found", router=True
                )
            raise WireError("NOT_FOUND", f"actor {atespace}/{name} not found")
        return actor

    async def actor_call(self, request: web.Request) -> web.Response:
        atespace = self._atespace(request)
        match = _ACTOR_TAIL.match(request.match_info["tail"])
        if match is None:
            raise WireError("NOT_FOUND", f"no route {request.method} {request.path}")
        name, verb = match.groups()
        actor = self._actor(atespace, name)
        method = request.method
        if verb is None and method == "GET":
            return json_response(actor.describe())
        if verb is None and method == "DELETE":
            await self.delete(actor)
            return json_response({})
        if verb is None or method != "POST":
            raise WireError("NOT_FOUND", f"no route {method} {request.path}")
        if verb == "resume":
            await self.wake(actor, router=False)
        elif verb == "pause":
            async with actor.lock:
                self._usable(actor, router=False)
                await self._pause_locked(actor)
        elif request.query.get("async", "").lower() in ("1", "true"):
            await self.suspend_in_background(actor)
            return json_response(actor.describe(), status=202)
        else:
            async with actor.lock:
                self._usable(actor, router=False)
                await self._suspend_locked(actor)
        return json_response(actor.describe())

    # ---- lifecycle ----------------------------------------------------------------------

    def _usable(self, actor: Actor, *, router: bool) -> None:
        if actor.deleted:
            raise WireError(
                "ACTOR_NOT_FOUND" if router else "NOT_FOUND",
                f"actor {actor.key} was deleted",
                router=router,
            )
        if actor.status == "CRASHED":
            raise WireError(
                "ABORTED",
                f"actor {actor.key} crashed (its worker died); delete it",
                router=router,
            )

    def snapshot_dir(self, actor: Actor) -> Path:
        return store.actor_dir(self.store_root, actor.atespace, actor.name)

    async def admin(self, worker: WorkerProc, op: str, **body: Any) -> dict[str, Any]:
        assert self.session is not None
        try:
            async with self.session.post(
                f"{worker.url}/_admin/{op}",
                json=body,
                headers={SECRET_HEADER: self.pool.secret if self.pool else ""},
            ) as resp:
                payload = await resp.json(content_type=None)
                if resp.status != 200:
                    raise WorkerFailed(f"worker {worker.name} {op}: {payload}")
                return payload
        except (aiohttp.ClientError, ValueError) as exc:
            raise WorkerFailed(f"worker {worker.name} {op}: {exc!r}") from exc

    async def wake(self, actor: Actor, *, router: bool) -> WorkerProc:
        """The actor RUNNING, resuming it if needed; its worker."""
        try:
            await asyncio.wait_for(actor.lock.acquire(), self.config.park_timeout)
        except TimeoutError:
            raise WireError(
                "DEADLINE_EXCEEDED",
                f"actor {actor.key} stayed busy in another lifecycle call for "
                f"{self.config.park_timeout}s",
                router=router,
            ) from None
        try:
            self._usable(actor, router=router)
            if actor.status != "RUNNING":
                await self._resume_locked(actor, router=router)
            assert actor.worker is not None
            return actor.worker
        finally:
            actor.lock.release()

    async def _resume_locked(self, actor: Actor, *, router: bool) -> None:
        assert self.pool is not None
        before = actor.status
        actor.status = "RESUMING"
        try:
            worker = await self.pool.acquire(actor.paused_on, self.config.park_timeout)
        except TimeoutError:
            actor.status = before
            raise WireError(
                "RESOURCE_EXHAUSTED",
                f"no worker freed up for actor {actor.key} within the park timeout of "
                f"{self.config.park_timeout}s ({self.config.workers} workers, all busy)",
                status=503 if router else 429,
                router=router,
            ) from None
        try:
            if actor.paused_on is worker:
                await self.admin(worker, "unpause", actor=actor.key)
                worker.paused.pop(actor.key, None)
            else:
                if actor.paused_on is not None:
                    await self._spill(actor)
                directory = self.snapshot_dir(actor)
                has_snapshot = await asyncio.to_thread(store.latest, directory)
                await self.admin(
                    worker,
                    "load",
                    actor=actor.key,
                    limit=actor.limit,
                    snapshot=str(directory) if has_snapshot else None,
                )
        except WorkerFailed as exc:
            self.pool.release(worker)
            if actor.status != "CRASHED":
                actor.status = "PAUSED" if actor.paused_on is not None else "SUSPENDED"
            self._usable(actor, router=router)
            raise WireError("UNAVAILABLE", f"resume of {actor.key}: {exc}", router=router) from None
        worker.hosting = actor.key
        actor.worker, actor.paused_on = worker, None
        actor.status = "RUNNING"
        actor.version += 1

    async def _spill(self, actor: Actor) -> None:
        """Move a paused state from its worker into the store."""
        holder = actor.paused_on
        assert holder is not None
        await self.admin(
            holder,
            "spill",
            actor=actor.key,
            snapshot=str(self.snapshot_dir(actor)),
            version=actor.version + 1,
        )
        holder.paused.pop(actor.key, None)
        actor.paused_on = None
        actor.version += 1

    async def _drain(self, actor: Actor) -> None:
        while actor.inflight:
            actor.idle.clear()
            await actor.idle.wait()

    async def _suspend_locked(self, actor: Actor) -> None:
        if actor.status == "PAUSED":
            actor.status = "SUSPENDING"
            try:
                await self._spill(actor)
            except WorkerFailed as exc:
                self._usable(actor, router=False)
                actor.status = "PAUSED"
                raise WireError("UNAVAILABLE", f"suspend of {actor.key}: {exc}") from None
            actor.status = "SUSPENDED"
            return
        if actor.status != "RUNNING":
            return
        worker = actor.worker
        assert worker is not None and self.pool is not None
        actor.status = "SUSPENDING"
        await self._drain(actor)
        try:
            await self.admin(
                worker,
                "save",
                actor=actor.key,
                snapshot=str(self.snapshot_dir(actor)),
                version=actor.version + 1,
            )
        except WorkerFailed as exc:
            self._usable(actor, router=False)
            actor.status = "RUNNING"
            raise WireError("UNAVAILABLE", f"suspend of {actor.key}: {exc}") from None
        actor.worker = None
        actor.version += 1
        actor.status = "SUSPENDED"
        self.pool.release(worker)

    async def _pause_locked(self, actor: Actor) -> None:
        if actor.status != "RUNNING":
            return
        worker = actor.worker
        assert worker is not None and self.pool is not None
        actor.status = "PAUSING"
        await self._drain(actor)
        try:
            state = await self.admin(worker, "state")
            if sum(worker.paused.values()) + state["bytes"] > self.config.pause_budget:
                actor.status = "RUNNING"
                await self._suspend_locked(actor)
                return
            held = await self.admin(worker, "pause", actor=actor.key)
        except WorkerFailed as exc:
            self._usable(actor, router=False)
            actor.status = "RUNNING"
            raise WireError("UNAVAILABLE", f"pause of {actor.key}: {exc}") from None
        worker.paused[actor.key] = held["bytes"]
        actor.worker, actor.paused_on = None, worker
        actor.version += 1
        actor.status = "PAUSED"
        self.pool.release(worker)

    async def suspend_in_background(self, actor: Actor) -> None:
        held = not actor.lock.locked()
        if held:
            # A free lock is taken without suspending, so later calls queue behind us.
            await actor.lock.acquire()
            try:
                self._usable(actor, router=False)
            except WireError:
                actor.lock.release()
                raise
            if actor.status == "RUNNING":
                actor.status = "SUSPENDING"

        async def run() -> None:
            if not held:
                await actor.lock.acquire()
            try:
                if actor.deleted or actor.status == "CRASHED":
                    return
                if actor.status == "SUSPENDING" and actor.worker is not None:
                    actor.status = "RUNNING"
                await self._suspend_locked(actor)
            except WireError as exc:
                print(f"agentsession substrate: async suspend: {exc}", file=sys.stderr)
            finally:
                actor.lock.release()

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def delete(self, actor: Actor) -> None:
        assert self.pool is not None
        async with actor.lock:
            if actor.deleted:
                raise WireError("NOT_FOUND", f"actor {actor.key} not found")
            actor.deleted = True
            self.actors.pop((actor.atespace, actor.name), None)
            holder = actor.worker or actor.paused_on
            if holder is not None and holder.alive:
                with contextlib.suppress(WorkerFailed):
                    await self.admin(holder, "drop", actor=actor.key)
                holder.paused.pop(actor.key, None)
            if actor.worker is not None:
                self.pool.release(actor.worker)
            actor.worker = actor.paused_on = None
            await asyncio.to_thread(store.delete_actor, self.snapshot_dir(actor))

    def _on_crash(self, worker: WorkerProc) -> None:
        for actor in self.actors.values():
            if actor.worker is worker or actor.paused_on is worker:
                actor.status = "CRASHED"
                actor.worker = actor.paused_on = None
        worker.paused.clear()
        print(
            f"agentsession substrate: worker {worker.name} (pid {worker.pid}) died "
            f"with code {worker.process.returncode}; replacing it",
            file=sys.stderr,
        )

    # ---- router -------------------------------------------------------------------------

    async def route(self, request: web.Request) -> web.StreamResponse:
        if _is_control(request.path):
            raise WireError("NOT_FOUND", f"no route {request.method} {request.path}")
        target = request.headers.get(TARGET_HEADER)
        if not target:
            raise WireError(
                "INVALID_ARGUMENT",
                f"router: header {TARGET_HEADER}: <atespace>/<actor> is required",
                router=True,
            )
        atespace, _, name = target.partition("/")
        actor = self._actor(atespace, name, router=True)
        if actor.status == "RUNNING" and not actor.lock.locked() and actor.worker is not None:
            worker = actor.worker
        else:
            worker = await self.wake(actor, router=True)
        actor.inflight += 1
        try:
            return await self._forward(request, actor, worker)
        finally:
            actor.inflight -= 1
            if actor.inflight == 0:
                actor.idle.set()

    async def _forward(
        self, request: web.Request, actor: Actor, worker: WorkerProc
    ) -> web.Response:
        assert self.session is not None
        body = await request.read()
        headers = {}
        if request.content_type:
            headers["Content-Type"] = request.content_type
        try:
            async with self.session.request(
                request.method,
                worker.url + request.path,
                params=request.query,
                data=body,
                headers=headers,
            ) as resp:
                payload = await resp.read()
                return web.Response(
                    status=resp.status,
                    body=payload,
                    headers={
                        "Content-Type": resp.headers.get("Content-Type", "application/octet-stream")
                    },
                )
        except aiohttp.ClientError as exc:
            await asyncio.sleep(0)  # let the crash watcher mark the actor first
            if actor.status == "CRASHED" or not worker.alive:
                raise WireError(
                    "ABORTED",
                    f"actor {actor.key} crashed (its worker died mid-request)",
                    router=True,
                ) from None
            raise WireError(
                "UNAVAILABLE",
                f"router: worker {worker.name} for {actor.key}: {exc!r}",
                status=502,
                router=True,
            ) from None


def _is_control(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not store.NAME_PATTERN.match(value):
        raise WireError(
            "INVALID_ARGUMENT",
            f"{where}: {value!r} must match {store.NAME_PATTERN.pattern}",
        )
    return value


async def serve_forever(config: ServerConfig) -> None:
    """Run until SIGINT/SIGTERM; prints the URL it serves on."""
    server = LocalSubstrateServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        url = await server.start()
        print(
            f"agentsession: local substrate serving on {url} "
            f"({config.workers} workers, store {server.store_root})",
            flush=True,
        )
        await stop.wait()
    finally:
        await server.stop()
