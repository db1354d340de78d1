"""The Substrate interface the engine drives: control API (actor lifecycle) + router
(requests to actors). docs/SPEC.md §2 is the wire contract; HttpSubstrate (http.py)
implements it over that wire, FakeSubstrate (fake.py) in memory for tests.

Every call raises SubstrateError on failure (see errors.py for the classification).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Template:
    namespace: str
    name: str
    memory_limit_bytes: int | None


@dataclass(frozen=True, slots=True)
class ActorInfo:
    atespace: str
    name: str
    status: str
    worker: str | None = None
    version: int = 0


@dataclass(slots=True)
class RouterResponse:
    """A successful (2xx) answer from an actor through the router."""

    status: int
    body: bytes
    content_type: str = "application/json"
    server_elapsed_us: int | None = None
    headers: dict[str, str] = field(default_factory=dict)


class Substrate(Protocol):
    # control API
    async def get_template(self, namespace: str, name: str) -> Template: ...
    async def ensure_atespace(self, atespace: str) -> None: ...
    async def create_actor(
        self, atespace: str, name: str, template_namespace: str, template_name: str
    ) -> ActorInfo: ...
    async def get_actor(self, atespace: str, name: str) -> ActorInfo: ...
    async def list_actors(self, atespace: str) -> list[ActorInfo]: ...
    async def resume_actor(self, atespace: str, name: str) -> ActorInfo: ...
    async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
        """wait=False is SuspendActorAsync (`?async=true`, 202 at once)."""
        ...

    async def pause_actor(self, atespace: str, name: str) -> None: ...
    async def delete_actor(self, atespace: str, name: str) -> None: ...

    # router
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
        """POST {router}/{route} with `ate-target-actor: {atespace}/{actor}`. Non-2xx answers
        raise SubstrateError (from_router per the x-ate-router header)."""
        ...

    async def aclose(self) -> None: ...
