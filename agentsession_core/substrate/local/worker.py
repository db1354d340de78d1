"""One worker of the local substrate: an OS process that hosts at most one running actor
and serves the glutton routes of docs/SPEC.md §2.3 with real effects.

Run as `python -m agentsession_core.substrate.local.worker --scratch DIR ...`; it binds
127.0.0.1 on a free port and prints `LISTENING <port>` on stdout (the pool's handshake).
It exits when its stdin closes, so a worker never outlives its server, even a killed one.

State of the hosted actor: RAM arrays are bytearrays in this process, per-key rotate
cursors beside them, files in `<scratch>/active/`. Every file write goes to a temp file
renamed over the key, so a file hard-linked into a snapshot is never changed in place
(store.py relies on it).

Private admin routes under `/_admin/` (they require the `x-worker-secret` the server
passes in the environment, so nothing arriving through the router can reach them):
load (from the store or empty), save (to the store, then forget), pause (keep the state
here, node-local, and become free), unpause, spill (write a paused state to the store),
drop. A paused state keeps its arrays in this process and its files under
`<scratch>/paused/<atespace>__<actor>/`; it dies with the worker, like a node-local
snapshot dies with its node.

Random bytes come from SHAKE-128 keyed by a per-op seed drawn from the worker's seeded
stream (`--seed`): seeded, and about 3× faster than `random.randbytes`. Big fills,
hashes and file work run in threads in 1 MiB chunks so the event loop keeps answering.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import itertools
import os
import random
import shutil
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from agentsession_core.script.payload import random_chunks
from agentsession_core.substrate.local import store
from agentsession_core.substrate.local.protocol import (
    WireError,
    elapsed_and_errors,
    field_choice,
    field_int,
    json_response,
    read_object,
)

SECRET_HEADER = "x-worker-secret"
SECRET_ENV = "AGENTSESSION_WORKER_SECRET"
PAGE = 4096
CHUNK = 1 << 20
_BURN_BLOCK = b"\x5a" * 65536  # > 2047 bytes, so hashlib releases the GIL while hashing


@dataclass
class ActorState:
    actor: str  # "atespace/name"
    limit: int | None
    files_dir: Path
    arrays: dict[str, bytearray] = field(default_factory=dict)
    cursors: dict[str, int] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)

    def used(self) -> int:
        return sum(len(a) for a in self.arrays.values()) + sum(self.files.values())

    def check_room(self, where: str, key: str, old: int, new: int) -> None:
        if self.limit is None:
            return
        after = self.used() - old + new
        if after > self.limit:
            raise WireError(
                "RESOURCE_EXHAUSTED",
                f"{where}: key {key!r} to {new} bytes would take actor {self.actor} to "
                f"{after} bytes (arrays + files), above its memory limit {self.limit}",
            )


def fill_random(array: bytearray, start: int, size: int, seed: bytes) -> None:
    """Overwrite `size` bytes of `array` from `start`, wrapping at its end."""
    length = len(array)
    for offset, chunk in random_chunks(seed, size):
        pos = (start + offset) % length
        first = min(len(chunk), length - pos)
        array[pos : pos + first] = chunk[:first]
        if first < len(chunk):
            array[0 : len(chunk) - first] = chunk[first:]


def page_checksum(view: memoryview) -> int:
    # One byte per 4 KiB page: what walking the array touches.
    return zlib.crc32(view[::PAGE].tobytes())


def file_digest(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as src:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def burn(deadline: float) -> int:
    iterations = 0
    while time.monotonic() < deadline:
        hashlib.sha256(_BURN_BLOCK).digest()
        iterations += 1
    return iterations


async def in_threads(fn, args: tuple, count: int) -> list[Any]:
    """Run fn(*args) on `count` fresh threads (the default pool is too small for
    parallel burns) without blocking the loop."""
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(count)]

    def run(future: asyncio.Future) -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to the awaiting coroutine
            loop.call_soon_threadsafe(_settle, future, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, future, result, None)

    for future in futures:
        threading.Thread(target=run, args=(future,), daemon=True).start()
    return list(await asyncio.gather(*futures))


def _settle(future: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


class Worker:
    def __init__(
        self,
        scratch: Path,
        secret: str,
        seed: int,
        max_op_bytes: int,
        max_burn_millis: int,
        max_parallel: int,
    ) -> None:
        self.scratch = scratch
        self.secret = secret
        self.rng = random.Random(seed)
        self.max_op_bytes = max_op_bytes
        self.max_burn_millis = max_burn_millis
        self.max_parallel = max_parallel
        self.current: ActorState | None = None
        self.paused: dict[str, ActorState] = {}
        self._tmp_ids = itertools.count()
        (scratch / "active").mkdir(parents=True, exist_ok=True)
        (scratch / "paused").mkdir(parents=True, exist_ok=True)

    # ---- glutton routes ---------------------------------------------------------------

    def hosted(self, where: str) -> ActorState:
        if self.current is None:
            raise WireError("UNAVAILABLE", f"{where}: this worker hosts no running actor")
        return self.current

    def key_of(self, body: dict[str, Any], where: str) -> str:
        key = body.get("key")
        if not isinstance(key, str) or not store.KEY_PATTERN.match(key):
            raise WireError(
                "INVALID_ARGUMENT", f"{where}: key {key!r} does not match ^[A-Za-z0-9_-]+$"
            )
        return key

    def op_size(self, body: dict[str, Any], where: str) -> int:
        size = field_int(body, "size", where)
        if size > self.max_op_bytes:
            raise WireError(
                "INVALID_ARGUMENT",
                f"{where}: size {size} is above the per-op cap of {self.max_op_bytes} bytes",
            )
        return size

    def seed(self) -> bytes:
        return self.rng.randbytes(16)

    async def ping(self, request: web.Request) -> web.Response:
        body = await read_object(request, "/ping")
        self.hosted("/ping")
        return json_response({"message": body.get("message", "")})

    async def readyz(self, request: web.Request) -> web.Response:
        return json_response({"ready": True, "actor": self.current and self.current.actor})

    async def writeram(self, request: web.Request) -> web.Response:
        where = "/writeram"
        body = await read_object(request, where)
        key = self.key_of(body, where)
        size = self.op_size(body, where)
        mode = field_choice(body, "mode", where, ("truncate", "overwrite", "overwrite_rotate"))
        actor = self.hosted(where)
        array = actor.arrays.get(key)
        if mode == "overwrite_rotate":
            if array is None:
                raise WireError("NOT_FOUND", f"{where}: no RAM array {key!r} to rotate")
            start = actor.cursors.get(key, 0) % len(array)
            size = min(size, len(array))
            actor.cursors[key] = (start + size) % len(array)
            await asyncio.to_thread(fill_random, array, start, size, self.seed())
            return json_response({"size": len(array)})
        old = len(array) if array is not None else 0
        new = size if mode == "truncate" else max(old, size)
        actor.check_room(where, key, old, new)
        if array is None or mode == "truncate":
            array = bytearray(size)
            actor.arrays[key] = array
            actor.cursors[key] = 0
        elif len(array) < size:
            try:
                array.extend(bytes(size - len(array)))
            except BufferError:  # another request is reading it right now
                raise WireError(
                    "ABORTED", f"{where}: array {key!r} is being read; retry the grow"
                ) from None
        await asyncio.to_thread(fill_random, array, 0, size, self.seed())
        return json_response({"size": len(array)})

    async def readram(self, request: web.Request) -> web.Response:
        where = "/readram"
        body = await read_object(request, where)
        key = self.key_of(body, where)
        actor = self.hosted(where)
        array = actor.arrays.get(key)
        if array is None:
            raise WireError("NOT_FOUND", f"{where}: no RAM array {key!r}")
        size = min(len(array), field_int(body, "size", where, default=len(array) or 1))
        view = memoryview(array)[:size]
        checksum = await asyncio.to_thread(page_checksum, view)
        answer: dict[str, Any] = {"size": size, "checksum": checksum}
        if body.get("digest"):  # extension: the whole array's sha256, for state checks
            answer["sha256"] = await asyncio.to_thread(lambda: hashlib.sha256(view).hexdigest())
        return json_response(answer)

    def temp_path(self, actor: ActorState, key: str) -> Path:
        return actor.files_dir / f".tmp-{key}-{next(self._tmp_ids)}"

    async def writedisk(self, request: web.Request) -> web.Response:
        where = "/writedisk"
        body = await read_object(request, where)
        key = self.key_of(body, where)
        size = self.op_size(body, where)
        mode = field_choice(body, "mode", where, ("truncate", "overwrite"))
        actor = self.hosted(where)
        old = actor.files.get(key, 0)
        new = size if mode == "truncate" else max(old, size)
        actor.check_room(where, key, old, new)
        target = actor.files_dir / key
        tmp = self.temp_path(actor, key)
        seed = self.seed()

        def write() -> tuple[int, str]:
            with open(tmp, "wb") as out:
                for _, chunk in random_chunks(seed, size):
                    out.write(chunk)
                if mode == "overwrite" and old > size:
                    with open(target, "rb") as src:  # keep the tail past `size`
                        src.seek(size)
                        shutil.copyfileobj(src, out, CHUNK)
            os.replace(tmp, target)
            return file_digest(target)

        written, sha = await asyncio.to_thread(write)
        actor.files[key] = written
        return json_response({"size": written, "sha256": sha})

    async def readdisk(self, request: web.Request) -> web.StreamResponse:
        where = "/readdisk"
        body = await read_object(request, where)
        key = self.key_of(body, where)
        mode = field_choice(body, "mode", where, ("digest", "data"))
        actor = self.hosted(where)
        if key not in actor.files:
            raise WireError("NOT_FOUND", f"{where}: no file {key!r}")
        path = actor.files_dir / key
        if mode == "digest":
            size, sha = await asyncio.to_thread(file_digest, path)
            return json_response({"size": size, "sha256": sha})
        data = await asyncio.to_thread(path.read_bytes)
        return web.Response(body=data, content_type="application/octet-stream")

    async def ingest(self, request: web.Request) -> web.Response:
        where = "/ingest"
        key = self.key_of(dict(request.query), where)
        actor = self.hosted(where)
        declared = request.content_length
        if declared is not None and declared > self.max_op_bytes:
            raise WireError(
                "INVALID_ARGUMENT",
                f"{where}: body of {declared} bytes is above the per-op cap of "
                f"{self.max_op_bytes} bytes",
            )
        old = actor.files.get(key, 0)
        if declared is not None:
            actor.check_room(where, key, old, declared)
        tmp = self.temp_path(actor, key)
        digest = hashlib.sha256()
        size = 0
        out = await asyncio.to_thread(open, tmp, "wb")
        try:
            buffer = bytearray()
            async for chunk in request.content.iter_chunked(CHUNK):
                size += len(chunk)
                if size > self.max_op_bytes:
                    raise WireError(
                        "INVALID_ARGUMENT",
                        f"{where}: body is above the per-op cap of {self.max_op_bytes} bytes",
                    )
                buffer += chunk
                if len(buffer) >= CHUNK:
                    block, buffer = bytes(buffer), bytearray()
                    await asyncio.to_thread(_write_hashed, out, digest, block)
            await asyncio.to_thread(_write_hashed, out, digest, bytes(buffer))
        except BaseException:
            await asyncio.to_thread(_close_and_remove, out, tmp)
            raise
        await asyncio.to_thread(out.close)
        try:
            actor.check_room(where, key, old, size)
        except WireError:
            await asyncio.to_thread(tmp.unlink)
            raise
        await asyncio.to_thread(os.replace, tmp, actor.files_dir / key)
        actor.files[key] = size
        return json_response({"size": size, "sha256": digest.hexdigest()})

    async def burncpu(self, request: web.Request) -> web.Response:
        where = "/burncpu"
        body = await read_object(request, where)
        millis = field_int(body, "millis", where)
        parallel = field_int(body, "parallel", where, minimum=0, default=1) or 1
        if millis > self.max_burn_millis:
            raise WireError(
                "INVALID_ARGUMENT",
                f"{where}: millis {millis} is above the cap of {self.max_burn_millis}",
            )
        if parallel > self.max_parallel:
            raise WireError(
                "INVALID_ARGUMENT",
                f"{where}: parallel {parallel} is above the cap of {self.max_parallel}",
            )
        self.hosted(where)
        deadline = time.monotonic() + millis / 1000
        counts = await in_threads(burn, (deadline,), parallel)
        return json_response({"iterations": sum(counts)})

    # ---- admin routes (server only) ----------------------------------------------------

    def paused_dir(self, actor: str) -> Path:
        return self.scratch / "paused" / actor.replace("/", "__")

    async def admin(self, request: web.Request) -> web.Response:
        if request.headers.get(SECRET_HEADER) != self.secret:
            raise WireError("NOT_FOUND", f"no route {request.method} {request.path}")
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
        return {
            "pid": os.getpid(),
            "actor": self.current and self.current.actor,
            "bytes": self.current.used() if self.current else 0,
            "paused": {name: state.used() for name, state in self.paused.items()},
        }

    def require_current(self, actor: str) -> ActorState:
        if self.current is None or self.current.actor != actor:
            held = self.current and self.current.actor
            raise WireError("FAILED_PRECONDITION", f"worker hosts {held!r}, not {actor!r}")
        return self.current

    async def load(self, actor: str, limit: int | None, snapshot: str | None) -> dict[str, Any]:
        if self.current is not None:
            raise WireError("FAILED_PRECONDITION", f"worker already hosts {self.current.actor}")
        files_dir = self.scratch / "active"
        await asyncio.to_thread(_empty_dir, files_dir)
        state = ActorState(actor=actor, limit=limit, files_dir=files_dir)
        if snapshot is not None:
            arrays, cursors, _ = await asyncio.to_thread(
                store.read_snapshot, Path(snapshot), files_dir
            )
            state.arrays, state.cursors = arrays, cursors
            state.files = await asyncio.to_thread(_file_sizes, files_dir)
        self.current = state
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
        self.current = None
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
        self.current = None
        return {"bytes": state.used()}

    async def unpause(self, actor: str) -> dict[str, Any]:
        if self.current is not None:
            raise WireError("FAILED_PRECONDITION", f"worker already hosts {self.current.actor}")
        state = self.paused.pop(actor, None)
        if state is None:
            raise WireError("NOT_FOUND", f"no paused state for {actor}")
        active = self.scratch / "active"

        def restore() -> None:
            shutil.rmtree(active, ignore_errors=True)
            os.rename(state.files_dir, active)

        await asyncio.to_thread(restore)
        state.files_dir = active
        self.current = state
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
        if self.current is not None and self.current.actor == actor:
            self.current = None
            await asyncio.to_thread(_empty_dir, self.scratch / "active")
        state = self.paused.pop(actor, None)
        if state is not None:
            await asyncio.to_thread(shutil.rmtree, state.files_dir, True)
        return {}

    def app(self) -> web.Application:
        app = web.Application(middlewares=[elapsed_and_errors], client_max_size=2**31)
        app.router.add_post("/ping", self.ping)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_post("/writeram", self.writeram)
        app.router.add_post("/readram", self.readram)
        app.router.add_post("/writedisk", self.writedisk)
        app.router.add_post("/readdisk", self.readdisk)
        app.router.add_post("/ingest", self.ingest)
        app.router.add_post("/burncpu", self.burncpu)
        app.router.add_route("*", "/_admin/{op}", self.admin)
        return app


def _write_hashed(out, digest, block: bytes) -> None:
    digest.update(block)
    out.write(block)


def _close_and_remove(out, path: Path) -> None:
    out.close()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _empty_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)


def _file_sizes(path: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in path.iterdir() if store.KEY_PATTERN.match(p.name)}


async def serve(args: argparse.Namespace) -> None:
    worker = Worker(
        Path(args.scratch),
        os.environ.get(SECRET_ENV, ""),
        args.seed,
        args.max_op_bytes,
        args.max_burn_millis,
        args.max_parallel,
    )
    runner = web.AppRunner(worker.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"LISTENING {port}", flush=True)
    # The server holds our stdin; when it goes away (even kill -9), so do we.
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.read(4096):
        pass
    await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="agentsession-worker")
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-op-bytes", type=int, default=256 << 20)
    parser.add_argument("--max-burn-millis", type=int, default=60_000)
    parser.add_argument("--max-parallel", type=int, default=16)
    args = parser.parse_args(argv)
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args))
    else:
        uvloop.run(serve(args))


if __name__ == "__main__":
    main()
