"""Fault injection for the population tests, shared by the unit tests (over FakeSubstrate)
and the integration tests (over the real local substrate's client).

Every draw comes from a seeded stream, so a test's faults repeat with its seed.
"""

from __future__ import annotations

import random
from typing import Any

from agentsession_core.engine.context import now_ns
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.fake import FakeSubstrate
from agentsession_core.substrate.fake_glutton import Refused
from agentsession_core.substrate.interface import RouterResponse

WAKE_PROBE = {"message": "wake"}  # the body of Session._ping: first touches and wake probes


class Faulty:
    """Any Substrate, with a seeded share of router requests failing before they reach it:
    `refuse_wakes` of the wake probes (RESOURCE_EXHAUSTED, as a router with no room answers:
    the actor stays parked) and `fail_ops` of the scripted ops (a glutton 500: counted).
    Every other call goes to the wrapped substrate. Faults are drawn only while `armed` (a
    test arms them for the hold), so the draws follow the hold's own, ordered, requests."""

    def __init__(
        self, inner: Any, *, refuse_wakes: float = 0.0, fail_ops: float = 0.0, seed: int = 0
    ) -> None:
        self.inner = inner
        self.refuse_wakes = refuse_wakes
        self.fail_ops = fail_ops
        self.rng = random.Random(seed)
        self.refused = self.failed = 0
        self.armed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def request(self, atespace: str, actor: str, route: str, **kwargs: Any) -> RouterResponse:
        if not self.armed:
            pass
        elif kwargs.get("json") == WAKE_PROBE:
            if self.refuse_wakes and self.rng.random() < self.refuse_wakes:
                self.refused += 1
                raise SubstrateError("RESOURCE_EXHAUSTED", "no room (injected)", status=503)
        elif self.fail_ops and self.rng.random() < self.fail_ops:
            self.failed += 1
            raise SubstrateError("INTERNAL", "injected op failure", status=500, from_router=False)
        response: RouterResponse = await self.inner.request(atespace, actor, route, **kwargs)
        return response


class FewWorkers(FakeSubstrate):
    """FakeSubstrate with a worker pool: at most `workers` actors hold a worker (running,
    suspending, pausing or paused) at once; a wake beyond that is refused with
    RESOURCE_EXHAUSTED, as the local substrate's router answers when its park timeout passes."""

    def __init__(self, workers: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.workers = workers

    async def _wake(self, actor: Any, origin: Any) -> None:
        if actor.status != "RUNNING":
            held = sum(
                1
                for a in self._actors.values()
                if a.status in ("RUNNING", "SUSPENDING", "PAUSING", "PAUSED")
            )
            if held >= self.workers:
                raise Refused("RESOURCE_EXHAUSTED", "no free worker (FewWorkers)", origin)
        await super()._wake(actor, origin)


class CallLog:
    """Any Substrate, noting every control call and router request with its time."""

    CONTROL = ("create_actor", "resume_actor", "suspend_actor", "pause_actor", "delete_actor")

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[int, str, str]] = []  # (when, call, actor)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.CONTROL:
            return attr

        async def noted(atespace: str, actor: str, *args: Any, **kwargs: Any) -> Any:
            self.calls.append((now_ns(), name, actor))
            return await attr(atespace, actor, *args, **kwargs)

        return noted

    async def request(self, atespace: str, actor: str, route: str, **kwargs: Any) -> RouterResponse:
        self.calls.append((now_ns(), f"request {route}", actor))
        response: RouterResponse = await self.inner.request(atespace, actor, route, **kwargs)
        return response

    def since(self, when_ns: int) -> list[tuple[str, str]]:
        return [(call, actor) for at, call, actor in self.calls if at >= when_ns]
