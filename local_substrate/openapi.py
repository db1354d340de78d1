"""The OpenAPI 3.1 description served at `GET /openapi.json`: the control API, the router
header and its verdicts, the glutton routes and the error codes (docs/SPEC.md §2)."""

from __future__ import annotations

from typing import Any

from agentsession_core.substrate.protocol import (
    ACTOR_STATUSES,
    ACTOR_VERBS,
    ASYNC_PARAM,
    BURNCPU,
    CODE_FIELD,
    DEBUG_FAULTS_PATH,
    DEBUG_WORKERS_PATH,
    ELAPSED_HEADER,
    ERROR_FIELD,
    HEALTHZ_PATH,
    INGEST,
    INGEST_KEY_PARAM,
    KEY_PATTERN,
    MESSAGE_FIELD,
    METRICS_PATH,
    OPENAPI_PATH,
    PAGE_SIZE_PARAM,
    PAGE_TOKEN_PARAM,
    PING,
    READDISK,
    READRAM,
    READYZ,
    ROUTER_HEADER,
    ROUTER_VERDICT,
    STATUS_OF,
    TARGET_HEADER,
    WORKERS_PATH,
    WRITEDISK,
    WRITERAM,
    actor_path,
    actors_path,
    atespace_path,
    template_path,
    worker_path,
)

# INTERNAL is left out: it is the server's answer to its own bugs, not a code of the contract.
_ERROR_CODES = [code for code in STATUS_OF if code != "INTERNAL"]
_ROUTER_MARK = f"{ROUTER_HEADER}: {ROUTER_VERDICT}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _errors(*codes: int, router: bool = False) -> dict[str, Any]:
    note = f" (router verdict: carries {_ROUTER_MARK})" if router else ""
    return {str(c): {"description": f"error{note}", **_json(_ref("Error"))} for c in codes}


def _ok(schema: dict[str, Any], description: str = "ok") -> dict[str, Any]:
    return {"200": {"description": description, **_json(schema)}}


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


_INT = {"type": "integer"}
_STR = {"type": "string"}
_KEY = {"type": "string", "pattern": KEY_PATTERN.pattern}
# An actor's worker selector: the labels its worker must carry ({"pool": NAME}).
_SELECTOR = _obj(match_labels={"type": "object", "additionalProperties": _STR})
_CONTROL_ERRORS = (400, 401, 404, 409, 412, 429, 503, 504)
_GLUTTON_ERRORS = (400, 404, 429)
_ERROR_BODY = _obj(
    **{ERROR_FIELD: _obj(**{CODE_FIELD: {"enum": _ERROR_CODES}, MESSAGE_FIELD: _STR})}
)


# What a lifecycle verb's summary says beyond its call's name (protocol.ACTOR_VERBS).
_VERB_NOTES = {
    "resume": "returns when RUNNING; the actor with `resumed` (false: it was already running, "
    "its suspend never happened)",
    "suspend": f"returns when SUSPENDED; {ASYNC_PARAM}=true answers 202 at once",
    "pause": "node-local snapshot",
}
_VERB_EXTRAS = {
    "suspend": {"parameters": [{"name": ASYNC_PARAM, "in": "query", "schema": {"type": "boolean"}}]}
}


def _actor_verb(summary: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    op = {"summary": summary, "responses": {**_ok(_ref("Actor")), **_errors(*_CONTROL_ERRORS)}}
    op.update(extra or {})
    return {"post": op}


def _glutton(summary: str, request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "tags": ["glutton"],
            "parameters": [{"$ref": "#/components/parameters/Target"}],
            "requestBody": request,
            "responses": {
                **_ok(response),
                **_errors(*_GLUTTON_ERRORS),
                **_errors(404, 409, 503, 504, router=True),
            },
        }
    }


