"""The router's answers as the clients see them (docs/SPEC.md §2.2): how an answer becomes a
RouterResponse or a SubstrateError, shared by both router clients (http.RouterClient,
router_client.FastRouterClient) and the in-memory fake (fake.py). The header names are in
protocol.py; the local server's side is local/protocol.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentsession_core.substrate.errors import error_from_answer
from agentsession_core.substrate.interface import RouterResponse
from agentsession_core.substrate.protocol import ELAPSED_HEADER, ROUTER_HEADER, ROUTER_VERDICT


def server_elapsed_us(value: str | None) -> int | None:
    """The elapsed header's microseconds; None when absent or not a plain decimal count."""
    if value is None or not (value.isascii() and value.isdigit()):
        return None
    return int(value)


def router_answer(status: int, body: bytes, headers: Mapping[str, str]) -> RouterResponse:
    """The RouterResponse for a 2xx answer; raises the SubstrateError for any other.
    `headers` must look names up case-insensitively or hold them lower-cased."""
    if status >= 300:
        raise error_from_answer(
            status, body, from_router=headers.get(ROUTER_HEADER) == ROUTER_VERDICT
        )
    return RouterResponse(
        status=status,
        body=body,
        content_type=headers.get("content-type", "application/json"),
        server_elapsed_us=server_elapsed_us(headers.get(ELAPSED_HEADER)),
        headers=headers if isinstance(headers, dict) else dict(headers),
    )
