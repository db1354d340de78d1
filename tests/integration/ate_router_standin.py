"""A small real HTTP router + glutton stand-in for the ate wire, served by aiohttp on loopback.

It answers like the ate wire notes say a real router and glutton do: successes are the glutton's
protobuf answers (built from the generated messages, `application/x-protobuf`, with
`x-server-elapsed-us`); denials are short text/plain bodies with no verdict header. What it
does is chosen by the target actor's name (or `mode` for every actor), so one test can walk
every answer:

| actor           | answer                                                       |
|-----------------|--------------------------------------------------------------|
| busy            | 503 "resource exhausted: no room before the park timeout"    |
| slow            | 504 "deadline exceeded"                                      |
| limited         | 429 "rate limited"                                           |
| gone            | 404 "actor <atespace>/gone not found" (the router's)         |
| missing         | 404 "no RAM array 'k'" (the glutton's)                       |
| stale-N         | 421 + x-ate-assignment-stale: true N times, then success     |
| unauth / denied | 401 / 403                                                    |
| crashed         | 503 "Aborted: actor <target> crashed"                        |
| garbage         | 200 protobuf type, body that does not decode                 |
| json            | 200 application/json (a JSON-wire glutton by mistake)        |
| anything else   | the glutton's answer to the request it was sent              |

Every request is kept in `seen` (route, target, content type, body) for the tests to count.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from agentsession_core.substrate.ate.proto import glutton_pb2 as pb
from agentsession_core.substrate.protocol import (
    ELAPSED_HEADER,
    PROTOBUF_CONTENT_TYPE,
    ROUTER_ACTOR_GONE,
    STALE_ASSIGNMENT_HEADER,
    TARGET_HEADER,
)

ELAPSED_US = 250


@dataclass
class Seen:
    route: str
    target: str
    content_type: str
    body: bytes
    authorization: str | None


def _text(status: int, text: str, **headers: str) -> web.Response:
    return web.Response(status=status, text=text, content_type="text/plain", headers=headers)


def glutton_answer(route: str, body: bytes) -> bytes:
    """The real glutton's answer to one decoded request (state is not kept: sizes echo)."""
    if route == "ping":
        return pb.PingResponse(message=pb.PingRequest.FromString(body).message).SerializeToString()
    if route == "writeram":
        pb.WriteRAMRequest.FromString(body)
        return b""  # WriteRAMResponse is empty
    if route == "readram":
        size = pb.ReadRAMRequest.FromString(body).size
        return pb.ReadRAMResponse(size=int(size or 4096), checksum=7).SerializeToString()
    if route == "writedisk":
        size = pb.WriteDiskRequest.FromString(body).size
        digest = hashlib.sha256(bytes(size)).digest()
        return pb.WriteDiskResponse(size=size, sha256=digest).SerializeToString()
    if route == "readdisk":
        mode = pb.ReadDiskRequest.FromString(body).read_mode
        data = bytes(16) if mode == pb.READ_MODE_DATA else b""
        digest = hashlib.sha256(bytes(16)).digest()
        return pb.ReadDiskResponse(size=16, sha256=digest, data=data).SerializeToString()
    if route == "burncpu":
        millis = pb.BurnCPURequest.FromString(body).duration_ms
        return pb.BurnCPUResponse(iterations=millis * 10).SerializeToString()
    if route == "ingest":
        payload = pb.IngestRequest.FromString(body).payload
        digest = hashlib.sha256(payload).digest()
        return pb.IngestResponse(size=len(payload), sha256=digest).SerializeToString()
    raise web.HTTPNotFound(text="404 page not found")


@dataclass
class RouterStandIn:
    seen: list[Seen] = field(default_factory=list)
    mode: str | None = None  # an actor name whose answer every actor gets
    stale_left: dict[str, int] = field(default_factory=dict)
    url: str = ""
    _runner: Any = None

    def count(self, actor: str) -> int:
        return sum(1 for s in self.seen if s.target.endswith(f"/{actor}"))

    async def handle(self, request: web.Request) -> web.StreamResponse:
        route = request.match_info["route"]
        target = request.headers.get(TARGET_HEADER, "")
        body = await request.read()
        content_type = request.headers.get("Content-Type", "")
        self.seen.append(
            Seen(route, target, content_type, body, request.headers.get("Authorization"))
        )
        if request.method != "POST":
            return _text(405, "method not allowed")
        if "/" not in target:
            return _text(404, "missing ate-target-actor")
        actor = self.mode or target.partition("/")[2]
        if actor.startswith("stale-"):
            left = self.stale_left.setdefault(target, int(actor.removeprefix("stale-")))
            if left > 0:
                self.stale_left[target] = left - 1
                return _text(421, "actor moved", **{STALE_ASSIGNMENT_HEADER: "true"})
        denial = {
            "busy": (503, "resource exhausted: no room before the park timeout"),
            "slow": (504, "deadline exceeded"),
            "limited": (429, "rate limited"),
            "gone": (404, ROUTER_ACTOR_GONE.format(target=target)),
            "missing": (404, "no RAM array 'k'"),
            "unauth": (401, "Unauthenticated"),
            "denied": (403, "PermissionDenied"),
            "crashed": (503, f"Aborted: actor {target} crashed"),
        }.get(actor)
        if denial is not None:
            return _text(*denial)
        headers = {ELAPSED_HEADER: str(ELAPSED_US)}
        if actor == "json":
            return web.json_response({"message": "hi"}, headers=headers)
        if content_type != PROTOBUF_CONTENT_TYPE:  # the glutton only reads protobuf
            return _text(400, f"unmarshal: content type {content_type!r}")
        if actor == "garbage":
            answer = b"\x0a\x05ab"  # a length-delimited field cut short: does not decode
        else:
            try:
                answer = glutton_answer(route, body)
            except web.HTTPNotFound:
                raise
            except Exception as exc:  # the glutton's 400 for a body it cannot read
                return _text(400, f"unmarshal: {exc}")
        return web.Response(body=answer, content_type=PROTOBUF_CONTENT_TYPE, headers=headers)

    async def start(self) -> RouterStandIn:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{route:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        await self._runner.cleanup()
