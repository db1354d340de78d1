"""The Substrate interface the engine drives: control API (actor lifecycle) + router
(requests to actors). docs/SPEC.md §2 is the wire contract; HttpSubstrate (http.py)
implements it over the JSON wire, AteSubstrate (ate/substrate.py) over the ate wire,
FakeSubstrate (fake.py) in memory for tests.

Every call raises SubstrateError on failure (see errors.py for the classification).

Server time (docs/SPEC.md §2: every answer carries `x-server-elapsed-us`) travels beside the
calls rather than through their return values, because most control calls return nothing:
an implementation adds each answer's figure with `note_server_time`, and whoever books the
call reads the sum with `server_time_us` after `reset_server_time`. The sum lives in a
ContextVar, so it belongs to the task that awaits the calls: concurrent sessions never see
each other's figures, and a call that takes several answers (a paged ListActors) books them
all.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentsession_core.substrate.op_limits import OpLimits

NO_SERVER_TIME = -1  # server_time_us when no answer carried the figure

_server_us: ContextVar[int] = ContextVar("agentsession_server_us", default=NO_SERVER_TIME)


def reset_server_time() -> None:
    _server_us.set(NO_SERVER_TIME)


def note_server_time(us: int | None) -> None:
    """Add one answer's server time (microseconds; None: the answer did not say)."""
    if us is not None:
        total = _server_us.get()
        _server_us.set(us if total == NO_SERVER_TIME else total + us)


def server_time_us() -> int:
    """The server time noted since the last reset in this task; NO_SERVER_TIME if none."""
    return _server_us.get()


@dataclass(frozen=True, slots=True)
class Template:
    namespace: str
    name: str
    memory_limit_bytes: int | None
    # The per-op caps the substrate states (op_limits.py); None: it states none.
    op_limits: OpLimits | None = None


@dataclass(frozen=True, slots=True)
class ActorInfo:
    atespace: str
    name: str
    status: str
    worker: str | None = None
    version: int = 0
    pool: str | None = None  # the worker pool it runs on or is bound to, when the answer says
    # ResumeActor's answer only: whether it resumed the actor (False: it was already running,
    # its suspend never happened; docs/SPEC.md §3.4). None: not a ResumeActor answer, or one
    # that does not say.
    resumed: bool | None = None


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker as the control API's worker listing says it (docs/SPEC.md §2.7): a worker
    holds up to `capacity` actors, `allocated` of them now; `actors` are "atespace/name"."""

    name: str
    pool: str | None
    capacity: int
    allocated: int
    state: str = "active"  # "active" or "draining"
    actors: tuple[str, ...] = ()
    memory_limit_bytes: int | None = None
    # The bytes its actors hold or reserve now, when the listing says (the JSON wire's).
    memory_used_bytes: int | None = None


@dataclass(slots=True)
class RouterResponse:
    """A successful (2xx) answer from an actor through the router. `result` is the decoded
    answer: the JSON object on the JSON wire (None for raw bytes), the glutton codec's typed
    result on the ate wire."""

    status: int
    body: bytes
    content_type: str = "application/json"
    server_elapsed_us: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    result: Any = None


class Substrate(Protocol):
    # control API
    async def get_template(self, namespace: str, name: str) -> Template: ...
    async def ensure_atespace(self, atespace: str) -> None: ...
    async def create_actor(
        self,
        atespace: str,
        name: str,
        template_namespace: str,
        template_name: str,
        *,
        worker_selector: Mapping[str, str] | None = None,
    ) -> ActorInfo:
        """`worker_selector`: the labels a worker must carry to run the actor ({pool: NAME},
        docs/SPEC.md §2.6); None or empty: no selector of its own."""
        ...

    async def get_actor(self, atespace: str, name: str) -> ActorInfo: ...
    async def list_actors(self, atespace: str) -> list[ActorInfo]: ...
    async def resume_actor(self, atespace: str, name: str) -> ActorInfo: ...
    async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
        """wait=False is SuspendActorAsync (`?async=true`, 202 at once; the JSON wire only)."""
        ...

    async def pause_actor(self, atespace: str, name: str) -> None: ...
    async def delete_actor(self, atespace: str, name: str) -> None: ...
    async def list_workers(self) -> list[WorkerInfo]:
        """The worker listing with each worker's assigned actors (ListWorkers +
        ListWorkerActorAssignments on the ate wire, GET /v1/workers on the JSON wire). A
        substrate without one raises SubstrateError UNIMPLEMENTED."""
        ...

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
        raise SubstrateError (errors.py says who answered); a 2xx that does not decode as
        the route's answer raises BAD_BODY."""
        ...

    async def aclose(self) -> None: ...
