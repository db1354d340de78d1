"""The glutton's routes on the ate wire (docs/SPEC.md §2): protobuf bodies, chosen per request
by `Content-Type: application/x-protobuf`, beside the JSON ones on the same paths.

Requests and answers are the glutton messages of the ate wire notes (§4, §5; our
proto/glutton.proto). Each handler decodes and checks its message, then calls the same typed
operation of glutton.Glutton as the JSON handler, so the real work is identical. Answers are
what a real glutton in HTTP mode sends:

- success: 200, application/x-protobuf, the serialized response;
- a body that does not decode: 400 "unmarshal: ...";
- a bad argument: 400, plain message;
- no such RAM array or file: 404, plain message naming it (never the word "actor", which
  only the router's actor-gone 404 says: docs/SPEC.md §3.4);
- the worker no longer hosts the actor the router resolved the request to (deleted or moved
  while the request was on its way): 421 with `x-ate-assignment-stale: true`, as the real
  worker-side proxy answers;
- anything else: 500, plain message;
- an unknown path / not a POST: 404 "404 page not found" / 405 "method not allowed".

x-server-elapsed-us is stamped on every answer by the worker's middleware.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web
from google.protobuf.message import DecodeError, Message

from agentsession_core.substrate.ate.glutton_codec import READ_MODES, WRITE_MODES
from agentsession_core.substrate.ate.proto import glutton_pb2 as pb
from agentsession_core.substrate.ate.wire_check import mismatched_field
from agentsession_core.substrate.protocol import (
    BURNCPU,
    HOSTED_ACTOR_HEADER,
    INGEST,
    PING,
    PROTOBUF_CONTENT_TYPE,
    READDISK,
    READRAM,
    READYZ,
    STALE_ASSIGNMENT_HEADER,
    WRITEDISK,
    WRITERAM,
)
from local_substrate.glutton import DISK_MODES, Glutton
from local_substrate.glutton_work import file_digest
from local_substrate.protocol import Handler, WireError, is_protobuf, plain

M = TypeVar("M", bound=Message)

_MODE_OF_WRITE = {number: word for word, number in WRITE_MODES.items()}
_MODE_OF_READ = {number: word for word, number in READ_MODES.items()}

# WriteRAMRequest/ReadRAMRequest.size: whole bytes with an optional suffix; fractions are
# refused (the notes, §4). The notes do not give the base of the one-letter suffixes; we read
# them as powers of 1000, like their Kubernetes spellings. Our own client sends bare digits.
_SIZE = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti|K|M|G|T)?$")
_SCALE = {
    None: 1,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}

# What each WireError code of the glutton answers with on this wire.
_STATUS_OF = {"INVALID_ARGUMENT": 400, "NOT_FOUND": 404}


def add_routes(router: web.UrlDispatcher, glutton: Glutton) -> None:
    """Every glutton route, answering in the wire form each request's content type asks for."""
    ate = AteGlutton(glutton)
    router.add_get(READYZ, glutton.readyz)
    for route, json_handler in glutton.json_routes().items():
        router.add_post(route, _either(json_handler, ate.handlers[route]))


def _either(json_handler: Handler, ate_handler: Handler) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        if is_protobuf(request):
            return await ate_handler(request)
        return await json_handler(request)

    return handle


@web.middleware
async def ate_http_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own 404/405 in the real glutton's words for a protobuf request; the JSON
    wire's error body otherwise (protocol.elapsed_and_errors)."""
    try:
        return await handler(request)
    except web.HTTPNotFound:
        if not is_protobuf(request):
            raise
        return plain(404, "404 page not found")
    except web.HTTPMethodNotAllowed:
        if not is_protobuf(request):
            raise
        return plain(405, "method not allowed")


