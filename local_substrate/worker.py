"""One worker of the local substrate: an OS process that hosts at most one running actor
and serves the glutton routes on it (docs/SPEC.md §2.4): JSON bodies (glutton.py) or, for
a protobuf request, the ate wire's (glutton_ate.py).

Forked by the pool's fork server (worker_process.py) with its command-line arguments
(`--scratch DIR ...`), the pool's secret and one end of a pipe: it binds 127.0.0.1 on a free
port and sends `LISTENING <port>` down the pipe (the pool's handshake). It exits when the
pipe's other end closes, and the kernel kills it when the fork server exits
(PR_SET_PDEATHSIG, lifeline.py), so a worker never outlives its server, even a killed one.

Every route, the glutton's and the admin's, answers only a request that carries the
`x-worker-secret` the pool handed it: the router is its only caller, and
the port, though on loopback, is reachable by every local user (docs/SPEC.md §2.4). Without
it: 401, in the wire form the request speaks.

The hosted actor's files live in `<scratch>/active/`. Private admin routes under
`/_admin/` (the router refuses that prefix, so no client reaches them): load (from the
store or empty), save (to the store, then forget), pause (keep the state here, node-local,
and become free), unpause, spill (write a paused state to the store), drop. A paused state
keeps its arrays in this process and its files under `<scratch>/paused/<atespace>__<actor>/`;
it dies with the worker, like a node-local snapshot dies with its node.
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
    KEY_PATTERN,
    WORKER_ADMIN_PREFIX,
    WORKER_READY,
    WORKER_SECRET_HEADER,
)
from local_substrate import glutton_ate, lifeline, store
from local_substrate.glutton import ActorState, Glutton
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
    def __init__(self, scratch: Path, secret: str, glutton: Glutton) -> None:
        self.scratch = scratch
        self.secret = secret
        self.glutton = glutton
        self.paused: dict[str, ActorState] = {}
        (scratch / "active").mkdir(parents=True, exist_ok=True)
        (scratch / "paused").mkdir(parents=True, exist_ok=True)

    def paused_dir(self, actor: str) -> Path:
        return self.scratch / "paused" / actor.replace("/", "__")

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

    async def admin(self, request: web.Request) -> web.Response:
        body = await read_object(request, request.path)
        op = request.match_info["op"]
        if op == "state":
            return json_response(self.describe())
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

    def describe(self) -> dict[str, Any]:
        current = self.glutton.current
        return {
            "pid": os.getpid(),
            "actor": current and current.actor,
            "bytes": current.used() if current else 0,
            "paused": {name: state.used() for name, state in self.paused.items()},
        }

    def require_current(self, actor: str) -> ActorState:
        current = self.glutton.current
        if current is None or current.actor != actor:
            held = current and current.actor
            raise WireError("FAILED_PRECONDITION", f"worker hosts {held!r}, not {actor!r}")
        return current

    def require_free(self) -> None:
        if self.glutton.current is not None:
            raise WireError(
                "FAILED_PRECONDITION", f"worker already hosts {self.glutton.current.actor}"
            )

    async def load(self, actor: str, limit: int | None, snapshot: str | None) -> dict[str, Any]:
        self.require_free()
        files_dir = self.scratch / "active"
        await asyncio.to_thread(_empty_dir, files_dir)
        state = ActorState(actor=actor, limit=limit, files_dir=files_dir)
        if snapshot is not None:
            arrays, cursors, _ = await asyncio.to_thread(
                store.read_snapshot, Path(snapshot), files_dir
            )
            state.arrays, state.cursors = arrays, cursors
            state.files = await asyncio.to_thread(_file_sizes, files_dir)
        self.glutton.current = state
        return {"bytes": state.used()}

    async def save(self, actor: str, snapshot: str, version: int) -> dict[str, Any]:
        state = self.require_current(actor)
        written = await asyncio.to_thread(
            store.write_snapshot,
            Path(snapshot),
            version,
            state.arrays,
            state.cursors,
            state.files_dir,
        )
        self.glutton.current = None
        await asyncio.to_thread(_empty_dir, state.files_dir)
        return {"bytes": written}

    async def pause(self, actor: str) -> dict[str, Any]:
        state = self.require_current(actor)
        target = self.paused_dir(actor)

        def park() -> None:
            shutil.rmtree(target, ignore_errors=True)
            os.rename(state.files_dir, target)
            (self.scratch / "active").mkdir()

        await asyncio.to_thread(park)
        state.files_dir = target
        self.paused[actor] = state
        self.glutton.current = None
        return {"bytes": state.used()}

    async def unpause(self, actor: str) -> dict[str, Any]:
        self.require_free()
        state = self.paused.pop(actor, None)
        if state is None:
            raise WireError("NOT_FOUND", f"no paused state for {actor}")
        active = self.scratch / "active"

        def restore() -> None:
            shutil.rmtree(active, ignore_errors=True)
            os.rename(state.files_dir, active)

        await asyncio.to_thread(restore)
        state.files_dir = active
        self.glutton.current = state
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
        if self.glutton.current is not None and self.glutton.current.actor == actor:
            self.glutton.current = None
            await asyncio.to_thread(_empty_dir, self.scratch / "active")
        state = self.paused.pop(actor, None)
        if state is not None:
            await asyncio.to_thread(shutil.rmtree, state.files_dir, True)
        return {}

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[elapsed_and_errors, self.only_the_server, glutton_ate.ate_http_errors],
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
    worker = Worker(Path(args.scratch), secret, glutton)
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
