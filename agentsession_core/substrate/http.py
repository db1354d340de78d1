"""The Substrate interface over HTTP (docs/SPEC.md §2): control calls with httpx, router requests
through the router client, the one small class the hot path goes through: FastRouterClient
(router_client.py, a lean keep-alive HTTP/1.1 client) for http:// and https:// routers (its
TLS settings: router_tls.py). The aiohttp client bench/ compares it with lives in bench/
(bench/aiohttp_router_client.py). Paths and header names come from protocol.py.

Every failure becomes a SubstrateError: an error body's code and message when the server
answered, `from_router` true for control answers and router verdicts (`x-ate-router: 1`),
false for the glutton's own answers; TRANSPORT for connection failures, TIMEOUT when the
client gave up, BAD_BODY for an answer that could not be decoded (a control answer that is
not JSON, a router 2xx that is not its route's answer: router_wire.py), ANSWER_TOO_LARGE for a
router answer over the size cap (docs/SPEC.md §2.2). What a session does
with each is decided in errors.py, not here. Each answer's server time is noted for booking
(interface.note_server_time).
"""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
from collections.abc import Mapping
from typing import Any

import httpx

from agentsession_core.substrate.errors import (
    BAD_BODY,
    TIMEOUT,
    TRANSPORT,
    SubstrateError,
    error_from_answer,
)
from agentsession_core.substrate.interface import (
    ActorInfo,
    RouterResponse,
    Template,
    WorkerInfo,
    note_server_time,
)
from agentsession_core.substrate.op_limits import OP_LIMITS_FIELD, OpLimits
from agentsession_core.substrate.protocol import (
    ASYNC_PARAM,
    ELAPSED_HEADER,
    MATCH_LABELS_FIELD,
    PAGE_TOKEN_PARAM,
    RESUMED_FIELD,
    WORKER_ACTORS_FIELD,
    WORKER_ALLOCATED_FIELD,
    WORKER_CAPACITY_FIELD,
    WORKER_MEMORY_LIMIT_FIELD,
    WORKER_MEMORY_USED_FIELD,
    WORKER_NAME_FIELD,
    WORKER_POOL_FIELD,
    WORKER_SELECTOR_FIELD,
    WORKER_STATE_FIELD,
    WORKERS_FIELD,
    WORKERS_PATH,
    actor_path,
    actor_target,
    actors_path,
    atespace_path,
    template_path,
    worker_path,
)
from agentsession_core.substrate.router_client import DEFAULT_MAX_ANSWER_BYTES, FastRouterClient
from agentsession_core.substrate.router_tls import RouterTls
from agentsession_core.substrate.router_wire import server_elapsed_us


def router_client(
    base_url: str,
    *,
    token: str | None = None,
    timeout: float = 120.0,
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    tls: RouterTls | None = None,
) -> FastRouterClient:
    """The router client: FastRouterClient, for http:// and https:// (≈3× aiohttp's requests
    per core, bench/RESULTS.md; over TLS too, bench/wire.py)."""
    return FastRouterClient(
        base_url, token=token, timeout=timeout, max_answer_bytes=max_answer_bytes, tls=tls
    )


