"""The actor state machine the local substrate and the in-memory fake share
(agentsession_core/substrate/actor_machine.py): its moves, the suspend and pause transitions
(waiting for requests in flight, going back where they came from when an effect fails, a
pause with no room carried out as a suspend) and the background suspend's lock order. Over a
machine whose effects are in memory and can be told to fail or to have no room."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from agentsession_core.substrate.actor_machine import (
    CRASHED,
    PAUSED,
    PAUSING,
    RESUMING,
    RUNNING,
    SUSPENDED,
    SUSPENDING,
    TRANSITIONS,
    ActorLife,
    ActorMachine,
    EffectFailed,
    IllegalMove,
)
from agentsession_core.substrate.protocol import ACTOR_STATUSES


class Refused(Exception):
    def __init__(self, code: str, message: str, router: bool) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.router = code, router


@dataclass(eq=False)
class Toy(ActorLife):
    pass


class Machine(ActorMachine[Toy]):
    refused = Refused

    def __init__(self) -> None:
        super().__init__()
        self.fail = False  # every effect raises EffectFailed
        self.room = True  # hold_paused finds room
        self.effects: list[str] = []
        self.suspends = 0

    def refusal(self, code: str, message: str, *, router: bool) -> Exception:
        return Refused(code, message, router)

    async def _effect(self, name: str, actor: Toy) -> None:
        await asyncio.sleep(0)
        if self.fail:
            raise EffectFailed(f"{name} failed")
        self.effects.append(name)
        actor.version += 1

    async def save(self, actor: Toy) -> None:
        await self._effect("save", actor)

    async def spill(self, actor: Toy) -> None:
        await self._effect("spill", actor)

    async def hold_paused(self, actor: Toy) -> bool:
        if not self.room:
            return False
        await self._effect("hold", actor)
        return True

    def suspended(self, actor: Toy) -> None:
        self.suspends += 1


def running(machine: Machine) -> Toy:
    actor = Toy("space", "a")
    machine.move(actor, RESUMING)
    machine.move(actor, RUNNING)
    return actor


def test_the_states_are_the_protocols_and_every_move_leads_to_a_state() -> None:
    assert set(TRANSITIONS) == set(ACTOR_STATUSES) | {SUSPENDED, CRASHED}
    assert all(targets <= set(TRANSITIONS) for targets in TRANSITIONS.values())


@pytest.mark.parametrize(
    ("start", "to"),
    [
        (SUSPENDED, RUNNING),  # a wake always passes through RESUMING
        (SUSPENDED, CRASHED),  # a suspended actor lives in the store: no worker to die
        (RUNNING, SUSPENDED),  # a suspend always passes through SUSPENDING
        (PAUSED, RUNNING),
        (CRASHED, RUNNING),  # only RevertActor brings a crashed actor back, to SUSPENDED
    ],
)
def test_a_move_without_an_arrow_is_refused(start: str, to: str) -> None:
    actor = Toy("space", "a", status=start)
    with pytest.raises(IllegalMove, match=f"from {start} to {to}"):
        Machine().move(actor, to)
    assert actor.status == start


async def test_a_suspend_waits_for_the_requests_in_flight() -> None:
    machine = Machine()
    actor = running(machine)
    actor.inflight = 1
    actor.idle.clear()
    async with actor.lock:
        suspend = asyncio.create_task(machine.suspend_locked(actor))
        await asyncio.sleep(0.01)
        assert (actor.status, machine.effects) == (SUSPENDING, [])
        machine.request_done(actor)
        await suspend
    assert (actor.status, actor.version, machine.effects, machine.suspends) == (
        SUSPENDED,
        1,
        ["save"],
        1,
    )
    await machine.suspend_locked(actor)  # already there: nothing happens
    assert (actor.version, machine.suspends) == (1, 1)


async def test_a_failed_effect_goes_back_where_it_came_from() -> None:
    machine = Machine()
    actor = running(machine)
    machine.fail = True
    with pytest.raises(Refused, match="UNAVAILABLE: suspend of space/a"):
        await machine.suspend_locked(actor)
    assert actor.status == RUNNING
    with pytest.raises(Refused, match="UNAVAILABLE: pause of space/a"):
        await machine.pause_locked(actor)
    assert actor.status == RUNNING
    machine.fail = False
    await machine.pause_locked(actor)
    assert (actor.status, machine.effects) == (PAUSED, ["hold"])
    machine.fail = True
    with pytest.raises(Refused, match="UNAVAILABLE"):
        await machine.suspend_locked(actor)
    assert actor.status == PAUSED
    machine.fail = False
    await machine.suspend_locked(actor)  # the paused state spills to the store
    assert (actor.status, machine.effects, machine.suspends) == (SUSPENDED, ["hold", "spill"], 1)


async def test_a_pause_with_no_room_for_its_state_is_a_suspend() -> None:
    machine = Machine()
    actor = running(machine)
    machine.room = False
    await machine.pause_locked(actor)
    assert (actor.status, machine.effects) == (SUSPENDED, ["save"])


async def test_a_deleted_or_crashed_actor_is_refused_and_a_crash_while_draining_stops_it() -> None:
    machine = Machine()
    actor = running(machine)
    actor.inflight = 1
    actor.idle.clear()
    pause = asyncio.create_task(machine.pause_locked(actor))
    await asyncio.sleep(0.01)
    assert actor.status == PAUSING
    machine.move(actor, CRASHED)  # its worker died while the request was inside
    machine.request_done(actor)
    with pytest.raises(Refused, match="ABORTED: actor space/a crashed"):
        await pause
    assert (actor.status, machine.effects) == (CRASHED, [])
    actor.deleted = True
    with pytest.raises(Refused) as gone:
        machine.usable(actor, router=True)
    assert (gone.value.code, gone.value.router) == ("ACTOR_NOT_FOUND", True)


async def test_a_background_suspend_holds_the_lock_so_a_later_call_queues_behind_it() -> None:
    machine = Machine()
    actor = running(machine)
    actor.inflight = 1
    actor.idle.clear()
    await machine.suspend_in_background(actor)
    assert (actor.status, actor.lock.locked()) == (SUSPENDING, True)  # answered at once
    order: list[str] = []

    async def later() -> None:
        async with actor.lock:
            order.append(actor.status)

    waiting = asyncio.create_task(later())
    await asyncio.sleep(0.01)
    assert order == []
    machine.request_done(actor)
    await machine.settle()
    await waiting
    assert order == [SUSPENDED]
    assert (actor.status, machine.effects) == (SUSPENDED, ["save"])
