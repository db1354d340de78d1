"""The router's wire form as the clients see it (docs/SPEC.md §2.3): the headers both router
clients (http.RouterClient, fastrouter.FastRouterClient) send and read, and how an answer
becomes a RouterResponse or a SubstrateError. The local server's side is local/wire.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentsession_core.substrate.errors import error_from_answer
from agentsession_core.substrate.interface import RouterResponse

TARGET_HEADER = "ate-target-actor"  # <atespace>/<actor> a request is for
ROUTER_HEADER = "x-ate-router"  # "1": the router answered, not the glutton inside the actor
ELAPSED_HEADER = "x-server-elapsed-us"  # the glutton's own time on the request


def server_elapsed_us(value: str | None) -> int | None:
    """The elapsed header's microseconds; None when absent or not a plain decimal count."""
    if value is None or not (value.isascii() and value.isdigit()):
        return None
    return int(value)


def router_answer(status: int, body: bytes, headers: Mapping[str, str]) -> RouterResponse:
    """The RouterResponse for a 2xx answer; raises the SubstrateError for any other.
    `headers` must look names up case-insensitively or hold them lower-cased."""
    if status >= 300:
        raise error_from_answer(status, body, from_router=headers.get(ROUTER_HEADER) == "1")
    return RouterResponse(
        status=status,
        body=body,
        content_type=headers.get("content-type", "application/json"),
        server_elapsed_us=server_elapsed_us(headers.get(ELAPSED_HEADER)),
        headers=headers if isinstance(headers, dict) else dict(headers),
    )
