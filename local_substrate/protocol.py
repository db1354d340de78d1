"""What the local substrate's server and workers share on the wire: the error body
(docs/SPEC.md §2.1), the `x-server-elapsed-us` header, strict JSON request decoding, and the
ate wire's plain-text answers (docs/SPEC.md §2)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from agentsession_core.substrate.protocol import (
    ELAPSED_HEADER,
    MAX_SELECTOR_LABELS,
    PROTOBUF_CONTENT_TYPE,
    ROUTER_HEADER,
    ROUTER_VERDICT,
    TEXT_CONTENT_TYPE,
    error_body,
    status_of,
)


class WireError(Exception):
    """An answer with the error body of docs/SPEC.md §2; `router=True` marks a router verdict."""

    def __init__(
        self, code: str, message: str, *, status: int | None = None, router: bool = False
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status if status is not None else status_of(code, router=router)
        self.router = router

    def response(self) -> web.Response:
        headers = {ROUTER_HEADER: ROUTER_VERDICT} if self.router else {}
        return web.Response(
            status=self.status,
            body=orjson.dumps(error_body(self.code, self.message)),
            content_type="application/json",
            headers=headers,
        )


def json_response(payload: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_protobuf(request: web.Request) -> bool:
    """A request on the ate wire: its body, and so its answer, is protobuf."""
    return request.content_type.lower() == PROTOBUF_CONTENT_TYPE


def plain(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    """An error answer on the ate wire: a short text/plain body, no JSON, no verdict header."""
    return web.Response(
        status=status, text=message, content_type=TEXT_CONTENT_TYPE, headers=headers
    )


@web.middleware
async def elapsed_and_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn WireError and aiohttp's own 404/405 into the error body of docs/SPEC.md §2, and
    stamp every answer with the server's handling time."""
    start = time.perf_counter_ns()
    try:
        response = await handler(request)
    except WireError as exc:
        response = exc.response()
    except web.HTTPNotFound:
        response = WireError("NOT_FOUND", f"no route {request.method} {request.path}").response()
    except web.HTTPMethodNotAllowed:
        response = WireError(
            "INVALID_ARGUMENT", f"method {request.method} not allowed on {request.path}"
        ).response()
        response.set_status(405)
    except web.HTTPException as exc:
        response = WireError(
            "INVALID_ARGUMENT" if exc.status < 500 else "INTERNAL",
            f"{exc.reason}",
            status=exc.status,
        ).response()
    except Exception as exc:  # a bug: answer in the protocol's shape and keep serving
        logging.getLogger("agentsession.substrate").exception("unhandled error")
        response = WireError("INTERNAL", f"{type(exc).__name__}: {exc}").response()
    if not response.prepared:
        response.headers[ELAPSED_HEADER] = str((time.perf_counter_ns() - start) // 1000)
    return response


async def read_object(request: web.Request, where: str) -> dict[str, Any]:
    """The request body as a JSON object; an empty body is an empty object."""
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise WireError("INVALID_ARGUMENT", f"{where}: malformed JSON body: {exc}") from None
    if not isinstance(value, dict):
        raise WireError("INVALID_ARGUMENT", f"{where}: body must be a JSON object")
    return value


def field_int(
    body: dict[str, Any], name: str, where: str, *, minimum: int = 1, default: int | None = None
) -> int:
    value = body.get(name, default)
    if value is None:
        raise WireError("INVALID_ARGUMENT", f"{where}: field {name!r} is required")
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise WireError(
            "INVALID_ARGUMENT", f"{where}: field {name!r} must be an integer >= {minimum}"
        )
    return value


def field_choice(
    body: dict[str, Any],
    name: str,
    where: str,
    choices: tuple[str, ...],
    default: str | None = None,
) -> str:
    value = body.get(name, default)
    if value not in choices:
        raise WireError(
            "INVALID_ARGUMENT", f"{where}: field {name!r} must be one of {', '.join(choices)}"
        )
    return value


def selector_labels(labels: Any, where: str) -> dict[str, str]:
    """A worker selector's match_labels, checked as the platform checks them (docs/SPEC.md
    §2.6): an object of non-empty strings, at most MAX_SELECTOR_LABELS of them."""
    if labels is None:
        return {}
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in labels.items()
    ):
        raise WireError(
            "INVALID_ARGUMENT", f"{where}: match_labels must map non-empty strings to strings"
        )
    if len(labels) > MAX_SELECTOR_LABELS:
        raise WireError(
            "INVALID_ARGUMENT",
            f"{where}: {len(labels)} labels, at most {MAX_SELECTOR_LABELS} are allowed",
        )
    return dict(labels)
