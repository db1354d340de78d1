"""The local substrate's control operations, whichever wire asks for them (docs/SPEC.md §2.1,
§2.5, §2.7): templates, atespaces, actors and their lifecycle verbs, the workers.

The two control fronts are thin adapters over this one interface: control.py decodes JSON
requests and encodes JSON answers, ate_control.py does the same with ateapi.Control's
protobuf messages. Neither keeps state or decides anything of its own; every refusal is a
WireError raised here (or in ActorLifecycle, actors.py, which owns every change of an
actor's state), and each front says it in its wire's form. So an actor created on one wire
is driven on the other, and by the router, exactly alike.

A lifecycle verb of the JSON wire (protocol.ACTOR_VERBS, `POST …/actors/{n}:<verb>`) is the
method of the same name here: a new verb is served on the JSON wire by adding it to that
table and its method here, with no route of its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentsession_core.substrate.op_limits import OpLimits
from agentsession_core.substrate.protocol import DEFAULT_TEMPLATE, NAME_PATTERN
from local_substrate.actors import Actor, ActorLifecycle
from local_substrate.protocol import WireError
from local_substrate.worker_facts import WorkerFacts

MAX_PAGE = 1000  # the most actors one ListActors page holds (the ate wire notes §3)


class ControlPlane:
    """Every control operation of one local substrate; `templates` maps (namespace, name) to
    a memory limit in bytes (None: no limit)."""

    def __init__(
        self,
        templates: Mapping[tuple[str, str], int | None],
        lifecycle: ActorLifecycle,
        op_limits: OpLimits | None = None,
    ) -> None:
        self.templates = dict(templates)
        self.lifecycle = lifecycle
        self.op_limits = op_limits
        self.atespaces: set[str] = set()

    # ---- templates and atespaces ---------------------------------------------------------

    def template_limit(self, namespace: str, name: str) -> int | None:
        """GetActorTemplate: the template's memory limit; NOT_FOUND for an unknown one."""
        if (namespace, name) not in self.templates:
            raise WireError("NOT_FOUND", f"template {namespace}/{name} not found")
        return self.templates[(namespace, name)]

    def ensure_atespace(self, name: str) -> str:
        """PUT: the atespace exists afterwards, whether or not it did before."""
        self.atespaces.add(checked_name(name, "atespace"))
        return name

    def create_atespace(self, name: str) -> str:
        """CreateAtespace: ALREADY_EXISTS for one that exists, as a resource store's create."""
        checked_name(name, "atespace")
        if name in self.atespaces:
            raise WireError("ALREADY_EXISTS", f"atespace {name!r} already exists")
        self.atespaces.add(name)
        return name

    def atespace(self, name: str) -> str:
        if name not in self.atespaces:
            raise WireError("NOT_FOUND", f"atespace {name!r} not found (create it first)")
        return name

    # ---- actors --------------------------------------------------------------------------

    async def create_actor(
        self,
        atespace: str,
        name: object,
        template: tuple[str, str] | None,
        selector: dict[str, str],
    ) -> Actor:
        """CreateActor of `template` (None: the default one), SUSPENDED with its empty golden
        state."""
        self.atespace(atespace)
        name = checked_name(name, f"CreateActor in {atespace}: field 'name'")
        ref = template or DEFAULT_TEMPLATE
        if ref not in self.templates:
            raise WireError(
                "NOT_FOUND", f"CreateActor in {atespace}: template {ref[0]}/{ref[1]} not found"
            )
        if (atespace, name) in self.lifecycle.actors:
            raise WireError("ALREADY_EXISTS", f"actor {atespace}/{name} already exists")
        actor = Actor(atespace, name, ref, self.templates[ref], selector=selector)
        await self.lifecycle.add(actor)
        return actor

    def actor(self, atespace: str, name: str) -> Actor:
        self.atespace(atespace)
        return self.lifecycle.lookup(atespace, name)

    def list_actors(
        self, atespace: str, page_size: int, page_token: str
    ) -> tuple[list[Actor], str]:
        """One page of the atespace's actors in name order and the next page's token (empty:
        the last page). The token is the last name of the previous page, so an actor created
        or deleted between pages moves no other across a boundary."""
        self.atespace(atespace)
        if page_size < 0:
            raise WireError("INVALID_ARGUMENT", f"page_size {page_size} is negative")
        size = max(1, min(page_size, MAX_PAGE))
        actors = self.lifecycle.actors
        names = sorted(n for (a, n) in actors if a == atespace and n > page_token)
        page = names[:size]
        return [actors[(atespace, n)] for n in page], page[-1] if len(names) > size else ""

    # ---- the lifecycle verbs (protocol.ACTOR_VERBS: each is the method of its name) --------

    async def resume(self, actor: Actor) -> bool:
        """ResumeActor; False when the actor was already RUNNING."""
        return await self.lifecycle.resume(actor)

    async def suspend(self, actor: Actor, *, wait: bool = True) -> None:
        """SuspendActor; `wait=False` (SuspendActorAsync) answers once the suspend is queued."""
        if wait:
            await self.lifecycle.suspend(actor)
        else:
            await self.lifecycle.suspend_in_background(actor)

    async def pause(self, actor: Actor) -> None:
        await self.lifecycle.pause(actor)

    async def revert(self, actor: Actor) -> None:
        await self.lifecycle.revert(actor)

    async def delete(
        self, actor: Actor, *, any_state: bool = True, uid: str = "", version: int = 0
    ) -> None:
        """DeleteActor. Without `any_state` only a SUSPENDED or CRASHED actor; a `uid` or
        `version` that does not match is ABORTED (a precondition on the resource's version,
        not worded as a conflict so that no client retries it)."""
        if uid and uid != actor.uid:
            raise WireError("ABORTED", f"actor {actor.key}: uid precondition failed")
        if version and version != actor.version:
            raise WireError(
                "ABORTED",
                f"actor {actor.key}: version precondition failed "
                f"(asked {version}, is {actor.version})",
            )
        if not any_state and actor.status not in ("SUSPENDED", "CRASHED"):
            raise WireError(
                "FAILED_PRECONDITION",
                f"actor {actor.key} is {actor.status}: suspend it first, or set any_state",
            )
        await self.lifecycle.delete(actor)

    # ---- workers (docs/SPEC.md §2.7) -------------------------------------------------------

    def workers(self) -> list[WorkerFacts]:
        return self.lifecycle.workers()

    def drain_worker(self, name: str) -> WorkerFacts:
        try:
            return self.lifecycle.drain_worker(name)
        except KeyError:
            raise WireError("NOT_FOUND", f"worker {name!r} not found") from None


def checked_name(value: object, where: str) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise WireError("INVALID_ARGUMENT", f"{where}: {value!r} must match {NAME_PATTERN.pattern}")
    return value
