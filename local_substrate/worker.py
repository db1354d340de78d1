"""One worker of the local substrate: an OS process that runs up to `--capacity` actors at once
(1 unless asked: docs/SPEC.md §2.7) and serves the glutton routes on them (docs/SPEC.md §2.4):
JSON bodies (glutton.py) or, for a protobuf request, the ate wire's (glutton_ate.py). The
router names the actor each request is for (protocol.HOSTED_ACTOR_HEADER); each actor's
arrays and files are its own.

Forked by the pool's fork server (worker_process.py) with its command-line arguments
(`--scratch DIR ...`), the pool's secret and one end of a pipe: it binds 127.0.0.1 on a free
port and sends `LISTENING <port>` down the pipe (the pool's handshake). It exits when the
pipe's other end closes, and the kernel kills it when the fork server exits
(PR_SET_PDEATHSIG, lifeline.py), so a worker never outlives its server, even a killed one.

Every route, the glutton's and the admin's, answers only a request that carries the
`x-worker-secret` the pool handed it: the router is its only caller, and
the port, though on loopback, is reachable by every local user (docs/SPEC.md §2.4). Without
it: 401, in the wire form the request speaks.

A running actor's files live in `<scratch>/active/<atespace>@<actor>/` (`@` is in no name,
so two actors never share a directory). Private admin routes under `/_admin/` (the router
refuses that prefix, so no client reaches them): state, load (from the store or empty), save
(to the store, then forget), pause (keep the state here, node-local, and free its slot),
unpause, spill (write a paused state to the store), drop; each names its actor. The server
decides placements (placement.py); a load past `--capacity` is refused here all the same. A
paused state keeps its arrays in this process and its files under
`<scratch>/paused/<atespace>@<actor>/`; it dies with the worker, like a node-local snapshot
dies with its node.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import os
import shutil
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from aiohttp import web

from agentsession_core.substrate.protocol import (
    HOSTED_ACTOR_HEADER,
    KEY_PATTERN,
    WORKER_ADMIN_PREFIX,
    WORKER_READY,
    WORKER_SECRET_HEADER,
)
from local_substrate import glutton_ate, lifeline, store
from local_substrate.glutton import REQUESTED_ACTOR, ActorState, Glutton
from local_substrate.protocol import (
    Handler,
    WireError,
    elapsed_and_errors,
    is_protobuf,
    json_response,
    plain,
    read_object,
)

run_loop: Callable[..., Any] = asyncio.run
try:  # imported here, so that the fork server has it and a fork need not import it
    import uvloop

    run_loop = uvloop.run
except ImportError:
    pass


class Worker:
    def __init__(self, scratch: Path, secret: str, glutton: Glutton, capacity: int = 1) -> None:
        self.scratch = scratch
        self.secret = secret
        self.glutton = glutton
        self.capacity = capacity
        self.paused: dict[str, ActorState] = {}
        (scratch / "active").mkdir(parents=True, exist_ok=True)
        (scratch / "paused").mkdir(parents=True, exist_ok=True)

    def _dir(self, kind: str, actor: str) -> Path:
        return self.scratch / kind / actor.replace("/", "@")

    def active_dir(self, actor: str) -> Path:
        return self._dir("active", actor)

    def paused_dir(self, actor: str) -> Path:
        return self._dir("paused", actor)

    @web.middleware
    async def only_the_server(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        given = request.headers.get(WORKER_SECRET_HEADER, "").encode()
        # No secret configured refuses everything; constant time tells a prober nothing.
        if not self.secret or not hmac.compare_digest(given, self.secret.encode()):
            message = f"worker: {WORKER_SECRET_HEADER} missing or wrong (ask the router)"
            if is_protobuf(request):
                return plain(401, message)
            raise WireError("UNAUTHENTICATED", message)
        return await handler(request)

    @web.middleware
    async def for_actor(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The actor the router resolved this request to, for the glutton (its `current`)."""
        token = REQUESTED_ACTOR.set(request.headers.get(HOSTED_ACTOR_HEADER))
        try:
            return await handler(request)
        finally:
            REQUESTED_ACTOR.reset(token)

    async def admin(self, request: web.Request) -> web.Response:
        body = await read_object(request, request.path)
        op = request.match_info["op"]
        if op == "state":
            return json_response(self.describe(body.get("actor")))
        if op == "load":
            return json_response(
                await self.load(body["actor"], body.get("limit"), body.get("snapshot"))
            )
        if op == "save":
            return json_response(await self.save(body["actor"], body["snapshot"], body["version"]))
        if op == "pause":
            return json_response(await self.pause(body["actor"]))
        if op == "unpause":
            return json_response(await self.unpause(body["actor"]))
        if op == "spill":
            return json_response(await self.spill(body["actor"], body["snapshot"], body["version"]))
        if op == "drop":
            return json_response(await self.drop(body["actor"]))
        raise WireError("NOT_FOUND", f"no admin op {op!r}")

    def describe(self, actor: str | None = None) -> dict[str, Any]:
        """The worker's actors and their bytes; `bytes`: the named running actor's (without
        a name: all running actors')."""
        running = {name: state.used() for name, state in self.glutton.running.items()}
        if actor is None:
            held = sum(running.values())
        else:
            held = self.require_running(actor).used()
        return {
            "pid": os.getpid(),
            "actor": actor if actor is not None else next(iter(running), None),
            "bytes": held,
            "running": running,
            "capacity": self.capacity,
            "paused": {name: state.used() for name, state in self.paused.items()},
        }

    def require_running(self, actor: str) -> ActorState:
        state = self.glutton.running.get(actor)
        if state is None:
            held = sorted(self.glutton.running)
            raise WireError("FAILED_PRECONDITION", f"worker runs {held}, not {actor!r}")
        return state

    def require_room(self, actor: str) -> None:
        running = self.glutton.running
        if actor in running:
            raise WireError("FAILED_PRECONDITION", f"worker already runs {actor}")
        if len(running) >= self.capacity:
            raise WireError(
                "FAILED_PRECONDITION",
                f"worker runs {len(running)} actors, its capacity {self.capacity}: "
                f"{sorted(running)}",
            )

    async def load(self, actor: str, limit: int | None, snapshot: str | None) -> dict[str, Any]:
        self.require_room(actor)
        files_dir = self.active_dir(actor)
        await asyncio.to_thread(_empty_dir, files_dir)
        state = ActorState(actor=actor, limit=limit, files_dir=files_dir)
        if snapshot is not None:
            arrays, cursors, _ = await asyncio.to_thread(
                store.read_snapshot, Path(snapshot), files_dir
            )
            state.arrays, state.cursors = arrays, cursors
            state.files = await asyncio.to_thread(_file_sizes, files_dir)
        self.glutton.running[actor] = state
        return {"bytes": state.used()}

    async def save(self, actor: str, snapshot: str, version: int) -> dict[str, Any]:
        state = self.require_running(actor)
        written = await asyncio.to_thread(
            store.write_snapshot,
            Path(snapshot),
            version,
            state.arrays,
            state.cursors,
            state.files_dir,
        )
        self.glutton.running.pop(actor, None)
        await asyncio.to_thread(shutil.rmtree, state.files_dir, True)
        return {"bytes": written}

    async def pause(self, actor: str) -> dict[str, Any]:
        state = self.require_running(actor)
        target = self.paused_dir(actor)

        def park() -> None:
            shutil.rmtree(target, ignore_errors=True)
            os.rename(state.files_dir, target)

        await asyncio.to_thread(park)
        state.files_dir = target
        self.paused[actor] = state
        self.glutton.running.pop(actor, None)
        return {"bytes": state.used()}

    async def unpause(self, actor: str) -> dict[str, Any]:
        self.require_room(actor)
        state = self.paused.pop(actor, None)
        if state is None:
            raise WireError("NOT_FOUND", f"no paused state for {actor}")
        active = self.active_dir(actor)

        def restore() -> None:
            shutil.rmtree(active, ignore_errors=True)
            os.rename(state.files_dir, active)

        await asyncio.to_thread(restore)
        state.files_dir = active
        self.glutton.running[actor] = state
        return {"bytes": state.used()}

    async def spill(self, actor: str, snapshot: str, version: int) -> dict[str, Any]:
        state = self.paused.get(actor)
        if state is None:
            raise WireError("NOT_FOUND", f"no paused state for {actor}")
        written = await asyncio.to_thread(
            store.write_snapshot,
            Path(snapshot),
            version,
            state.arrays,
            state.cursors,
            state.files_dir,
        )
        self.paused.pop(actor, None)
        await asyncio.to_thread(shutil.rmtree, state.files_dir, True)
        return {"bytes": written}

    async def drop(self, actor: str) -> dict[str, Any]:
        running = self.glutton.running.pop(actor, None)
        if running is not None:
            await asyncio.to_thread(shutil.rmtree, running.files_dir, True)
        state = self.paused.pop(actor, None)
        if state is not None:
            await asyncio.to_thread(shutil.rmtree, state.files_dir, True)
        return {}

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[
                elapsed_and_errors,
                self.only_the_server,
                self.for_actor,
                glutton_ate.ate_http_errors,
            ],
            client_max_size=2**31,
        )
        glutton_ate.add_routes(app.router, self.glutton)
        app.router.add_route("*", WORKER_ADMIN_PREFIX + "/{op}", self.admin)
        return app


