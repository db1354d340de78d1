"""Glutton bodies on the ate wire: protobuf requests built from the arguments the engine already
passes on the JSON wire (docs/SPEC.md §2.3), and 2xx answers decoded into small typed results.

`encode_request(route, json=..., body=..., params=...)` takes exactly what `Substrate.request`
takes, so an ate substrate can translate a JSON-wire call without the engine knowing which
wire is in use. The per-route builders below it are the same thing with typed arguments.

An answer body that does not decode (or is not protobuf at all) raises a SubstrateError with
code BAD_BODY and from_router=False: it came from the glutton, and docs/SPEC.md §3.4 counts it
like any other glutton failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError, Message

from agentsession_core.errors import AgentsessionError
from agentsession_core.script.quantity import QuantityError, parse_quantity
from agentsession_core.substrate.ate.proto import glutton_pb2 as pb
from agentsession_core.substrate.ate.wire_check import mismatched_field
from agentsession_core.substrate.errors import BAD_BODY, SubstrateError

CONTENT_TYPE = "application/x-protobuf"

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
SHA256_BYTES = 32

# The JSON wire's mode words (docs/SPEC.md §2.3) → the glutton's enums (the ate wire notes).
WRITE_MODES: Mapping[str, pb.WriteMode] = {
    "truncate": pb.WRITE_MODE_TRUNCATE,
    "overwrite": pb.WRITE_MODE_OVERWRITE,
    "overwrite_rotate": pb.WRITE_MODE_OVERWRITE_ROTATE,
}
READ_MODES: Mapping[str, pb.ReadMode] = {
    "data": pb.READ_MODE_DATA,
    "digest": pb.READ_MODE_DIGEST_ONLY,
}


class GluttonEncodeError(AgentsessionError, ValueError):
    """Arguments the glutton's messages cannot carry (an unknown route or mode, a size out of
    the field's range). Raised before anything is sent."""


# ---------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True, slots=True)
class PingResult:
    message: str


@dataclass(frozen=True, slots=True)
class WriteRamResult:
    """The glutton's WriteRAM answer is empty; success is all it says."""


@dataclass(frozen=True, slots=True)
class ReadRamResult:
    size: int
    checksum: int


@dataclass(frozen=True, slots=True)
class WriteDiskResult:
    size: int
    sha256: bytes


@dataclass(frozen=True, slots=True)
class ReadDiskResult:
    size: int
    sha256: bytes
    data: bytes  # empty in digest mode


@dataclass(frozen=True, slots=True)
class BurnCpuResult:
    iterations: int


@dataclass(frozen=True, slots=True)
class IngestResult:
    size: int
    sha256: bytes  # of the uploaded payload


GluttonResult = (
    PingResult
    | WriteRamResult
    | ReadRamResult
    | WriteDiskResult
    | ReadDiskResult
    | BurnCpuResult
    | IngestResult
)


# ---------------------------------------------------------------------------------------------
# requests


def size_text(size: int | str) -> str:
    """A byte count as WriteRAMRequest/ReadRAMRequest carry it: plain decimal digits.

    The glutton also accepts suffixes, but its single-letter ones (K/M/G/T) are not the
    Kubernetes ones the scripts use (`k` is 1000), and its parser's source is not public, so
    a bare integer is the one form both sides read the same way."""
    return str(_byte_count(size, "size"))


def ping(message: str = "agentsession") -> bytes:
    return pb.PingRequest(message=message).SerializeToString()


# Encoded PingRequests by message (bytes are immutable): the engine pings with a handful of
# fixed messages; the bound keeps a script with many distinct ones from growing it.
_PING_BODIES: dict[str, bytes] = {}
_PING_BODIES_KEPT = 64


def write_ram(key: str, size: int | str, mode: str) -> bytes:
    return pb.WriteRAMRequest(
        key=key, size=size_text(size), write_mode=_write_mode(mode, "writeram")
    ).SerializeToString()