def openapi_document() -> dict[str, Any]:
    actors = actors_path("{atespace}")
    actor = actor_path("{atespace}", "{actor}")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "agentsession local substrate",
            "version": "1",
            "description": (
                "Control API under /v1/ and the router on every other path. Router requests "
                f"name their actor in the `{TARGET_HEADER}: <atespace>/<actor>` header; a "
                "suspended or paused actor is resumed while the request is parked. Router "
                f"verdicts carry `{_ROUTER_MARK}`; glutton answers do not. Every response "
                f"carries `{ELAPSED_HEADER}`. Optional bearer token on everything but "
                f"{OPENAPI_PATH} and {HEALTHZ_PATH}."
            ),
        },
        "paths": {
            template_path("{namespace}", "{name}"): {
                "get": {
                    "summary": "GetTemplate",
                    "responses": {**_ok(_ref("Template")), **_errors(401, 404)},
                }
            },
            atespace_path("{atespace}"): {
                "put": {
                    "summary": "EnsureAtespace (idempotent)",
                    "responses": {**_ok(_obj(name=_STR)), **_errors(400, 401)},
                }
            },
            actors: {
                "post": {
                    "summary": "CreateActor: SUSPENDED on the template's (empty) golden state",
                    "requestBody": _json(
                        _obj(
                            name=_STR,
                            template=_obj(namespace=_STR, name=_STR),
                            worker_selector=_SELECTOR,  # docs/SPEC.md §2.6
                        )
                    ),
                    "responses": {**_ok(_ref("Actor")), **_errors(400, 401, 404, 409)},
                },
                "get": {
                    "summary": "ListActors",
                    "parameters": [
                        {"name": PAGE_TOKEN_PARAM, "in": "query", "schema": _STR},
                        {"name": PAGE_SIZE_PARAM, "in": "query", "schema": _INT},
                    ],
                    "responses": {
                        **_ok(
                            _obj(
                                actors={"type": "array", "items": _ref("Actor")},
                                next_page_token=_STR,
                            )
                        ),
                        **_errors(401, 404),
                    },
                },
            },
            actor: {
                "get": {
                    "summary": "GetActor",
                    "responses": {**_ok(_ref("Actor")), **_errors(401, 404)},
                },
                "delete": {
                    "summary": "DeleteActor (any state)",
                    "responses": {**_ok(_obj()), **_errors(401, 404)},
                },
            },
            **{
                f"{actor}:{verb}": _actor_verb(
                    f"{call}: {_VERB_NOTES[verb]}" if verb in _VERB_NOTES else call,
                    _VERB_EXTRAS.get(verb),
                )
                for verb, call in ACTOR_VERBS.items()
            },
            HEALTHZ_PATH: {
                "get": {
                    "summary": "server liveness",
                    "responses": _ok(_obj(ok={"type": "boolean"})),
                }
            },
            METRICS_PATH: {
                "get": {
                    "summary": "Prometheus metrics (text format): actors by state, worker RSS, "
                    "snapshot bytes, parked requests, wakes, suspends, requests by wire",
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {"text/plain": {"schema": _STR}},
                        },
                        **_errors(401),
                    },
                }
            },
            WORKERS_PATH: {
                "get": {
                    "summary": "the worker listing (docs/SPEC.md §2.7): each worker's name, "
                    "pool, state, capacity, allocated, memory_limit_bytes (0: none), "
                    "memory_used_bytes (reserved against it) and actors",
                    "responses": {**_ok(_obj(workers={"type": "array"})), **_errors(401)},
                }
            },
            worker_path("{worker}", "drain"): {
                "post": {
                    "summary": "DrainWorker: the worker takes no new placements; its actors "
                    "stay until they park",
                    "responses": {**_ok(_obj()), **_errors(401, 404)},
                }
            },
            DEBUG_WORKERS_PATH: {
                "get": {
                    "summary": "worker pool: pids, hosted and paused actors",
                    "responses": _ok(_obj()),
                }
            },
            DEBUG_FAULTS_PATH: {
                "get": {
                    "summary": "the fault rules in force, each with how often it was "
                    "evaluated and how often it fired",
                    "responses": _ok(_obj()),
                },
                "put": {
                    "summary": "replace the fault rules: a JSON list of rules, or "
                    '{"rules": [...], "seed": N}; a bad rule is a 400 naming it',
                    "responses": {**_ok(_obj()), **_errors(400, 401)},
                },
            },
            PING: _glutton("echo", _json(_obj(message=_STR)), _obj(message=_STR)),
            WRITERAM: _glutton(
                "write a RAM array (truncate / overwrite / overwrite_rotate)",
                _json(
                    _obj(
                        key=_KEY,
                        size=_INT,
                        mode={"enum": ["truncate", "overwrite", "overwrite_rotate"]},
                    )
                ),
                _obj(size=_INT),
            ),
            READRAM: _glutton(
                "touch one byte per 4 KiB page; digest=true adds the array's sha256",
                _json(_obj(key=_KEY, size=_INT, digest={"type": "boolean"})),
                _obj(size=_INT, checksum=_INT, sha256=_STR),
            ),
            WRITEDISK: _glutton(
                "write random bytes to a file",
                _json(_obj(key=_KEY, size=_INT, mode={"enum": ["truncate", "overwrite"]})),
                _obj(size=_INT, sha256=_STR),
            ),
            READDISK: _glutton(
                "digest: size + sha256; data: the bytes (application/octet-stream)",
                _json(_obj(key=_KEY, mode={"enum": ["digest", "data"]})),
                _obj(size=_INT, sha256=_STR),
            ),
            BURNCPU: _glutton(
                "hash on `parallel` threads for `millis` of wall clock",
                _json(_obj(millis=_INT, parallel=_INT)),
                _obj(iterations=_INT),
            ),
            INGEST: _glutton(
                f"raw body written to file ?{INGEST_KEY_PARAM}=K",
                {
                    "content": {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        }
                    }
                },
                _obj(size=_INT, sha256=_STR),
            ),
            READYZ: {
                "get": {
                    "summary": "200 when the actor serves",
                    "tags": ["glutton"],
                    "parameters": [{"$ref": "#/components/parameters/Target"}],
                    "responses": _ok(_obj()),
                }
            },
        },
        "components": {
            "parameters": {
                "Target": {
                    "name": TARGET_HEADER,
                    "in": "header",
                    "required": True,
                    "schema": _STR,
                    "description": "<atespace>/<actor>",
                }
            },
            "schemas": {
                "Error": _ERROR_BODY,
                "Template": _obj(
                    namespace=_STR,
                    name=_STR,
                    memory_limit_bytes={"type": ["integer", "null"]},
                    # Optional: the per-op caps the substrate states (docs/SPEC.md §2.1).
                    op_limits=_obj(max_op_bytes=_INT, max_burn_millis=_INT, max_parallel=_INT),
                ),
                "Actor": _obj(
                    atespace=_STR,
                    name=_STR,
                    status={"enum": list(ACTOR_STATUSES)},
                    worker={"type": ["string", "null"]},
                    version=_INT,
                    template=_obj(namespace=_STR, name=_STR),
                    worker_selector=_SELECTOR,
                    pool={"type": ["string", "null"]},
                    placements={"type": "object", "additionalProperties": _INT},
                ),
            },
            "headers": {
                ROUTER_HEADER: {"description": f"{ROUTER_VERDICT} on the router's own verdicts"},
                ELAPSED_HEADER: {"description": "server handling time, microseconds"},
            },
        },
    }
