"""The local substrate's control API under `/v1/` (docs/SPEC.md §2.1): templates, atespaces,
actor CRUD and the lifecycle verbs, the worker listing and DrainWorker (§2.7), plus
/openapi.json, healthz and the worker debug view.

A thin adapter: handlers only decode JSON requests and encode JSON answers; every operation
is ControlPlane's (control_plane.py), which ate_control.py serves over gRPC too, and every
state change ActorLifecycle's (actors.py), so the router's implicit wakes and both wires'
calls share one set of rules. A lifecycle verb (`POST …/actors/{n}:<verb>`, protocol's
ACTOR_VERBS) is ControlPlane's method of the same name: a new verb needs no route here.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from agentsession_core.substrate.op_limits import OP_LIMITS_FIELD
from agentsession_core.substrate.protocol import (
    ACTOR_VERBS,
    ASYNC_PARAM,
    DEBUG_WORKERS_PATH,
    DEFAULT_TEMPLATE,
    HEALTHZ_PATH,
    MATCH_LABELS_FIELD,
    OPENAPI_PATH,
    PAGE_SIZE_PARAM,
    PAGE_TOKEN_PARAM,
    RESUMED_FIELD,
    WORKER_ACTORS_FIELD,
    WORKER_ALLOCATED_FIELD,
    WORKER_CAPACITY_FIELD,
    WORKER_MEMORY_LIMIT_FIELD,
    WORKER_MEMORY_USED_FIELD,
    WORKER_NAME_FIELD,
    WORKER_PAUSED_FIELD,
    WORKER_PID_FIELD,
    WORKER_POOL_FIELD,
    WORKER_SELECTOR_FIELD,
    WORKER_STATE_FIELD,
    WORKER_VERBS,
    WORKERS_FIELD,
    WORKERS_PATH,
    actors_path,
    atespace_path,
    template_path,
)
from local_substrate.control_plane import ControlPlane
from local_substrate.openapi import openapi_document
from local_substrate.protocol import (
    WireError,
    json_response,
    read_object,
    selector_labels,
)
from local_substrate.worker_facts import WorkerFacts

# "{actor}" or "{actor}:{verb}", the last segment of an actor's path.
_ACTOR_TAIL = re.compile(rf"^([^:]+)(?::({'|'.join(ACTOR_VERBS)}))?$")
# "{worker}:{verb}", the last segment of a worker's path.
MAX_WORKER_NAME = 253  # a Kubernetes node's name at most; ours are `wN`
_WORKER_TAIL = re.compile(rf"^([^:]+):({'|'.join(WORKER_VERBS)})$")


class ControlAPI:
    """The JSON control API over one ControlPlane."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.lifecycle = plane.lifecycle

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get(OPENAPI_PATH, self.openapi)
        router.add_get(HEALTHZ_PATH, self.healthz)
        router.add_get(DEBUG_WORKERS_PATH, self.debug_workers)
        router.add_get(WORKERS_PATH, self.list_workers)
        router.add_post(WORKERS_PATH + "/{tail}", self.worker_call)
        router.add_get(template_path("{ns}", "{name}"), self.get_template)
        router.add_put(atespace_path("{a}"), self.ensure_atespace)
        router.add_post(actors_path("{a}"), self.create_actor)
        router.add_get(actors_path("{a}"), self.list_actors)
        router.add_route("*", actors_path("{a}") + "/{tail}", self.actor_call)

    async def openapi(self, request: web.Request) -> web.Response:
        return json_response(openapi_document())

    async def healthz(self, request: web.Request) -> web.Response:
        return json_response({"ok": True, "workers": len(self.lifecycle.pool.workers)})

    async def debug_workers(self, request: web.Request) -> web.Response:
        pool = self.lifecycle.pool
        workers = [
            {
                "name": w.name,
                "pool": w.pool,
                "pid": w.pid,
                "port": w.port,
                "alive": w.alive,
                # One of its running actors (the only one at capacity 1), as before capacity.
                "actor": next(iter(sorted(w.running)), None),
                "running": sorted(w.running),
                "capacity": w.capacity,
                "paused": sorted(w.paused),
            }
            for w in sorted(pool.workers.values(), key=lambda w: w.slot)
        ]
        return json_response(
            {
                "workers": workers,
                "free": pool.free_count(),
                "crashes": pool.crashes,
                "pools": pool.pools,
                # Every actor's wakes by pool, deleted actors too (docs/SPEC.md §2.6).
                "placements": {key: dict(c) for key, c in self.lifecycle.placements.items()},
            }
        )

    async def list_workers(self, request: web.Request) -> web.Response:
        return json_response({WORKERS_FIELD: [_worker(f) for f in self.plane.workers()]})

    async def worker_call(self, request: web.Request) -> web.Response:
        match = _WORKER_TAIL.match(request.match_info["tail"])
        if match is None:
            raise WireError("NOT_FOUND", f"no route {request.method} {request.path}")
        name = match.group(1)
        if len(name) > MAX_WORKER_NAME:
            raise WireError(
                "INVALID_ARGUMENT",
                f"a worker name of {len(name)} characters: at most {MAX_WORKER_NAME}",
            )
        return json_response(_worker(self.plane.drain_worker(name)))

    async def get_template(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        limit = self.plane.template_limit(ns, name)
        answer: dict[str, Any] = {"namespace": ns, "name": name, "memory_limit_bytes": limit}
        if self.plane.op_limits is not None:
            answer[OP_LIMITS_FIELD] = self.plane.op_limits.to_json()
        return json_response(answer)

    async def ensure_atespace(self, request: web.Request) -> web.Response:
        return json_response({"name": self.plane.ensure_atespace(request.match_info["a"])})

    async def create_actor(self, request: web.Request) -> web.Response:
        atespace = self.plane.atespace(request.match_info["a"])
        where = f"CreateActor in {atespace}"
        body = await read_object(request, where)
        template = body.get("template") or {}
        if not isinstance(template, dict):
            raise WireError("INVALID_ARGUMENT", f"{where}: field 'template' must be an object")
        ref = (
            str(template.get("namespace", DEFAULT_TEMPLATE[0])),
            str(template.get("name", DEFAULT_TEMPLATE[1])),
        )
        selector = body.get(WORKER_SELECTOR_FIELD) or {}
        if not isinstance(selector, dict):
            raise WireError(
                "INVALID_ARGUMENT", f"{where}: field {WORKER_SELECTOR_FIELD!r} must be an object"
            )
        labels = selector_labels(
            selector.get(MATCH_LABELS_FIELD), f"{where}: {WORKER_SELECTOR_FIELD}"
        )
        actor = await self.plane.create_actor(atespace, body.get("name"), ref, labels)
        return json_response(actor.describe(), status=200)

    async def list_actors(self, request: web.Request) -> web.Response:
        try:
            size = int(request.query.get(PAGE_SIZE_PARAM, "100"))
        except ValueError:
            raise WireError("INVALID_ARGUMENT", f"{PAGE_SIZE_PARAM} must be an integer") from None
        page, next_token = self.plane.list_actors(
            request.match_info["a"], max(size, 1), request.query.get(PAGE_TOKEN_PARAM, "")
        )
        return json_response(
            {"actors": [a.describe() for a in page], "next_page_token": next_token}
        )

    async def actor_call(self, request: web.Request) -> web.Response:
        match = _ACTOR_TAIL.match(request.match_info["tail"])
        if match is None:
            raise WireError("NOT_FOUND", f"no route {request.method} {request.path}")
        name, verb = match.groups()
        plane = self.plane
        actor = plane.actor(request.match_info["a"], name)
        method = request.method
        if verb is None and method == "GET":
            return json_response(actor.describe())
        if verb is None and method == "DELETE":
            await plane.delete(actor)
            return json_response({})
        if verb is None or method != "POST":
            raise WireError("NOT_FOUND", f"no route {method} {request.path}")
        if verb == "resume":
            resumed = await plane.resume(actor)
            return json_response({**actor.describe(), RESUMED_FIELD: resumed})
        if verb == "suspend" and request.query.get(ASYNC_PARAM, "").lower() in ("1", "true"):
            await plane.suspend(actor, wait=False)
            return json_response(actor.describe(), status=202)
        await getattr(plane, verb)(actor)
        return json_response(actor.describe())


def _worker(facts: WorkerFacts) -> dict[str, Any]:
    return {
        WORKER_NAME_FIELD: facts.name,
        WORKER_POOL_FIELD: facts.pool,
        WORKER_STATE_FIELD: str(facts.state),
        WORKER_CAPACITY_FIELD: facts.capacity,
        WORKER_ALLOCATED_FIELD: facts.allocated,
        WORKER_MEMORY_LIMIT_FIELD: facts.memory_limit_bytes,
        WORKER_MEMORY_USED_FIELD: facts.memory_used_bytes,
        WORKER_ACTORS_FIELD: list(facts.actors),
        WORKER_PAUSED_FIELD: list(facts.paused),
        WORKER_PID_FIELD: facts.pid,
    }