def read_ram(key: str, size: int | str | None = None) -> bytes:
    """size None reads the whole array (the field stays empty)."""
    text = "" if size is None else size_text(size)
    return pb.ReadRAMRequest(key=key, size=text).SerializeToString()


def write_disk(key: str, size: int | str, mode: str) -> bytes:
    count = _byte_count(size, "size")
    if count > INT32_MAX:
        # WriteDiskRequest.size is an int32 on the ate wire.
        raise GluttonEncodeError(
            f"writedisk size {count} does not fit the glutton's int32 (at most {INT32_MAX} bytes)"
        )
    return pb.WriteDiskRequest(
        key=key, size=count, write_mode=_write_mode(mode, "writedisk")
    ).SerializeToString()


def read_disk(key: str, mode: str) -> bytes:
    try:
        read_mode = READ_MODES[mode]
    except (KeyError, TypeError):
        raise _unknown_mode("readdisk", mode, READ_MODES) from None
    return pb.ReadDiskRequest(key=key, read_mode=read_mode).SerializeToString()


def burn_cpu(millis: int, parallel: int = 1) -> bytes:
    """parallel 0 means 1, as on the JSON wire (docs/SPEC.md §1.2)."""
    millis = _whole(millis, "millis", INT64_MAX)
    parallel = _whole(parallel, "parallel", INT32_MAX, allow_zero=True) or 1
    return pb.BurnCPURequest(duration_ms=millis, parallelism=parallel).SerializeToString()


def ingest(key: str, payload: bytes, *, append: bool = False) -> bytes:
    return pb.IngestRequest(key=key, payload=payload, append=append).SerializeToString()


def encode_request(
    route: str,
    *,
    json: Any = None,
    body: bytes | None = None,
    params: Mapping[str, str] | None = None,
) -> bytes:
    """The protobuf body for a glutton call given as on the JSON wire: `json` is the JSON body
    the engine would send, `body` + `params={"key": ...}` the raw upload of /ingest."""
    if route == "ping" and type(json) is dict:
        # The hot path: every wake probe is a ping with one of a few fixed messages.
        message = json.get("message", "")
        if type(message) is str:
            encoded = _PING_BODIES.get(message)
            if encoded is None:
                encoded = ping(message)
                if len(_PING_BODIES) < _PING_BODIES_KEPT:
                    _PING_BODIES[message] = encoded
            return encoded
    name = route.strip("/")
    if json is None:
        args: Mapping[str, Any] = {}
    elif type(json) is dict or isinstance(json, Mapping):
        args = json
    else:
        raise GluttonEncodeError(f"{name}: expected a JSON object, got {type(json).__name__}")
    try:
        if name == "ping":
            return ping(str(args.get("message", "")))
        if name == "writeram":
            return write_ram(args["key"], args["size"], args.get("mode", "truncate"))
        if name == "readram":
            return read_ram(args["key"], args.get("size"))
        if name == "writedisk":
            return write_disk(args["key"], args["size"], args.get("mode", "truncate"))
        if name == "readdisk":
            return read_disk(args["key"], args.get("mode", "data"))
        if name == "burncpu":
            return burn_cpu(args["millis"], args.get("parallel", 1))
        if name == "ingest":
            if body is None or params is None or "key" not in params:
                raise GluttonEncodeError("ingest: needs the payload as body and params={'key': K}")
            return ingest(params["key"], body)
    except KeyError as exc:
        raise GluttonEncodeError(f"{name}: missing argument {exc.args[0]!r}") from None
    raise GluttonEncodeError(f"no glutton route {route!r} on the ate wire")


# ---------------------------------------------------------------------------------------------
# answers


def _checked_size(size: int, route: str) -> int:
    if size < 0:
        raise _bad(route, f"negative size {size}")
    return size


def _checked_digest(digest: bytes, route: str) -> bytes:
    # Empty is allowed (a data-mode read may leave it out); anything else must be a SHA-256.
    if digest and len(digest) != SHA256_BYTES:
        raise _bad(route, f"sha256 of {len(digest)} bytes")
    return digest


