"""The glutton inside a local-substrate worker: the routes of docs/SPEC.md §2.3 with real
effects on the hosted actor's memory and files.

State of the hosted actor: RAM arrays are bytearrays in the worker process, per-key rotate
cursors beside them, files in one directory. Every file write goes to a temp file renamed
over the key, so a file hard-linked into a snapshot is never changed in place (store.py
relies on it). Which actor is hosted, and where its files are, is the worker's business
(worker.py): it sets `Glutton.current`.

Random bytes come from SHAKE-128 keyed by a per-op seed drawn from the worker's seeded
stream (`--seed`): seeded, and about 3x faster than `random.randbytes`. Big fills,
hashes and file work run in threads in 1 MiB chunks so the event loop keeps answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import random
import shutil
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from aiohttp import web

from agentsession_core.script.payload import random_chunks
from agentsession_core.substrate.local.protocol import (
    WireError,
    field_choice,
    field_int,
    json_response,
    read_object,
)
from agentsession_core.substrate.protocol import (
    BURNCPU,
    INGEST,
    INGEST_KEY_PARAM,
    KEY_PATTERN,
    PAGE,
    PING,
    READDISK,
    READRAM,
    READYZ,
    WRITEDISK,
    WRITERAM,
)

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


async def in_threads(fn: Callable[..., Any], args: tuple[Any, ...], count: int) -> list[Any]:
    """Run fn(*args) on `count` fresh threads (the default pool is too small for
    parallel burns) without blocking the loop."""
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(count)]

    def run(future: asyncio.Future[Any]) -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to the awaiting coroutine
            loop.call_soon_threadsafe(_settle, future, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, future, result, None)

    for future in futures:
        threading.Thread(target=run, args=(future,), daemon=True).start()
    return list(await asyncio.gather(*futures))


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


class Glutton:
    """The glutton routes on the actor the worker hosts (`current`, None between actors)."""

    def __init__(
        self, seed: int, max_op_bytes: int, max_burn_millis: int, max_parallel: int
    ) -> None:
        self.rng = random.Random(seed)
        self.max_op_bytes = max_op_bytes
        self.max_burn_millis = max_burn_millis
        self.max_parallel = max_parallel
        self.current: ActorState | None = None
        self._tmp_ids = itertools.count()

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_post(PING, self.ping)
        router.add_get(READYZ, self.readyz)
        router.add_post(WRITERAM, self.writeram)
        router.add_post(READRAM, self.readram)
        router.add_post(WRITEDISK, self.writedisk)
        router.add_post(READDISK, self.readdisk)
        router.add_post(INGEST, self.ingest)
        router.add_post(BURNCPU, self.burncpu)

    def hosted(self, where: str) -> ActorState:
        if self.current is None:
            raise WireError("UNAVAILABLE", f"{where}: this worker hosts no running actor")
        return self.current

    def key_of(self, key: Any, where: str) -> str:
        if not isinstance(key, str) or not KEY_PATTERN.match(key):
            raise WireError(
                "INVALID_ARGUMENT", f"{where}: key {key!r} does not match {KEY_PATTERN.pattern}"
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
        body = await read_object(request, PING)
        self.hosted(PING)
        return json_response({"message": body.get("message", "")})

    async def readyz(self, request: web.Request) -> web.Response:
        return json_response({"ready": True, "actor": self.current and self.current.actor})

    async def writeram(self, request: web.Request) -> web.Response:
        where = WRITERAM
        body = await read_object(request, where)
        key = self.key_of(body.get("key"), where)
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
        where = READRAM
        body = await read_object(request, where)
        key = self.key_of(body.get("key"), where)
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
        where = WRITEDISK
        body = await read_object(request, where)
        key = self.key_of(body.get("key"), where)
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
        where = READDISK
        body = await read_object(request, where)
        key = self.key_of(body.get("key"), where)
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
        where = INGEST
        key = self.key_of(request.query.get(INGEST_KEY_PARAM), where)
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
        where = BURNCPU
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


def _write_hashed(out: IO[bytes], digest: Any, block: bytes) -> None:
    digest.update(block)
    out.write(block)


def _close_and_remove(out: IO[bytes], path: Path) -> None:
    out.close()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
