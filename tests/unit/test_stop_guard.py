"""The stop guard's edges (docs/SPEC.md §4.3: after stop no new request starts — no hibernate
from the closed loop, no CreateActor or first touch from a replacement)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentsession_core.engine.context import RunContext
from agentsession_core.engine.session import Session, Stopped
from agentsession_core.substrate.interface import RouterResponse
from tests.unit.test_session import MemorySubstrate, crash, make_ctx


class Gated(MemorySubstrate):
    """MemorySubstrate whose `gated` call waits for `release` once entered."""

    def __init__(self, gated: str) -> None:
        super().__init__()
        self.gated = gated
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def _gate(self, call: str) -> None:
        if call == self.gated and not self.release.is_set():
            self.entered.set()
            await self.release.wait()

    async def request(self, atespace: str, actor: str, route: str, **kw: Any) -> RouterResponse:
        if kw.get("json") == {"message": "agentsession"}:  # an op's ping, not a wake probe
            await self._gate("op ping")
        return await super().request(atespace, actor, route, **kw)

    async def delete_actor(self, atespace: str, name: str) -> None:
        await self._gate("delete")
        await super().delete_actor(atespace, name)


async def stop_while_gated(sub: Gated, ctx: RunContext, work: Any) -> list[tuple[str, str]]:
    """Run `work` until it enters the gated call, stop the run, let the call finish; the
    calls made after the stop."""
    task = asyncio.create_task(work)
    await asyncio.wait_for(sub.entered.wait(), 5)
    ctx.stopping.set()
    mark = len(sub.calls)
    sub.release.set()
    await asyncio.wait_for(task, 5)
    return sub.calls[mark:]


async def test_the_closed_loop_sends_no_hibernate_after_stop() -> None:
    sub = Gated("op ping")
    ctx = make_ctx(sub)
    session = Session(ctx, 0)
    await session.start(0)
    after = await stop_while_gated(sub, ctx, session.think_and_step())
    # The step in flight finished (booked ok); nothing was parked after the stop.
    assert ctx.recorder.totals().row("http", "Step_01_start").count == 1
    assert [c for c, _ in after if c in ("suspend", "suspend-async", "pause")] == []
    assert session.awake  # cleanup suspends and deletes it


async def test_a_replacement_sends_no_create_or_first_touch_after_stop() -> None:
    sub = Gated("delete")
    ctx = make_ctx(sub)
    session = Session(ctx, 0)
    await session.start(0)
    sub.fail["request ping"] = [crash()]  # the wake probe: the actor crashed, replace it
    after = await stop_while_gated(sub, ctx, session.think_and_step())
    assert [c for c, _ in after if c == "create" or c.startswith("request")] == []
    assert ctx.ledger.live == []  # the old actor was deleted; no new one was created
    assert sub.actors == {}


async def test_after_stop_a_start_sends_nothing() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    ctx.stopping.set()
    with pytest.raises(Stopped):
        await Session(ctx, 0).start(0)
    session = Session(ctx, 1)
    await session.replace()
    assert sub.calls == []
