"""The local substrate's router: every path outside `/v1/` goes to the worker hosting the
actor named in `ate-target-actor` (docs/SPEC.md §2.2).

A request to a RUNNING actor whose lock is free goes straight through; otherwise it parks
while ActorLifecycle wakes the actor (actors.py).

Its own denials come in the form of the wire the request speaks (docs/SPEC.md §2):
- JSON: the error body with `x-ate-router: 1`; the glutton's own answers pass through
  without it, so a client never mistakes "actor gone" for "file missing" (§2.2);
- ate (a protobuf body): what a real router answers (the ate wire notes §6), a short
  text/plain body, no verdict header, and the status alone: 404 for a routing reference that
  does not resolve (the body `protocol.ROUTER_ACTOR_GONE` when the actor does not exist, the
  one 404 that says "actor"), 503 for no room / busy / crashed / unavailable, 504 past the
  deadline, 401 without the token (server.py). The worker answers 421 with the
  stale-assignment header itself (glutton_ate.py); it passes through here.

What it buffers is bounded (buffers.py): a 413 above the per-request cap, RESOURCE_EXHAUSTED
when the bodies in flight would pass the budget. Faults (faults.py, docs/SPEC.md §2.4): an op
may fail after its wake, answered as the glutton would; the other router faults act on
arrival, in the server's middleware. The worker is asked with the pool's secret: the router
is the only caller a worker serves.
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from agentsession_core.substrate.protocol import (
    HOSTED_ACTOR_HEADER,
    ROUTER_ACTOR_GONE,
    STALE_ASSIGNMENT_HEADER,
    TARGET_HEADER,
    WORKER_ADMIN_PREFIX,
    WORKER_SECRET_HEADER,
    is_control_path,
)
from local_substrate.actors import Actor, ActorLifecycle
from local_substrate.buffers import ByteBudget
from local_substrate.pool import WorkerProc
from local_substrate.protocol import WireError, is_protobuf, plain

# A lifecycle refusal → the status a real router answers it with on the ate wire.
_ATE_STATUS_OF = {
    "ACTOR_NOT_FOUND": 404,
    "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 503,
    "FAILED_PRECONDITION": 503,
    "ABORTED": 503,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
}


class Router:
    def __init__(self, lifecycle: ActorLifecycle, buffers: ByteBudget) -> None:
        self.lifecycle = lifecycle
        self.buffers = buffers

    async def route(self, request: web.Request) -> web.StreamResponse:
        # The worker's admin routes are the server's alone: the router forwards with the
        # worker secret, so it must never forward there.
        if is_control_path(request.path) or request.path.startswith(WORKER_ADMIN_PREFIX):
            raise WireError("NOT_FOUND", f"no route {request.method} {request.path}")
        target = request.headers.get(TARGET_HEADER, "")
        atespace, slash, name = target.partition("/")
        if not is_protobuf(request):
            if not target:
                raise WireError(
                    "INVALID_ARGUMENT",
                    f"router: header {TARGET_HEADER}: <atespace>/<actor> is required",
                    router=True,
                )
            return await self._serve(request, atespace, name)
        if not (atespace and slash and name) or "/" in name:
            # Worded without the word "actor": only ROUTER_ACTOR_GONE may say it.
            return plain(404, f"router: no routing reference in {TARGET_HEADER}")
        try:
            return await self._serve(request, atespace, name)
        except WireError as exc:
            status = 413 if exc.status == 413 else _ATE_STATUS_OF.get(exc.code, 500)
            if status == 404:
                return plain(404, ROUTER_ACTOR_GONE.format(target=target))
            return plain(status, exc.message)

    async def _serve(self, request: web.Request, atespace: str, name: str) -> web.StreamResponse:
        lifecycle = self.lifecycle
        declared = request.content_length
        if declared is not None and declared > self.buffers.per_request:
            raise self.buffers.too_large(declared)  # before waking an actor for nothing
        if not lifecycle.pool.data_plane:
            # `serve --no-data-plane` (docs/SPEC.md §2.4): no worker runs an actor, so no
            # request is routed and none wakes one.
            raise WireError(
                "UNAVAILABLE",
                "router: no data plane (the substrate serves its control plane alone, "
                "--no-data-plane): no actor answers requests",
                router=True,
            )
        actor = lifecycle.lookup(atespace, name, router=True)
        worker = await lifecycle.begin_request(actor)
        try:
            failed = lifecycle.faults.op_failed(request)
            if failed is not None:
                return failed
            return await self._forward(request, actor, worker)
        finally:
            lifecycle.end_request(actor)

    async def _forward(
        self, request: web.Request, actor: Actor, worker: WorkerProc
    ) -> web.Response:
        worker_secret = self.lifecycle.pool.secret
        headers = {HOSTED_ACTOR_HEADER: actor.key, WORKER_SECRET_HEADER: worker_secret}
        if request.content_type:
            headers["Content-Type"] = request.content_type
        try:
            async with (
                self.buffers.request_body(request) as body,
                self.lifecycle.session.request(
                    request.method,
                    worker.url + request.path,
                    params=request.query,
                    data=body,
                    headers=headers,
                ) as resp,
                self.buffers.answer_body(resp) as payload,
            ):
                answer = {
                    "Content-Type": resp.headers.get("Content-Type", "application/octet-stream")
                }
                if STALE_ASSIGNMENT_HEADER in resp.headers:
                    answer[STALE_ASSIGNMENT_HEADER] = resp.headers[STALE_ASSIGNMENT_HEADER]
                return web.Response(status=resp.status, body=payload, headers=answer)
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
