"""The router's answers as the clients see them (docs/SPEC.md §2.2): how an answer becomes a
RouterResponse or a SubstrateError, shared by the router client (router_client.py), the
in-memory fake (fake.py) and the bench's aiohttp client (bench/aiohttp_router_client.py). The
header names are in protocol.py; the local server's side is local_substrate/protocol.py. The
ate wire's answers are read in ate/substrate.py.

A 2xx answer is decoded too (docs/SPEC.md §2.3): a glutton route's answer must be the JSON
object that route answers with, so a proxy's HTML page or a truncated body is a BAD_BODY
failure, never a success.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from agentsession_core.substrate.errors import BAD_BODY, SubstrateError, error_from_answer
from agentsession_core.substrate.interface import RouterResponse, note_server_time
from agentsession_core.substrate.protocol import (
    ANSWER_FIELDS,
    ELAPSED_HEADER,
    JSON_CONTENT_TYPE,
    OCTET_CONTENT_TYPE,
    RAW_ANSWER_ROUTES,
    ROUTER_HEADER,
    ROUTER_VERDICT,
)


def server_elapsed_us(value: str | None) -> int | None:
    """The elapsed header's microseconds; None when absent or not a plain decimal count."""
    if value is None or not (value.isascii() and value.isdigit()):
        return None
    return int(value)


def router_answer(
    status: int, body: bytes, headers: Mapping[str, str], route: str | None = None
) -> RouterResponse:
    """The RouterResponse for a 2xx answer; raises the SubstrateError for any other, and
    BAD_BODY for a 2xx that is not `route`'s answer (no route: not checked). `headers` must
    look names up case-insensitively or hold them lower-cased."""
    if status >= 300:
        raise error_from_answer(
            status, body, from_router=headers.get(ROUTER_HEADER) == ROUTER_VERDICT
        )
    declared = headers.get("content-type")
    result = None if route is None else decode_json_answer(route, status, body, declared or "")
    content_type = declared or JSON_CONTENT_TYPE
    elapsed = server_elapsed_us(headers.get(ELAPSED_HEADER))
    note_server_time(elapsed)
    return RouterResponse(
        status=status,
        body=body,
        content_type=content_type,
        server_elapsed_us=elapsed,
        headers=headers if isinstance(headers, dict) else dict(headers),
        result=result,
    )


# Looked up per answer: both spellings of each route, so the hot path builds no string.
_FIELDS_OF_ROUTE = {**ANSWER_FIELDS, **{path[1:]: f for path, f in ANSWER_FIELDS.items()}}


def decode_json_answer(route: str, status: int, body: bytes, content_type: str) -> Any:
    """`route`'s 2xx answer decoded: the JSON object with the fields ANSWER_FIELDS names, or
    None for raw bytes where the route may answer them. A glutton route's answer with no
    content type must still be that object; a route outside the table is held only to what
    its content type says (declared JSON must parse)."""
    fields = _FIELDS_OF_ROUTE.get(route)
    media = (
        content_type
        if content_type == JSON_CONTENT_TYPE
        else content_type.partition(";")[0].strip().lower()
    )
    if fields is None:
        if media != JSON_CONTENT_TYPE:
            return None
    elif media == OCTET_CONTENT_TYPE and _path(route) in RAW_ANSWER_ROUTES:
        return None
    elif media not in (JSON_CONTENT_TYPE, ""):
        raise _bad(route, status, f"content type {content_type!r}, expected {JSON_CONTENT_TYPE}")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _bad(route, status, f"not JSON ({exc}): {body[:80]!r}") from None
    if fields is None:
        return value
    if not isinstance(value, dict):
        raise _bad(route, status, f"expected a JSON object, got {type(value).__name__}")
    for name, kind in fields.items():
        field = value.get(name)
        # bool is an int to Python, never a size or a count on the wire.
        if not isinstance(field, kind) or isinstance(field, bool):
            raise _bad(route, status, f"field {name!r} missing or not {kind.__name__}: {field!r}")
    return value


def _path(route: str) -> str:
    return route if route.startswith("/") else f"/{route}"


def _bad(route: str, status: int, why: str) -> SubstrateError:
    # The glutton wrote the answer (a router verdict is never a 2xx): counted (§3.4).
    return SubstrateError(
        BAD_BODY, f"glutton {_path(route)}: {why}", status=status, from_router=False
    )
