"""Where a waking actor goes on the local substrate (local_substrate/placement.py,
docs/SPEC.md §2.7): by free slots and memory, the worker holding its paused state first, a
memory refusal at once, and exactly today's choice at capacity 1."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from agentsession_core.errors import UsageError
from local_substrate.cli import parse_pool_specs
from local_substrate.placement import (
    Need,
    NoMemory,
    choose,
    free_memory,
    reserved,
    shortage,
)
from local_substrate.pool import WorkerShape

MI = 1 << 20


@dataclass(eq=False)
class FakeWorker:
    name: str
    capacity: int = 1
    memory: int | None = None
    pool: str = ""
    alive: bool = True
    draining: bool = False
    running: dict[str, int] = field(default_factory=dict)
    paused: dict[str, int] = field(default_factory=dict)
    freed_seq: int = 0


def test_the_most_free_slots_first_then_the_longest_free() -> None:
    a = FakeWorker("a", capacity=4, running={"s/1": 0, "s/2": 0}, freed_seq=1)
    b = FakeWorker("b", capacity=4, running={"s/3": 0}, freed_seq=5)
    c = FakeWorker("c", capacity=4, running={"s/4": 0}, freed_seq=2)
    assert choose([a, b, c], Need("s/new", 0)) is c


def test_the_worker_holding_the_paused_state_comes_first() -> None:
    holder = FakeWorker("h", capacity=4, running={"s/1": 0, "s/2": 0}, paused={"s/p": 10})
    empty = FakeWorker("e", capacity=4)
    assert choose([holder, empty], Need("s/p", 0, prefer=holder)) is holder
    # A draining holder takes no placement: the paused actor goes elsewhere.
    holder.draining = True
    assert choose([holder, empty], Need("s/p", 0, prefer=holder)) is empty


def test_capacity_one_is_todays_choice() -> None:
    """One actor per worker: a free worker with the fewest paused bytes, then the one free
    longest; a busy one never."""
    busy = FakeWorker("busy", running={"s/1": 0})
    light = FakeWorker("light", paused={"s/x": 5}, freed_seq=9)
    heavy = FakeWorker("heavy", paused={"s/y": 50}, freed_seq=1)
    old = FakeWorker("old", paused={"s/z": 5}, freed_seq=3)
    assert choose([busy, light, heavy, old], Need("s/new", 0)) is old
    assert choose([busy], Need("s/new", 0)) is None


def test_no_free_slot_means_wait_not_refuse() -> None:
    full = FakeWorker("f", capacity=2, memory=10 * MI, running={"s/1": 5 * MI, "s/2": 5 * MI})
    assert choose([full], Need("s/new", 5 * MI)) is None
    assert shortage([full], Need("s/new", 5 * MI)) is None  # a slot is what it lacks


def test_a_slot_without_the_memory_means_wait_and_the_wait_names_the_memory() -> None:
    """Issue 38: memory comes free as surely as a slot (the park beside a swap's wake);
    refused at once, a turnover at the memory's frontier lost every swap's wake."""
    w = FakeWorker("w", capacity=4, memory=288 * MI, running={f"s/{i}": 64 * MI for i in range(3)})
    assert reserved(w) == 192 * MI
    assert choose([w], Need("s/small", 64 * MI)) is w
    assert choose([w], Need("s/big", 128 * MI)) is None
    short = shortage([w], Need("s/big", 128 * MI))
    assert short is not None
    assert str(short) == (
        "no worker has memory for actor s/big (it reserves 134217728 bytes, its template's "
        "memory limit); the most any worker with a free slot has free is 100663296 bytes "
        "(worker w, memory 301989888 bytes)"
    )


def test_an_actor_no_worker_could_hold_even_empty_is_refused_at_once() -> None:
    small = FakeWorker("s", capacity=4, memory=100 * MI)
    larger = FakeWorker("l", capacity=4, memory=200 * MI, running={"s/0": 150 * MI})
    with pytest.raises(NoMemory) as never:
        choose([small, larger], Need("s/huge", 256 * MI))
    assert str(never.value) == (
        "no worker can hold actor s/huge (it reserves 268435456 bytes, its template's memory "
        "limit); the largest worker of its pool has 209715200 bytes (worker l)"
    )
    assert choose([small, larger], Need("s/fits-later", 150 * MI)) is None  # l, once s/0 goes


def test_paused_state_counts_against_memory_except_the_actors_own() -> None:
    w = FakeWorker("w", capacity=2, memory=100 * MI, paused={"s/p": 60 * MI})
    assert free_memory(w, "s/other") == 40 * MI
    assert free_memory(w, "s/p") == 100 * MI  # its own state turns into its reservation
    assert choose([w], Need("s/other", 64 * MI)) is None  # until the paused state goes
    assert shortage([w], Need("s/other", 64 * MI)) is not None
    assert choose([w], Need("s/p", 64 * MI, prefer=w)) is w


def test_pools_dead_and_draining_workers_are_not_candidates() -> None:
    fast = FakeWorker("f", capacity=2, pool="fast")
    slow = FakeWorker("s", capacity=2, pool="slow")
    dead = FakeWorker("d", capacity=8, pool="fast", alive=False)
    assert choose([fast, slow, dead], Need("s/a", 0, pool="slow")) is slow
    assert choose([fast, slow, dead], Need("s/a", 0, pool="fast")) is fast
    fast.draining = True
    assert choose([fast, dead], Need("s/a", 0, pool="fast")) is None


def test_pool_flags_carry_capacity_and_memory() -> None:
    default = WorkerShape(2, None)
    specs = parse_pool_specs(["fast=2:4:512Mi", "slow=1:8", "plain=3"], default)
    assert specs == {
        "fast": (2, WorkerShape(4, 512 * MI)),
        "slow": (1, WorkerShape(8, None)),
        "plain": (3, default),
    }
    for bad, says in (
        ("fast=2:0", "capacity"),
        ("fast=2:x", "capacity"),
        ("fast=2:4:lots", "--pool 'fast=2:4:lots'"),
        ("fast=2:4:1Gi:9", "expected NAME=N"),
    ):
        with pytest.raises(UsageError, match=says):
            parse_pool_specs([bad])
