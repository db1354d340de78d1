"""A target's one-campaign slot never stays taken by a campaign that is gone (issue 38,
docs/SPEC.md §6.5), against a real Prefect API (the test harness's server): the slot is
held as a dead campaign leaves it (taken with a lease, its holder record written, nothing
renewing either) and a real `hold_target` must get the target anyway, saying whose slot it
took over:

- a holder whose process on this machine is gone is taken over at once;
- a holder elsewhere whose record has been silent for STALE_S is taken over once it stays
  silent another HEARTBEAT_S and a half (a live holder whose API came back beats within
  HEARTBEAT_S);
- a slot with no record (an operator's own `concurrency()`, a campaign of an older version)
  is waited for, as before, and taken when released;
- a campaign that holds the slot and ends releases it and deletes its record.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from uuid import UUID

import pytest

from agentsession_core.engine.params import TargetParams
from tests.integration import flow_harness
from tests.integration.flow_harness import TEST_TIMEOUT_S

pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)
prefect_api = flow_harness.prefect_api  # this module's own Prefect API


def dead_pid() -> int:
    """A process id of this machine whose process has ended (and was reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


async def occupy_as(limit: str, holder: object | None) -> UUID:
    """Take the limit's one slot with a lease, and write `holder` as its record."""
    from prefect.client.orchestration import get_client

    from flows.target_limit import ensure_limit, write_holder

    await ensure_limit(limit)
    async with get_client() as client:
        answer = await client.increment_concurrency_slots_with_lease(
            names=[limit], slots=1, mode="concurrency", lease_duration=600
        )
        lease = UUID(answer.json()["lease_id"])
        if holder is not None:
            holder.lease = str(lease)  # type: ignore[attr-defined]
            await write_holder(client, limit, holder)  # type: ignore[arg-type]
    return lease


class Said(logging.Handler):
    """The `agentsession` logger's records, as hold_target says them outside a flow run
    (that logger may not propagate to the root, where caplog listens)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []
        self.changed = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.changed.set()

    @property
    def text(self) -> str:
        return "\n".join(r.getMessage() for r in self.records)


@pytest.fixture
def said() -> Iterator[Said]:
    logger = logging.getLogger("agentsession")
    handler, level = Said(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def target(port: int) -> TargetParams:
    """A target on the ate wire whose control endpoint is 127.0.0.1:port (nothing listens:
    the slot is all these tests take)."""
    return TargetParams(substrate=f"grpc://127.0.0.1:{port}", router="http://127.0.0.1:1")


async def test_a_dead_local_holder_is_taken_over_at_once(prefect_api, said: Said) -> None:
    from flows.target_limit import Holder, hold_target, limit_name

    limit = limit_name("127.0.0.1:40001")
    dead = Holder.ours(None).model_copy(update={"pid": dead_pid(), "flow_run_name": "night-7"})
    await occupy_as(limit, dead)
    async with asyncio.timeout(120), hold_target(target(40001), None):
        text = said.text
    assert "took over target 127.0.0.1:40001's slot" in text, text
    assert f"from flow run night-7 (pid {dead.pid} on " in text, text
    assert "waiting for the global concurrency limit" not in text, text


async def test_a_silent_holder_elsewhere_is_taken_over_after_its_silence(
    prefect_api, said: Said, monkeypatch
) -> None:
    from flows import target_limit
    from flows.target_limit import Holder, hold_target, limit_name

    # Shorter silences for the test; the rule is the same.
    monkeypatch.setattr(target_limit, "STALE_S", 2.0)
    monkeypatch.setattr(target_limit, "HEARTBEAT_S", 1.0)
    limit = limit_name("127.0.0.1:40002")
    silent = Holder.ours(None).model_copy(
        update={"host": "another-box", "pid": 1, "flow_run_name": "night-8", "alive": time.time()}
    )
    await occupy_as(limit, silent)
    begun = time.time()
    async with asyncio.timeout(120), hold_target(target(40002), None):
        text = said.text
    assert "from flow run night-8 (pid 1 on another-box)" in text, text
    # Not before it had been silent STALE_S and then HEARTBEAT_S and a half more.
    (took,) = [r for r in said.records if "took over target" in r.getMessage()]
    assert took.created - silent.alive >= 2.0 + 1.5, (took.created, silent.alive, begun)


async def test_a_slot_without_a_record_is_waited_for(prefect_api, said: Said) -> None:
    from prefect.client.orchestration import get_client

    from flows.target_limit import hold_target, limit_name, read_holder

    limit = limit_name("127.0.0.1:40003")
    lease = await occupy_as(limit, None)
    held = asyncio.Event()

    async def campaign() -> None:
        async with hold_target(target(40003), None):
            held.set()

    entering = asyncio.create_task(campaign())
    async with asyncio.timeout(120):
        while "waiting for the global concurrency limit" not in said.text:
            said.changed.clear()
            await said.changed.wait()
    assert not held.is_set() and "took over" not in said.text
    async with get_client() as client:
        await client.release_concurrency_slots_with_lease(lease)
    async with asyncio.timeout(120):
        await entering
    assert held.is_set()
    async with get_client() as client:  # it released the slot and deleted its record
        gcl = await client.read_global_concurrency_limit_by_name(limit)
        assert gcl.active_slots == 0
        assert await read_holder(client, limit) is None