class AteGlutton:
    def __init__(self, glutton: Glutton) -> None:
        self.glutton = glutton
        self.handlers: dict[str, Handler] = {
            PING: self._answering(self.ping),
            WRITERAM: self._answering(self.writeram),
            READRAM: self._answering(self.readram),
            WRITEDISK: self._answering(self.writedisk),
            READDISK: self._answering(self.readdisk),
            INGEST: self._answering(self.ingest),
            BURNCPU: self._answering(self.burncpu),
        }

    def _answering(self, op: Callable[[web.Request], Awaitable[Message]]) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                self._check_assignment(request)
                answer = await op(request)
            except WireError as exc:
                if exc.code == "UNAVAILABLE":  # hosts nothing: the assignment moved on
                    return plain(421, exc.message, {STALE_ASSIGNMENT_HEADER: "true"})
                return plain(_STATUS_OF.get(exc.code, 500), exc.message)
            return web.Response(body=answer.SerializeToString(), content_type=PROTOBUF_CONTENT_TYPE)

        return handle

    def _check_assignment(self, request: web.Request) -> None:
        """The router names the actor it resolved; a worker that no longer hosts it (the
        actor was deleted or moved while the request was on its way) says so with 421."""
        expected = request.headers.get(HOSTED_ACTOR_HEADER)
        current = self.glutton.current
        if expected is not None and (current is None or current.actor != expected):
            raise WireError("UNAVAILABLE", f"{request.path}: {expected} is not on this worker")

    async def ping(self, request: web.Request) -> Message:
        message = await _decode(request, pb.PingRequest)
        self.glutton.hosted(PING)
        return pb.PingResponse(message=message.message)

    async def writeram(self, request: web.Request) -> Message:
        where, g = WRITERAM, self.glutton
        message = await _decode(request, pb.WriteRAMRequest)
        key = g.key_of(message.key, where)
        size = g.capped(_size(message.size, where), where)
        mode = _enum(_MODE_OF_WRITE, message.write_mode, where)
        await g.write_ram(key, size, mode)
        return pb.WriteRAMResponse()

    async def readram(self, request: web.Request) -> Message:
        where, g = READRAM, self.glutton
        message = await _decode(request, pb.ReadRAMRequest)
        key = g.key_of(message.key, where)
        size = _size(message.size, where) if message.size else None
        read, checksum, _ = await g.read_ram(key, size)
        return pb.ReadRAMResponse(size=read, checksum=checksum)

    async def writedisk(self, request: web.Request) -> Message:
        where, g = WRITEDISK, self.glutton
        message = await _decode(request, pb.WriteDiskRequest)
        key = g.key_of(message.key, where)
        size = g.capped(_positive(message.size, "size", where), where)
        mode = _enum(_MODE_OF_WRITE, message.write_mode, where)
        if mode not in DISK_MODES:
            raise WireError("INVALID_ARGUMENT", f"{where}: write mode {mode} is for RAM only")
        written, sha = await g.write_disk(key, size, mode)
        return pb.WriteDiskResponse(size=written, sha256=bytes.fromhex(sha))

    async def readdisk(self, request: web.Request) -> Message:
        where, g = READDISK, self.glutton
        message = await _decode(request, pb.ReadDiskRequest)
        key = g.key_of(message.key, where)
        mode = _enum(_MODE_OF_READ, message.read_mode, where)
        path = g.file_of(key)
        if mode == "digest":
            size, sha = await asyncio.to_thread(file_digest, path)
            return pb.ReadDiskResponse(size=size, sha256=bytes.fromhex(sha))
        data = await asyncio.to_thread(path.read_bytes)
        return pb.ReadDiskResponse(size=len(data), data=data)

    async def ingest(self, request: web.Request) -> Message:
        where, g = INGEST, self.glutton
        message = await _decode(request, pb.IngestRequest)
        key = g.key_of(message.key, where)
        size, sha = await g.store_payload(key, message.payload, append=message.append)
        return pb.IngestResponse(size=size, sha256=bytes.fromhex(sha))

    async def burncpu(self, request: web.Request) -> Message:
        where, g = BURNCPU, self.glutton
        message = await _decode(request, pb.BurnCPURequest)
        millis = _positive(message.duration_ms, "duration_ms", where)
        if message.parallelism < 0:
            raise WireError("INVALID_ARGUMENT", f"{where}: parallelism must be >= 0")
        millis, parallel = g.burn_args(millis, message.parallelism, where)
        return pb.BurnCPUResponse(iterations=await g.burn_cpu(millis, parallel))


async def _decode(request: web.Request, message_type: type[M]) -> M:
    message = message_type()
    try:
        message.ParseFromString(await request.read())
    except (DecodeError, ValueError) as exc:
        raise WireError("INVALID_ARGUMENT", f"unmarshal: {exc}") from None
    # A known field with the wrong wire type would otherwise read as its zero value.
    mismatch = mismatched_field(message)
    if mismatch is not None:
        raise WireError("INVALID_ARGUMENT", f"unmarshal: wrong wire type for {mismatch}")
    return message


def _size(text: str, where: str) -> int:
    match = _SIZE.match(text.strip())
    if match is None:
        raise WireError(
            "INVALID_ARGUMENT", f"{where}: size {text!r} is not a whole byte count (e.g. 4096)"
        )
    return _positive(int(match[1]) * _SCALE[match[2]], "size", where)


def _positive(value: int, name: str, where: str) -> int:
    if value < 1:
        raise WireError("INVALID_ARGUMENT", f"{where}: {name} must be >= 1, got {value}")
    return value


def _enum(words: dict[Any, str], number: int, where: str) -> str:
    try:
        return words[number]
    except KeyError:
        raise WireError("INVALID_ARGUMENT", f"{where}: unknown mode {number}") from None
