"""The local substrate's router: every path outside `/v1/` goes to the worker hosting the
actor named in `ate-target-actor` (docs/SPEC.md §2.2).

A request to a RUNNING actor whose lock is free goes straight through; otherwise it parks
while ActorLifecycle wakes the actor (actors.py). Router verdicts carry `x-ate-router: 1`;
the glutton's own answers pass through without it, so a client never mistakes "actor gone"
for "file missing" (§2.2).
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from agentsession_core.substrate.local.actors import Actor, ActorLifecycle
from agentsession_core.substrate.local.pool import WorkerProc
from agentsession_core.substrate.local.protocol import WireError
from agentsession_core.substrate.protocol import TARGET_HEADER, is_control_path


class Router:
    def __init__(self, lifecycle: ActorLifecycle) -> None:
        self.lifecycle = lifecycle

    async def route(self, request: web.Request) -> web.StreamResponse:
        if is_control_path(request.path):
            raise WireError("NOT_FOUND", f"no route {request.method} {request.path}")
        target = request.headers.get(TARGET_HEADER)
        if not target:
            raise WireError(
                "INVALID_ARGUMENT",
                f"router: header {TARGET_HEADER}: <atespace>/<actor> is required",
                router=True,
            )
        atespace, _, name = target.partition("/")
        lifecycle = self.lifecycle
        actor = lifecycle.lookup(atespace, name, router=True)
        worker = await lifecycle.begin_request(actor)
        try:
            return await self._forward(request, actor, worker)
        finally:
            lifecycle.end_request(actor)

    async def _forward(
        self, request: web.Request, actor: Actor, worker: WorkerProc
    ) -> web.Response:
        body = await request.read()
        headers = {}
        if request.content_type:
            headers["Content-Type"] = request.content_type
        try:
            async with self.lifecycle.session.request(
                request.method,
                worker.url + request.path,
                params=request.query,
                data=body,
                headers=headers,
            ) as resp:
                payload = await resp.read()
                return web.Response(
                    status=resp.status,
                    body=payload,
                    headers={
                        "Content-Type": resp.headers.get("Content-Type", "application/octet-stream")
                    },
                )
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
