"""The local substrate's control API under `/v1/` (docs/SPEC.md §2.1): templates, atespaces,
actor CRUD and the lifecycle verbs, the worker listing and DrainWorker (§2.7), plus
/openapi.json, healthz and the worker debug view.

Handlers only decode requests and encode answers; every state change is ActorLifecycle's
(actors.py), so the router's implicit wakes and these calls share one set of rules.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from agentsession_core.substrate.op_limits import OP_LIMITS_FIELD, OpLimits
from agentsession_core.substrate.protocol import (
    ACTOR_VERBS,
    ASYNC_PARAM,
    DEBUG_WORKERS_PATH,
    DEFAULT_TEMPLATE,
    HEALTHZ_PATH,
    MATCH_LABELS_FIELD,
    NAME_PATTERN,
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
from local_substrate.actors import Actor, ActorLifecycle
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
    def __init__(
        self,
        templates: dict[tuple[str, str], int | None],
        lifecycle: ActorLifecycle,
        op_limits: OpLimits | None = None,
    ) -> None:
        self.templates = templates
        self.lifecycle = lifecycle
        self.op_limits = op_limits
        self.atespaces: set[str] = set()

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
        return json_response({WORKERS_FIELD: [_worker(f) for f in self.lifecycle.workers()]})

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
        try:
            facts = self.lifecycle.drain_worker(name)
        except KeyError:
            raise WireError("NOT_FOUND", f"worker {name!r} not found") from None
        return json_response(_worker(facts))

    async def get_template(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        if (ns, name) not in self.templates:
            raise WireError("NOT_FOUND", f"template {ns}/{name} not found")
        limit = self.templates[(ns, name)]
        answer: dict[str, Any] = {"namespace": ns, "name": name, "memory_limit_bytes": limit}
        if self.op_limits is not None:
            answer[OP_LIMITS_FIELD] = self.op_limits.to_json()
        return json_response(answer)

    async def ensure_atespace(self, request: web.Request) -> web.Response:
        atespace = _name(request.match_info["a"], "atespace")
        self.atespaces.add(atespace)
        return json_response({"name": atespace})

    def _atespace(self, request: web.Request) -> str:
        atespace = request.match_info["a"]
        if atespace not in self.atespaces:
            raise WireError("NOT_FOUND", f"atespace {atespace!r} not found (PUT it first)")
        return atespace

    async def create_actor(self, request: web.Request) -> web.Response:
        atespace = self._atespace(request)
        where = f"CreateActor in {atespace}"
        body = await read_object(request, where)
        name = _name(body.get("name"), f"{where}: field 'name'")
        template = body.get("template") or {}
        if not isinstance(template, dict):
            raise WireError("INVALID_ARGUMENT", f"{where}: field 'template' must be an object")
        ref = (
            str(template.get("namespace", DEFAULT_TEMPLATE[0])),
            str(template.get("name", DEFAULT_TEMPLATE[1])),
        )
        if ref not in self.templates:
            raise WireError("NOT_FOUND", f"{where}: template {ref[0]}/{ref[1]} not found")
        selector = body.get(WORKER_SELECTOR_FIELD) or {}
        if not isinstance(selector, dict):
            raise WireError(
                "INVALID_ARGUMENT", f"{where}: field {WORKER_SELECTOR_FIELD!r} must be an object"
            )
        labels = selector_labels(
            selector.get(MATCH_LABELS_FIELD), f"{where}: {WORKER_SELECTOR_FIELD}"
        )
        if (atespace, name) in self.lifecycle.actors:
            raise WireError("ALREADY_EXISTS", f"actor {atespace}/{name} already exists")
        actor = Actor(atespace, name, ref, self.templates[ref], selector=labels)
        await self.lifecycle.add(actor)
        return json_response(actor.describe(), status=200)

    async def list_actors(self, request: web.Request) -> web.Response:
        atespace = self._atespace(request)
        token = request.query.get(PAGE_TOKEN_PARAM, "")
        try:
            size = int(request.query.get(PAGE_SIZE_PARAM, "100"))
        except ValueError:
            raise WireError("INVALID_ARGUMENT", f"{PAGE_SIZE_PARAM} must be an integer") from None
        size = max(1, min(size, 1000))
        actors = self.lifecycle.actors
        names = sorted(n for (a, n) in actors if a == atespace and n > token)
        page = names[:size]
        next_token = page[-1] if len(names) > size else ""
        return json_response(
            {
                "actors": [actors[(atespace, n)].describe() for n in page],
                "next_page_token": next_token,
            }
        )

    async def actor_call(self, request: web.Request) -> web.Response:
        atespace = self._atespace(request)
        match = _ACTOR_TAIL.match(request.match_info["tail"])
        if match is None:
            raise WireError("NOT_FOUND", f"no route {request.method} {request.path}")
        name, verb = match.groups()
        lifecycle = self.lifecycle
        actor = lifecycle.lookup(atespace, name)
        method = request.method
        if verb is None and method == "GET":
            return json_response(actor.describe())
        if verb is None and method == "DELETE":
            await lifecycle.delete(actor)
            return json_response({})
        if verb is None or method != "POST":
            raise WireError("NOT_FOUND", f"no route {method} {request.path}")
        if verb == "resume":
            resumed = await lifecycle.resume(actor)
            return json_response({**actor.describe(), RESUMED_FIELD: resumed})
        if verb == "pause":
            await lifecycle.pause(actor)
        elif request.query.get(ASYNC_PARAM, "").lower() in ("1", "true"):
            await lifecycle.suspend_in_background(actor)
            return json_response(actor.describe(), status=202)
        else:
            await lifecycle.suspend(actor)
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


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise WireError(
            "INVALID_ARGUMENT",
            f"{where}: {value!r} must match {NAME_PATTERN.pattern}",
        )
    return value