def _ping(m: pb.PingResponse, route: str) -> PingResult:
    return PingResult(m.message)


def _write_ram(m: pb.WriteRAMResponse, route: str) -> WriteRamResult:
    return WriteRamResult()


def _read_ram(m: pb.ReadRAMResponse, route: str) -> ReadRamResult:
    return ReadRamResult(_checked_size(m.size, route), m.checksum)


def _write_disk(m: pb.WriteDiskResponse, route: str) -> WriteDiskResult:
    return WriteDiskResult(_checked_size(m.size, route), _checked_digest(m.sha256, route))


def _read_disk(m: pb.ReadDiskResponse, route: str) -> ReadDiskResult:
    return ReadDiskResult(_checked_size(m.size, route), _checked_digest(m.sha256, route), m.data)


def _burn_cpu(m: pb.BurnCPUResponse, route: str) -> BurnCpuResult:
    return BurnCpuResult(m.iterations)


def _ingest(m: pb.IngestResponse, route: str) -> IngestResult:
    return IngestResult(_checked_size(m.size, route), _checked_digest(m.sha256, route))


# route → (answer message, its typed result)
_ANSWERS: dict[str, tuple[type[Message], Callable[[Any, str], GluttonResult]]] = {
    "ping": (pb.PingResponse, _ping),
    "writeram": (pb.WriteRAMResponse, _write_ram),
    "readram": (pb.ReadRAMResponse, _read_ram),
    "writedisk": (pb.WriteDiskResponse, _write_disk),
    "readdisk": (pb.ReadDiskResponse, _read_disk),
    "burncpu": (pb.BurnCPUResponse, _burn_cpu),
    "ingest": (pb.IngestResponse, _ingest),
}

ROUTES = tuple(_ANSWERS)


def decode_answer(route: str, body: bytes, *, content_type: str | None = None) -> GluttonResult:
    """The typed result of a 2xx glutton answer on `route`. Pass the answer's content type to
    also refuse a body that is not protobuf (a JSON-wire glutton answering by mistake)."""
    name = route.strip("/")
    try:
        message_type, result = _ANSWERS[name]
    except KeyError:
        raise GluttonEncodeError(f"no glutton route {route!r} on the ate wire") from None
    if content_type is not None and content_type != CONTENT_TYPE:
        media = content_type.split(";", 1)[0].strip().lower()
        if media != CONTENT_TYPE:
            raise _bad(name, f"content type {content_type!r}, expected {CONTENT_TYPE}")
    message = message_type()
    try:
        message.ParseFromString(body)
    except (DecodeError, TypeError, ValueError) as exc:
        raise _bad(name, f"not a {message_type.__name__}: {exc}") from None
    mismatch = mismatched_field(message)
    if mismatch is not None:
        raise _bad(name, f"{message_type.__name__} written to another schema: {mismatch}")
    return result(message, name)


# ---------------------------------------------------------------------------------------------
# helpers


def _bad(route: str, why: str) -> SubstrateError:
    return SubstrateError(BAD_BODY, f"glutton {route}: {why}", from_router=False)


def _write_mode(mode: str, route: str) -> pb.WriteMode:
    try:
        return WRITE_MODES[mode]
    except (KeyError, TypeError):
        raise _unknown_mode(route, mode, WRITE_MODES) from None


def _unknown_mode(route: str, mode: object, table: Mapping[str, object]) -> GluttonEncodeError:
    return GluttonEncodeError(f"{route}: unknown mode {mode!r} (one of {', '.join(table)})")


def _byte_count(size: int | str, what: str) -> int:
    try:
        return parse_quantity(size)
    except QuantityError as exc:
        raise GluttonEncodeError(f"{what}: {exc}") from None


def _whole(value: int, what: str, limit: int, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise GluttonEncodeError(f"{what} must be an integer, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero) or value > limit:
        low = 0 if allow_zero else 1
        raise GluttonEncodeError(f"{what} {value} is outside {low}..{limit}")
    return value