def _empty_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)


def _file_sizes(path: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in path.iterdir() if KEY_PATTERN.match(p.name)}


async def serve(args: argparse.Namespace, secret: str, pipe: Connection) -> None:
    glutton = Glutton(args.seed, args.max_op_bytes, args.max_burn_millis, args.max_parallel)
    worker = Worker(Path(args.scratch), secret, glutton, args.capacity)
    runner = web.AppRunner(worker.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    pipe.send_bytes(f"{WORKER_READY} {port}".encode())
    # The server holds the pipe's other end; when it goes away (even kill -9), so do we.
    await lifeline.readable(pipe.fileno())
    await runner.cleanup()


def main(argv: list[str], secret: str, pipe: Connection) -> None:
    """A forked worker's life (worker_process.py forks it)."""
    parser = argparse.ArgumentParser(prog="agentsession-worker")
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--capacity", type=int, default=1)
    parser.add_argument("--max-op-bytes", type=int, default=256 << 20)
    parser.add_argument("--max-burn-millis", type=int, default=60_000)
    parser.add_argument("--max-parallel", type=int, default=16)
    args = parser.parse_args(argv)
    lifeline.die_with_parent()
    # A Ctrl-C in the server's terminal reaches us too: the server stops its workers (through
    # the pipe), and until it does we serve; dying first would print a traceback per worker
    # and have the pool start replacements as it stops. (SIGTERM: ignored from the fork
    # server on, fork_server.py.)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run_loop(serve(args, secret, pipe))
