"""The glutton inside a local-substrate worker: the routes of docs/SPEC.md §2.3 with real
effects on the hosted actor's memory and files.

State of each hosted actor: RAM arrays are bytearrays in the worker process, per-key rotate
cursors beside them, files in one directory of its own. Every file write goes to a temp file
renamed over the key, so a file hard-linked into a snapshot is never changed in place
(store.py relies on it). A worker runs up to its capacity of actors at once (docs/SPEC.md
§2.7), each with its own ActorState in `Glutton.running`. Which one a request is for, the
router says in protocol.HOSTED_ACTOR_HEADER; the worker's `for_actor` middleware puts it in
REQUESTED_ACTOR for the request's task, so `current` is that actor's state (a request without
it is for the only running actor). Which actors run, and where their files are, is the
worker's business (worker.py).

Two wire forms reach the same work (docs/SPEC.md §2): the JSON handlers here, and the
protobuf ones of the ate wire (glutton_ate.py). Both decode and check their arguments, then
call the typed operations below (write_ram, read_ram, ...), so an op does exactly the same
thing whichever wire asked for it. Per-op seeds come from the worker's seeded stream
(`--seed`); the byte-level work is in glutton_work.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import itertools
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from agentsession_core.script.payload import random_chunks
from agentsession_core.substrate.protocol import (
    BURNCPU,
    INGEST,
    INGEST_KEY_PARAM,
    KEY_PATTERN,
    PING,
    READDISK,
    READRAM,
    WRITEDISK,
    WRITERAM,
)
from local_substrate.glutton_work import (
    CHUNK,
    burn,
    close_and_remove,
    file_digest,
    fill_random,
    in_threads,
    page_checksum,
    write_hashed,
)
from local_substrate.protocol import (
    Handler,
    WireError,
    field_choice,
    field_int,
    json_response,
    read_object,
)

RAM_MODES = ("truncate", "overwrite", "overwrite_rotate")

# The actor ("atespace/name") the request being served is for: set per request, so each
# request's task sees its own (None: the header was not sent).
REQUESTED_ACTOR: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "requested_actor", default=None
)
DISK_MODES = ("truncate", "overwrite")


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


class Glutton:
    """The glutton routes on the actors the worker runs (`running`); `current` is the one the
    request being served is for."""

    def __init__(
        self, seed: int, max_op_bytes: int, max_burn_millis: int, max_parallel: int
    ) -> None:
        self.rng = random.Random(seed)
        self.max_op_bytes = max_op_bytes
        self.max_burn_millis = max_burn_millis
        self.max_parallel = max_parallel
        self.running: dict[str, ActorState] = {}
        self._tmp_ids = itertools.count()

    @property
    def current(self) -> ActorState | None:
        """The running actor this request is for (REQUESTED_ACTOR), or without a name the
        only one running; None when that actor does not run here."""
        wanted = REQUESTED_ACTOR.get()
        if wanted is not None:
            return self.running.get(wanted)
        if len(self.running) == 1:
            return next(iter(self.running.values()))
        return None

    def json_routes(self) -> dict[str, Handler]:
        """The POST routes' JSON handlers (glutton_ate.add_routes serves them beside the
        protobuf ones; GET /readyz is `readyz`)."""
        return {
            PING: self.ping,
            WRITERAM: self.writeram,
            READRAM: self.readram,
            WRITEDISK: self.writedisk,
            READDISK: self.readdisk,
            INGEST: self.ingest,
            BURNCPU: self.burncpu,
        }

    # ---- checks both wire forms share ---------------------------------------------------------

    def hosted(self, where: str) -> ActorState:
        current = self.current
        if current is not None:
            return current
        wanted = REQUESTED_ACTOR.get()
        if wanted is not None:
            raise WireError("UNAVAILABLE", f"{where}: actor {wanted} does not run on this worker")
        if self.running:
            raise WireError(
                "UNAVAILABLE",
                f"{where}: this worker runs {len(self.running)} actors; the request names none",
            )
        raise WireError("UNAVAILABLE", f"{where}: this worker hosts no running actor")

    def key_of(self, key: Any, where: str) -> str:
        if not isinstance(key, str) or not KEY_PATTERN.match(key):
            raise WireError(
                "INVALID_ARGUMENT", f"{where}: key {key!r} does not match {KEY_PATTERN.pattern}"
            )
        return key

    def capped(self, size: int, where: str) -> int:
        if size > self.max_op_bytes:
            raise WireError(
                "INVALID_ARGUMENT",
                f"{where}: size {size} is above the per-op cap of {self.max_op_bytes} bytes",
            )
        return size

    def burn_args(self, millis: int, parallel: int, where: str) -> tuple[int, int]:
        """(millis, parallel) within the caps; parallel 0 means 1 (docs/SPEC.md §1.2)."""
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
        return millis, parallel or 1

    def seed(self) -> bytes:
        return self.rng.randbytes(16)

    def temp_path(self, actor: ActorState, key: str) -> Path:
        return actor.files_dir / f".tmp-{key}-{next(self._tmp_ids)}"

    # ---- the work, on checked arguments -------------------------------------------------------

    async def write_ram(self, key: str, size: int, mode: str) -> int:
        """The array's length afterwards."""
        where = WRITERAM
        actor = self.hosted(where)
        array = actor.arrays.get(key)
        if mode == "overwrite_rotate":
            if array is None:
                raise WireError("NOT_FOUND", f"{where}: no RAM array {key!r} to rotate")
            start = actor.cursors.get(key, 0) % len(array)
            size = min(size, len(array))
            actor.cursors[key] = (start + size) % len(array)
            await asyncio.to_thread(fill_random, array, start, size, self.seed())
            return len(array)
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
        return len(array)

    async def read_ram(
        self, key: str, size: int | None, *, digest: bool = False
    ) -> tuple[int, int, str | None]:
        """(bytes read, page checksum, sha256 hex of them when `digest`); size None reads the
        whole array."""
        where = READRAM
        actor = self.hosted(where)
        array = actor.arrays.get(key)
        if array is None:
            raise WireError("NOT_FOUND", f"{where}: no RAM array {key!r}")
        size = len(array) if size is None else min(len(array), size)
        view = memoryview(array)[:size]
        checksum = await asyncio.to_thread(page_checksum, view)
        sha = None
        if digest:
            sha = await asyncio.to_thread(lambda: hashlib.sha256(view).hexdigest())
        return size, checksum, sha

    async def write_disk(self, key: str, size: int, mode: str) -> tuple[int, str]:
        """(file size, its sha256 hex)."""
        where = WRITEDISK
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
        return written, sha

    def file_of(self, key: str) -> Path:
        actor = self.hosted(READDISK)
        if key not in actor.files:
            raise WireError("NOT_FOUND", f"{READDISK}: no file {key!r}")
        return actor.files_dir / key

    async def store_payload(self, key: str, payload: bytes, *, append: bool) -> tuple[int, str]:
        """Write an uploaded payload to file `key` (after its old content when `append`):
        (bytes written, sha256 hex of the payload). The ate wire's ingest, which carries the
        payload inside its message; the JSON wire streams it (`ingest`)."""
        where = INGEST
        actor = self.hosted(where)
        self.capped(len(payload), where)
        old = actor.files.get(key, 0)
        new = old + len(payload) if append else len(payload)
        actor.check_room(where, key, old, new)
        target = actor.files_dir / key
        tmp = self.temp_path(actor, key)

        def write() -> None:
            with open(tmp, "wb") as out:
                if append and old:
                    with open(target, "rb") as src:
                        shutil.copyfileobj(src, out, CHUNK)
                out.write(payload)
            os.replace(tmp, target)

        await asyncio.to_thread(write)
        actor.files[key] = new
        sha = await asyncio.to_thread(lambda: hashlib.sha256(payload).hexdigest())
        return len(payload), sha

    async def burn_cpu(self, millis: int, parallel: int) -> int:
        """Hash on `parallel` threads for `millis` of wall clock; the iterations done."""
        self.hosted(BURNCPU)
        deadline = time.monotonic() + millis / 1000
        counts = await in_threads(burn, (deadline,), parallel)
        return sum(counts)

    # ---- the JSON wire ------------------------------------------------------------------------

    async def ping(self, request: web.Request) -> web.Response:
        body = await read_object(request, PING)
        self.hosted(PING)
        return json_response({"message": body.get("message", "")})

    async def readyz(self, request: web.Request) -> web.Response:
        current = self.current
        return json_response(
            {"ready": True, "actor": current and current.actor, "actors": sorted(self.running)}
        )

    async def writeram(self, request: web.Request) -> web.Response:
        where = WRITERAM
        body = await read_object(request, where)
        key = self.key_of(body.get("key"), where)
        size = self.capped(field_int(body, "size", where), where)
        mode = field_choice(body, "mode", where, RAM_MODES)
        return json_response({"size": await self.write_ram(key, size, mode)})

    async def readram(self, request: web.Request) -> web.Response:
        where = READRAM
        body = await read_object(request, where)
        key = self.key_of(body.get("key"), where)
        size = None if body.get("size") is None else field_int(body, "size", where)
        # "digest" is an extension: the whole array's sha256, for state checks.
        read, checksum, sha = await self.read_ram(key, size, digest=bool(body.get("digest")))
        answer: dict[str, Any] = {"size": read, "checksum": checksum}
        if sha is not None:
            answer["sha256"] = sha
        return json_response(answer)

    async def writedisk(self, request: web.Request) -> web.Response:
        where = WRITEDISK
        body = await read_object(request, where)
        key = self.key_of(body.get("key"), where)
        size = self.capped(field_int(body, "size", where), where)
        mode = field_choice(body, "mode", where, DISK_MODES)
        written, sha = await self.write_disk(key, size, mode)
        return json_response({"size": written, "sha256": sha})

    async def readdisk(self, request: web.Request) -> web.StreamResponse:
        where = READDISK
        body = await read_object(request, where)
        key = self.key_of(body.get("key"), where)
        mode = field_choice(body, "mode", where, ("digest", "data"))
        path = self.file_of(key)
        if mode == "digest":
            size, sha = await asyncio.to_thread(file_digest, path)
            return json_response({"size": size, "sha256": sha})
        data = await asyncio.to_thread(path.read_bytes)
        return web.Response(body=data, content_type="application/octet-stream")

    async def ingest(self, request: web.Request) -> web.Response:
        """The raw body streamed to a temp file in 1 MiB blocks, never held whole."""
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
                    await asyncio.to_thread(write_hashed, out, digest, block)
            await asyncio.to_thread(write_hashed, out, digest, bytes(buffer))
        except BaseException:
            await asyncio.to_thread(close_and_remove, out, tmp)
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
        millis, parallel = self.burn_args(
            field_int(body, "millis", where),
            field_int(body, "parallel", where, minimum=0, default=1),
            where,
        )
        return json_response({"iterations": await self.burn_cpu(millis, parallel)})
