"""The aiohttp router client, kept for the bench only: bench/generators.py's `--client aiohttp`
compares the product's router client (agentsession_core/substrate/router_client.py,
FastRouterClient) with it. The product never uses it.

The same interface and failures as FastRouterClient: an answer becomes a RouterResponse or a
SubstrateError through router_wire.router_answer, TRANSPORT for connection failures, TIMEOUT
when the client gave up, ANSWER_TOO_LARGE past the answer cap (docs/SPEC.md §2.2).
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from agentsession_core.substrate.errors import (
    ANSWER_TOO_LARGE,
    TIMEOUT,
    TRANSPORT,
    SubstrateError,
)
from agentsession_core.substrate.interface import RouterResponse
from agentsession_core.substrate.protocol import TARGET_HEADER
from agentsession_core.substrate.router_client import DEFAULT_MAX_ANSWER_BYTES
from agentsession_core.substrate.router_wire import router_answer


class AiohttpRouterClient:
    """POSTs to actors through the router over keep-alive connections."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        max_connections: int = 0,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_connections = max_connections
        self.max_answer_bytes = max_answer_bytes
        self._auth = {"Authorization": f"Bearer {token}"} if token else {}
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections),
                auto_decompress=False,
                json_serialize=lambda v: orjson.dumps(v).decode(),
            )
        return self._session

    async def request(
        self,
        target: str,
        route: str,
        *,
        json: Any = None,
        body: bytes | None = None,
        params: dict[str, str] | None = None,
        timeout: float | None = None,
        method: str = "POST",
    ) -> RouterResponse:
        headers = {TARGET_HEADER: target, **self._auth}
        if json is not None:
            data: bytes | None = orjson.dumps(json)
            headers["Content-Type"] = "application/json"
        else:
            data = body
            if body is not None:
                headers["Content-Type"] = "application/octet-stream"
        url = f"{self.base_url}/{route.lstrip('/')}"
        limit = aiohttp.ClientTimeout(total=timeout if timeout is not None else self.timeout)
        try:
            async with self._client().request(
                method, url, data=data, params=params, headers=headers, timeout=limit
            ) as answer:
                body = await self._read_capped(answer, route)
                return router_answer(answer.status, body, answer.headers, route)
        except TimeoutError:
            raise SubstrateError(TIMEOUT, f"router {route}: no answer within the timeout") from None
        except aiohttp.ClientError as exc:
            raise SubstrateError(TRANSPORT, f"router {route}: {exc!r}") from None

    async def _read_capped(self, answer: aiohttp.ClientResponse, route: str) -> bytes:
        """The body, refused past max_answer_bytes as FastRouterClient refuses it (a declared
        length at once, an undeclared one where it crosses the cap); leaving the `async with`
        unread closes the connection, so what remains of the body is never read."""
        cap = self.max_answer_bytes
        too_large = SubstrateError(
            ANSWER_TOO_LARGE,
            f"router {route}: answer body past the cap of {cap} bytes (target.max_answer_bytes)",
        )
        if answer.content_length is not None and answer.content_length > cap:
            raise too_large
        body = bytearray()
        async for part in answer.content.iter_any():
            body += part
            if len(body) > cap:
                raise too_large
        return bytes(body)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