class HttpSubstrate:
    """The Substrate interface against a server speaking docs/SPEC.md §2 (the local substrate, or
    any substrate with the same wire form)."""

    def __init__(
        self,
        control_url: str,
        router_url: str | None = None,
        *,
        token: str | None = None,
        control_timeout: float = 120.0,
        router_timeout: float = 120.0,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        router_tls: RouterTls | None = None,
    ) -> None:
        self.control_url = control_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # One server for both (no router URL of its own): the router's TLS settings are the
        # control API's too.
        verify: ssl.SSLContext | bool = True
        if router_tls is not None and router_url is None:
            verify = router_tls.context()
        self._control = httpx.AsyncClient(
            base_url=self.control_url, headers=headers, timeout=control_timeout, verify=verify
        )
        self.router = router_client(
            router_url or control_url,
            token=token,
            timeout=router_timeout,
            max_answer_bytes=max_answer_bytes,
            tls=router_tls,
        )

    async def _call(
        self, method: str, path: str, *, json: Any = None, params: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        try:
            answer = await self._control.request(method, path, json=json, params=params)
        except httpx.TimeoutException:
            raise SubstrateError(
                TIMEOUT, f"{method} {path}: no answer within the timeout"
            ) from None
        except httpx.TransportError as exc:
            raise SubstrateError(TRANSPORT, f"{method} {path}: {exc!r}") from None
        if answer.status_code >= 300:
            raise error_from_answer(answer.status_code, answer.content, from_router=True)
        note_server_time(server_elapsed_us(answer.headers.get(ELAPSED_HEADER)))
        try:
            body = answer.json() if answer.content else {}
        except ValueError:
            body = None
        if not isinstance(body, dict):  # every control answer is an object (§2.1)
            raise SubstrateError(
                BAD_BODY,
                f"{method} {path}: not a JSON object: {answer.content[:80]!r}",
                status=answer.status_code,
            )
        return answer.status_code, body

    @staticmethod
    def _actor(payload: Any) -> ActorInfo:
        try:
            return ActorInfo(
                atespace=payload["atespace"],
                name=payload["name"],
                status=payload["status"],
                worker=payload.get("worker"),
                version=int(payload.get("version", 0)),
                pool=payload.get("pool"),
            )
        except (KeyError, TypeError, ValueError):
            raise SubstrateError(BAD_BODY, f"not an actor: {str(payload)[:200]}") from None

    async def get_template(self, namespace: str, name: str) -> Template:
        _, body = await self._call("GET", template_path(namespace, name))
        limit = body.get("memory_limit_bytes")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise SubstrateError(BAD_BODY, f"template memory_limit_bytes {limit!r}: not an int")
        caps = OpLimits.from_json(body.get(OP_LIMITS_FIELD))
        return Template(body.get("namespace", namespace), body.get("name", name), limit, caps)

    async def ensure_atespace(self, atespace: str) -> None:
        await self._call("PUT", atespace_path(atespace))

    async def create_actor(
        self,
        atespace: str,
        name: str,
        template_namespace: str,
        template_name: str,
        *,
        worker_selector: Mapping[str, str] | None = None,
    ) -> ActorInfo:
        request: dict[str, Any] = {
            "name": name,
            "template": {"namespace": template_namespace, "name": template_name},
        }
        if worker_selector:
            request[WORKER_SELECTOR_FIELD] = {MATCH_LABELS_FIELD: dict(worker_selector)}
        _, body = await self._call("POST", actors_path(atespace), json=request)
        return self._actor(body)

    async def get_actor(self, atespace: str, name: str) -> ActorInfo:
        _, body = await self._call("GET", actor_path(atespace, name))
        return self._actor(body)

    async def list_actors(self, atespace: str) -> list[ActorInfo]:
        actors: list[ActorInfo] = []
        token = ""
        while True:
            _, body = await self._call(
                "GET", actors_path(atespace), params={PAGE_TOKEN_PARAM: token}
            )
            listed = body.get("actors", [])
            if not isinstance(listed, list):
                raise SubstrateError(BAD_BODY, f"ListActors: actors is {type(listed).__name__}")
            actors += [self._actor(a) for a in listed]
            token = body.get("next_page_token") or ""
            if not token:
                return actors

    async def resume_actor(self, atespace: str, name: str) -> ActorInfo:
        _, body = await self._call("POST", actor_path(atespace, name, "resume"))
        resumed = body.get(RESUMED_FIELD)
        if resumed is not None and not isinstance(resumed, bool):
            raise SubstrateError(BAD_BODY, f"ResumeActor: {RESUMED_FIELD} is {resumed!r}")
        return dataclasses.replace(self._actor(body), resumed=resumed)

    async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
        params = None if wait else {ASYNC_PARAM: "true"}
        await self._call("POST", actor_path(atespace, name, "suspend"), params=params)

    async def pause_actor(self, atespace: str, name: str) -> None:
        await self._call("POST", actor_path(atespace, name, "pause"))

    async def delete_actor(self, atespace: str, name: str) -> None:
        await self._call("DELETE", actor_path(atespace, name))

    async def list_workers(self) -> list[WorkerInfo]:
        """GET /v1/workers (docs/SPEC.md §2.7); UNIMPLEMENTED from a substrate without it."""
        try:
            _, body = await self._call("GET", WORKERS_PATH)
        except SubstrateError as exc:
            if exc.code != "NOT_FOUND":
                raise
            raise SubstrateError(
                "UNIMPLEMENTED",
                f"GET {WORKERS_PATH}: this substrate has no worker listing ({exc.message})",
                status=exc.status,
            ) from None
        listed = body.get(WORKERS_FIELD)
        if not isinstance(listed, list):
            raise SubstrateError(BAD_BODY, f"GET {WORKERS_PATH}: no {WORKERS_FIELD!r} list")
        return [self._worker(item) for item in listed]

    async def drain_worker(self, name: str) -> WorkerInfo:
        """POST /v1/workers/{name}:drain: the worker takes no new placements."""
        _, body = await self._call("POST", worker_path(name, "drain"))
        return self._worker(body)

    @staticmethod
    def _worker(payload: Any) -> WorkerInfo:
        try:
            limit = payload.get(WORKER_MEMORY_LIMIT_FIELD)
            used = payload.get(WORKER_MEMORY_USED_FIELD)
            return WorkerInfo(
                name=str(payload[WORKER_NAME_FIELD]),
                pool=payload.get(WORKER_POOL_FIELD) or None,
                capacity=int(payload[WORKER_CAPACITY_FIELD]),
                allocated=int(payload[WORKER_ALLOCATED_FIELD]),
                state=str(payload.get(WORKER_STATE_FIELD, "active")),
                actors=tuple(str(a) for a in payload.get(WORKER_ACTORS_FIELD) or ()),
                # 0 on the wire: no limit.
                memory_limit_bytes=int(limit) if limit else None,
                memory_used_bytes=None if used is None else int(used),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            raise SubstrateError(BAD_BODY, f"not a worker: {str(payload)[:200]}") from None

    async def request(
        self,
        atespace: str,
        actor: str,
        route: str,
        *,
        json: Any = None,
        body: bytes | None = None,
        params: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> RouterResponse:
        return await self.router.request(
            actor_target(atespace, actor),
            route,
            json=json,
            body=body,
            params=params,
            timeout=timeout,
        )

    async def aclose(self) -> None:
        await asyncio.gather(self._control.aclose(), self.router.aclose())
