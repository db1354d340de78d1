"""The glutton routes (docs/SPEC.md §2.3) on FakeSubstrate's in-memory actors (fake.py).

Answers have the real glutton's shape, status codes and messages (local_substrate/glutton.py,
with the request decoding of local_substrate/protocol.py), but nothing is computed at size: RAM
arrays and written files hold zero bytes, so sizes, cursors, checksums and digests are those
of zeros; /ingest keeps the bytes it was sent; /burncpu sleeps `millis` and reports a nominal
iteration count.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

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
    error_body,
    status_of,
)

JSON = "application/json"
_BURN_RATE = 1000  # nominal /burncpu iterations per millisecond and thread
_JSON_ROUTES = (PING, WRITERAM, READRAM, WRITEDISK, READDISK, BURNCPU)

Origin = Literal["control", "router", "glutton"]


class Refused(Exception):
    """An error answer in the making: a control-API refusal, a router verdict or the
    glutton's own error; its status is the one the wire form gives its code."""

    def __init__(
        self, code: str, message: str, origin: Origin = "control", *, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.origin = code, message, origin
        self.status = status or status_of(code, router=origin == "router")

    def body(self) -> bytes:
        return orjson.dumps(error_body(self.code, self.message))


@dataclass(eq=False)
class File:
    size: int
    sha256: str
    data: bytes | None = None  # None: `size` zero bytes


@dataclass(eq=False)
class GluttonState:
    """One actor's RAM arrays and files, and the memory limit over their sum (§2.4)."""

    owner: str  # "atespace/name", for messages
    limit: int | None
    arrays: dict[str, int] = field(default_factory=dict)  # key -> size
    cursors: dict[str, int] = field(default_factory=dict)
    files: dict[str, File] = field(default_factory=dict)

    def check_room(self, where: str, key: str, old: int, new: int) -> None:
        if self.limit is None:
            return
        used = sum(self.arrays.values()) + sum(f.size for f in self.files.values())
        if (after := used - old + new) > self.limit:
            raise Refused(
                "RESOURCE_EXHAUSTED",
                f"{where}: key {key!r} to {new} bytes would take actor {self.owner} to "
                f"{after} bytes (arrays + files), above its memory limit {self.limit}",
                "glutton",
            )


async def serve(
    state: GluttonState, path: str, raw: bytes, params: dict[str, str]
) -> tuple[int, bytes, str]:
    """(status, body, content type) of one glutton route on a RUNNING actor."""
    if path == INGEST:
        return _ok(_ingest(state, raw, params.get(INGEST_KEY_PARAM)))
    if path == READYZ:  # a GET route, and the interface only POSTs
        message = f"method POST not allowed on {path}"
        raise Refused("INVALID_ARGUMENT", message, "glutton", status=405)
    if path not in _JSON_ROUTES:
        raise Refused("NOT_FOUND", f"no route POST {path}", "glutton")
    body = _object(raw, path)
    if path == PING:
        return _ok({"message": body.get("message", "")})
    if path == WRITERAM:
        return _ok(_writeram(state, body))
    if path == READRAM:
        return _ok(_readram(state, body))
    if path == WRITEDISK:
        return _ok(_writedisk(state, body))
    if path == READDISK:
        answer = _readdisk(state, body)
        if isinstance(answer, bytes):
            return 200, answer, "application/octet-stream"
        return _ok(answer)
    millis = _int(body, "millis", BURNCPU)
    threads = _int(body, "parallel", BURNCPU, minimum=0, default=1) or 1
    await asyncio.sleep(millis / 1000)
    return _ok({"iterations": millis * threads * _BURN_RATE})


def _ok(payload: dict[str, Any]) -> tuple[int, bytes, str]:
    return 200, orjson.dumps(payload), JSON


def _writeram(state: GluttonState, body: dict[str, Any]) -> dict[str, Any]:
    where = WRITERAM
    key = _key(body.get("key"), where)
    size = _int(body, "size", where)
    mode = _choice(body, "mode", where, ("truncate", "overwrite", "overwrite_rotate"))
    length = state.arrays.get(key)
    if mode == "overwrite_rotate":
        if length is None:
            raise Refused("NOT_FOUND", f"{where}: no RAM array {key!r} to rotate", "glutton")
        start = state.cursors.get(key, 0) % length
        state.cursors[key] = (start + min(size, length)) % length
        return {"size": length}
    old = length or 0
    new = size if mode == "truncate" else max(old, size)
    state.check_room(where, key, old, new)
    if length is None or mode == "truncate":
        state.cursors[key] = 0
    state.arrays[key] = new
    return {"size": new}


def _readram(state: GluttonState, body: dict[str, Any]) -> dict[str, Any]:
    where = READRAM
    key = _key(body.get("key"), where)
    length = state.arrays.get(key)
    if length is None:
        raise Refused("NOT_FOUND", f"{where}: no RAM array {key!r}", "glutton")
    size = min(length, _int(body, "size", where, default=length))
    # The checksum is the real glutton's (one byte per page) over an array of zeros.
    answer: dict[str, Any] = {"size": size, "checksum": zlib.crc32(bytes(-(-size // PAGE)))}
    if body.get("digest"):
        answer["sha256"] = _zeros_sha256(size)
    return answer


def _writedisk(state: GluttonState, body: dict[str, Any]) -> dict[str, Any]:
    where = WRITEDISK
    key = _key(body.get("key"), where)
    size = _int(body, "size", where)
    mode = _choice(body, "mode", where, ("truncate", "overwrite"))
    old = state.files.get(key)
    old_size = old.size if old is not None else 0
    new = size if mode == "truncate" else max(old_size, size)
    state.check_room(where, key, old_size, new)
    data: bytes | None
    if mode == "overwrite" and old is not None and old.data is not None and old_size > size:
        data = bytes(size) + old.data[size:]  # an overwrite keeps the tail
        digest = hashlib.sha256(data).hexdigest()
    else:
        data, digest = None, _zeros_sha256(new)
    state.files[key] = File(new, digest, data)
    return {"size": new, "sha256": digest}


def _readdisk(state: GluttonState, body: dict[str, Any]) -> dict[str, Any] | bytes:
    where = READDISK
    key = _key(body.get("key"), where)
    mode = _choice(body, "mode", where, ("digest", "data"))
    file = state.files.get(key)
    if file is None:
        raise Refused("NOT_FOUND", f"{where}: no file {key!r}", "glutton")
    if mode == "digest":
        return {"size": file.size, "sha256": file.sha256}
    return file.data if file.data is not None else bytes(file.size)


def _ingest(state: GluttonState, raw: bytes, key: str | None) -> dict[str, Any]:
    where = INGEST
    checked = _key(key, where)
    old = state.files.get(checked)
    state.check_room(where, checked, old.size if old is not None else 0, len(raw))
    digest = hashlib.sha256(raw).hexdigest()
    state.files[checked] = File(len(raw), digest, raw)
    return {"size": len(raw), "sha256": digest}


@functools.lru_cache(maxsize=64)
def _zeros_sha256(size: int) -> str:
    return hashlib.sha256(bytes(size)).hexdigest()


# Request decoding with the local glutton's rules and messages (local_substrate/protocol.py).


def _object(raw: bytes, where: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Refused(
            "INVALID_ARGUMENT", f"{where}: malformed JSON body: {exc}", "glutton"
        ) from None
    if not isinstance(value, dict):
        raise Refused("INVALID_ARGUMENT", f"{where}: body must be a JSON object", "glutton")
    return value


def _int(
    body: dict[str, Any], name: str, where: str, *, minimum: int = 1, default: int | None = None
) -> int:
    value = body.get(name, default)
    if value is None:
        raise Refused("INVALID_ARGUMENT", f"{where}: field {name!r} is required", "glutton")
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        message = f"{where}: field {name!r} must be an integer >= {minimum}"
        raise Refused("INVALID_ARGUMENT", message, "glutton")
    return value


def _choice(body: dict[str, Any], name: str, where: str, choices: tuple[str, ...]) -> str:
    value = body.get(name)
    if value not in choices:
        message = f"{where}: field {name!r} must be one of {', '.join(choices)}"
        raise Refused("INVALID_ARGUMENT", message, "glutton")
    return value


def _key(value: Any, where: str) -> str:
    if not isinstance(value, str) or not KEY_PATTERN.match(value):
        message = f"{where}: key {value!r} does not match {KEY_PATTERN.pattern}"
        raise Refused("INVALID_ARGUMENT", message, "glutton")
    return value
