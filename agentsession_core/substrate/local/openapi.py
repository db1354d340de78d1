"""The OpenAPI 3.1 description served at `GET /openapi.json`: the control API, the router
header and its verdicts, the glutton routes and the error codes (docs/SPEC.md §2)."""

from __future__ import annotations

from typing import Any

_ERROR_CODES = [
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "FAILED_PRECONDITION",
    "ABORTED",
    "RESOURCE_EXHAUSTED",
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
    "INVALID_ARGUMENT",
    "UNAUTHENTICATED",
    "ACTOR_NOT_FOUND",
]

_STATUSES = ["RESUMING", "RUNNING", "SUSPENDING", "SUSPENDED", "PAUSING", "PAUSED", "CRASHED"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _errors(*codes: int, router: bool = False) -> dict[str, Any]:
    note = " (router verdict: carries x-ate-router: 1)" if router else ""
    return {str(c): {"description": f"error{note}", **_json(_ref("Error"))} for c in codes}


def _ok(schema: dict[str, Any], description: str = "ok") -> dict[str, Any]:
    return {"200": {"description": description, **_json(schema)}}


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


_INT = {"type": "integer"}
_STR = {"type": "string"}
_KEY = {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"}
_CONTROL_ERRORS = (400, 401, 404, 409, 412, 429, 503, 504)
_GLUTTON_ERRORS = (400, 404, 429)


def _actor_path(verb: str, summary: str, extra: dict[str, Any] | None = None) -> dict:
    op = {"summary": summary, "responses": {**_ok(_ref("Actor")), **_errors(*_CONTROL_ERRORS)}}
    op.update(extra or {})
    return {"post": op}


def _glutton(summary: str, request: dict[str, Any], response: dict[str, Any]) -> dict:
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
    actors = "/v1/atespaces/{atespace}/actors"
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "agentsession local substrate",
            "version": "1",
            "description": (
                "Control API under /v1/ and the router on every other path. Router requests "
                "name their actor in the `ate-target-actor: <atespace>/<actor>` header; a "
                "suspended or paused actor is resumed while the request is parked. Router "
                "verdicts carry `x-ate-router: 1`; glutton answers do not. Every response "
                "carries `x-server-elapsed-us`. Optional bearer token on everything but "
                "/openapi.json and /v1/healthz."
            ),
        },
        "paths": {
            "/v1/templates/{namespace}/{name}": {
                "get": {
                    "summary": "GetTemplate",
                    "responses": {**_ok(_ref("Template")), **_errors(401, 404)},
                }
            },
            "/v1/atespaces/{atespace}": {
                "put": {
                    "summary": "EnsureAtespace (idempotent)",
                    "responses": {**_ok(_obj(name=_STR)), **_errors(400, 401)},
                }
            },
            actors: {
                "post": {
                    "summary": "CreateActor: SUSPENDED on the template's (empty) golden state",
                    "requestBody": _json(_obj(name=_STR, template=_obj(namespace=_STR, name=_STR))),
                    "responses": {**_ok(_ref("Actor")), **_errors(400, 401, 404, 409)},
                },
                "get": {
                    "summary": "ListActors",
                    "parameters": [
                        {"name": "page_token", "in": "query", "schema": _STR},
                        {"name": "page_size", "in": "query", "schema": _INT},
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
            actors + "/{actor}": {
                "get": {
                    "summary": "GetActor",
                    "responses": {**_ok(_ref("Actor")), **_errors(401, 404)},
                },
                "delete": {
                    "summary": "DeleteActor (any state)",
                    "responses": {**_ok(_obj()), **_errors(401, 404)},
                },
            },
            actors + "/{actor}:resume": _actor_path("resume", "ResumeActor: returns when RUNNING"),
            actors + "/{actor}:suspend": _actor_path(
                "suspend",
                "SuspendActor: returns when SUSPENDED; async=true answers 202 at once",
                {"parameters": [{"name": "async", "in": "query", "schema": {"type": "boolean"}}]},
            ),
            actors + "/{actor}:pause": _actor_path("pause", "PauseActor: node-local snapshot"),
            "/v1/healthz": {
                "get": {
                    "summary": "server liveness",
                    "responses": _ok(_obj(ok={"type": "boolean"})),
                }
            },
            "/v1/debug/workers": {
                "get": {
                    "summary": "worker pool: pids, hosted and paused actors",
                    "responses": _ok(_obj()),
                }
            },
            "/ping": _glutton("echo", _json(_obj(message=_STR)), _obj(message=_STR)),
            "/writeram": _glutton(
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
            "/readram": _glutton(
                "touch one byte per 4 KiB page; digest=true adds the array's sha256",
                _json(_obj(key=_KEY, size=_INT, digest={"type": "boolean"})),
                _obj(size=_INT, checksum=_INT, sha256=_STR),
            ),
            "/writedisk": _glutton(
                "write random bytes to a file",
                _json(_obj(key=_KEY, size=_INT, mode={"enum": ["truncate", "overwrite"]})),
                _obj(size=_INT, sha256=_STR),
            ),
            "/readdisk": _glutton(
                "digest: size + sha256; data: the bytes (application/octet-stream)",
                _json(_obj(key=_KEY, mode={"enum": ["digest", "data"]})),
                _obj(size=_INT, sha256=_STR),
            ),
            "/burncpu": _glutton(
                "hash on `parallel` threads for `millis` of wall clock",
                _json(_obj(millis=_INT, parallel=_INT)),
                _obj(iterations=_INT),
            ),
            "/ingest": _glutton(
                "raw body written to file ?key=K",
                {
                    "content": {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        }
                    }
                },
                _obj(size=_INT, sha256=_STR),
            ),
            "/readyz": {
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
                    "name": "ate-target-actor",
                    "in": "header",
                    "required": True,
                    "schema": _STR,
                    "description": "<atespace>/<actor>",
                }
            },
            "schemas": {
                "Error": _obj(error=_obj(code={"enum": _ERROR_CODES}, message=_STR)),
                "Template": _obj(
                    namespace=_STR, name=_STR, memory_limit_bytes={"type": ["integer", "null"]}
                ),
                "Actor": _obj(
                    atespace=_STR,
                    name=_STR,
                    status={"enum": _STATUSES},
                    worker={"type": ["string", "null"]},
                    version=_INT,
                    template=_obj(namespace=_STR, name=_STR),
                ),
            },
            "headers": {
                "x-ate-router": {"description": "1 on the router's own verdicts"},
                "x-server-elapsed-us": {"description": "server handling time, microseconds"},
            },
        },
    }
