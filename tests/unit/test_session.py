"""Session behaviour against an in-memory substrate: docs/SPEC.md §3.4's failure table, hibernate
re-drive, resume and lifecycle modes, the stop guard and the seeded think schedule.

The fake substrate keeps real actor state (created, deleted, parked) and fails the calls a
test scripts into it, so every assertion is on what the session did, never on the fake.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest

from agentsession_core.engine import context as context_module
from agentsession_core.engine.context import RunContext
from agentsession_core.engine.ledger import ActorLedger
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.session import REPLACE_AFTER, Session, StepFailed, Stopped
from agentsession_core.measure.recorder import Recorder
from agentsession_core.script import load_script
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.interface import (
    ActorInfo,
    RouterResponse,
    Template,
    note_server_time,
)

ATESPACE = "unit"


class MemorySubstrate:
    """Actors in a dict; `fail[call]` is a list of errors the next such calls raise."""

    def __init__(self) -> None:
        self.actors: dict[str, str] = {}
        self.calls: list[tuple[str, str]] = []
        self.fail: dict[str, list[SubstrateError]] = defaultdict(list)
        self.deleted: list[str] = []

    def _enter(self, call: str, actor: str) -> None:
        self.calls.append((call, actor))
        if self.fail[call]:
            raise self.fail[call].pop(0)

    async def get_template(self, namespace: str, name: str) -> Template:
        return Template(namespace, name, 1 << 30)

    async def ensure_atespace(self, atespace: str) -> None:
        pass

    async def create_actor(self, atespace: str, name: str, tns: str, tname: str) -> ActorInfo:
        self._enter("create", name)
        self.actors[name] = "SUSPENDED"
        return ActorInfo(atespace, name, "SUSPENDED")

    async def get_actor(self, atespace: str, name: str) -> ActorInfo:
        return ActorInfo(atespace, name, self.actors[name])

    async def list_actors(self, atespace: str) -> list[ActorInfo]:
        return [ActorInfo(atespace, n, s) for n, s in self.actors.items()]

    async def resume_actor(self, atespace: str, name: str) -> ActorInfo:
        self._enter("resume", name)
        self.actors[name] = "RUNNING"
        return ActorInfo(atespace, name, "RUNNING")

    async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
        self._enter("suspend" if wait else "suspend-async", name)
        self.actors[name] = "SUSPENDED"

    async def pause_actor(self, atespace: str, name: str) -> None:
        self._enter("pause", name)
        self.actors[name] = "PAUSED"

    async def delete_actor(self, atespace: str, name: str) -> None:
        self._enter("delete", name)
        if self.actors.pop(name, None) is None:
            raise SubstrateError("NOT_FOUND", f"actor {name}", status=404)
        self.deleted.append(name)

    async def request(self, atespace: str, actor: str, route: str, **_: Any) -> RouterResponse:
        self._enter(f"request {route}", actor)
        if actor not in self.actors:
            raise SubstrateError("ACTOR_NOT_FOUND", actor, status=404)
        self.actors[actor] = "RUNNING"
        return RouterResponse(200, b'{"ok": true}')

    async def aclose(self) -> None:
        pass


def make_ctx(
    substrate: MemorySubstrate, population: dict[str, Any] | None = None, **overrides: Any
) -> RunContext:
    values: dict[str, Any] = {"script": "smoke", "think_scale": 0.0, "seed": 7}
    values.update(overrides, population=population or {})
    params = RunParams(**values)
    return RunContext(
        substrate, Recorder(), load_script("smoke"), params, ATESPACE, ActorLedger(ATESPACE)
    )


def totals(ctx: RunContext, kind: str, name: str):  # type: ignore[no-untyped-def]
    return ctx.recorder.totals().row(kind, name)


def crash() -> SubstrateError:
    return SubstrateError("ABORTED", "actor crashed: worker exited", status=409)


def internal() -> SubstrateError:
    return SubstrateError("INTERNAL", "boom", status=500, from_router=False)


async def started(ctx: RunContext, sid: int = 0) -> Session:
    session = Session(ctx, sid)
    await session.start(0)
    return session


# ------------------------------------------------------------------------- start
async def test_start_creates_touches_and_parks() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    assert [c for c, _ in sub.calls] == ["create", "request ping", "suspend"]
    assert sub.actors == {"agent-0": "SUSPENDED"}
    assert ctx.ledger.live == ["agent-0"]
    assert session.cursor == 0 and not session.awake
    assert totals(ctx, "grpc", "SuspendActor").count == 1


async def test_registration_start_runs_step_one_and_books_register_park() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    ctx.registers = True  # as turnover and turns set it
    session = Session(ctx, 3)
    await session.start(0, prime=True)
    assert session.cursor == 1
    assert totals(ctx, "http", "Step_01_start").count == 1
    assert totals(ctx, "grpc", "SuspendActor_Register").count == 1
    assert totals(ctx, "grpc", "SuspendActor").count == 0


async def test_first_touch_retries_capacity_verdicts() -> None:
    sub = MemorySubstrate()
    sub.fail["request ping"] = [SubstrateError("RESOURCE_EXHAUSTED", "no room", status=503)]
    ctx = make_ctx(sub)
    await started(ctx)
    first = totals(ctx, "http", "FirstTouch")
    assert (first.count, first.failures) == (2, 1)


# ------------------------------------------------------------------------- one turn
async def test_turn_wakes_steps_and_parks_advancing_the_cursor() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    for _ in range(5):
        await session.think_and_step()
    assert session.cursor == 5 % len(ctx.script.steps)
    assert totals(ctx, "http", "WakeFirstTouch").count == 5
    assert totals(ctx, "http", "Step_01_start").count == 2
    assert totals(ctx, "http", "Step_04_write_back").count == 1
    assert totals(ctx, "grpc", "SuspendActor").count == 6  # start + 5 turns
    assert sub.actors["agent-0"] == "SUSPENDED"


@pytest.mark.parametrize(
    ("mode", "row", "call"),
    [
        ("suspend", "SuspendActor", "suspend"),
        ("suspend-async", "SuspendActorAsync", "suspend-async"),
        ("pause", "PauseActor", "pause"),
    ],
)
async def test_lifecycle_modes_book_their_own_park(mode: str, row: str, call: str) -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub, {"lifecycle_mode": mode})
    session = await started(ctx)
    await session.think_and_step()
    assert totals(ctx, "grpc", row).count == 2
    assert sum(1 for c, _ in sub.calls if c == call) == 2
    others = {"suspend", "suspend-async", "pause"} - {call}
    assert not [c for c, _ in sub.calls if c in others]


async def test_lifecycle_none_never_parks_and_books_no_wake() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub, {"lifecycle_mode": "none"})
    session = await started(ctx)
    for _ in range(3):
        await session.think_and_step()
    assert not [c for c, _ in sub.calls if c in ("suspend", "suspend-async", "pause", "resume")]
    assert totals(ctx, "http", "WakeFirstTouch").count == 0
    assert session.cursor == 3


async def test_explicit_resume_books_resume_actor_before_the_probe() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub, {"resume_mode": "explicit"})
    session = await started(ctx)
    await session.think_and_step()
    calls = [c for c, _ in sub.calls]
    assert calls[calls.index("resume") + 1] == "request ping"
    assert totals(ctx, "grpc", "ResumeActor").count == 1
    assert totals(ctx, "http", "WakeFirstTouch").count == 1


async def test_implicit_resume_never_calls_resume() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    await session.think_and_step()
    assert "resume" not in [c for c, _ in sub.calls]


# ------------------------------------------------------------------------- failures
async def test_actor_not_found_replaces_at_once() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    await session.think_and_step()
    del sub.actors["agent-0"]  # gone behind the session's back
    await session.think_and_step()
    assert session.actor == "agent-0-r1"
    assert session.cursor == 0 and session.failures_in_a_row == 0
    assert sub.actors == {"agent-0-r1": "SUSPENDED"}
    assert ctx.ledger.live == ["agent-0-r1"]
    assert totals(ctx, "grpc", "DeleteActor").count == 1
    assert totals(ctx, "http", "WakeFirstTouch").failures == 1


async def test_crash_on_the_probe_counts_a_crash_and_replaces() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    sub.fail["request ping"] = [crash()]
    await session.think_and_step()
    assert totals(ctx, "actor", "CrashCount").events == 1
    assert session.actor == "agent-0-r1"
    assert sub.deleted == ["agent-0"]


async def test_crash_on_explicit_resume_counts_a_crash_and_replaces() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub, {"resume_mode": "explicit"})
    session = await started(ctx)
    sub.fail["resume"] = [crash()]
    await session.think_and_step()
    assert totals(ctx, "actor", "CrashCount").events == 1
    assert totals(ctx, "grpc", "ResumeActor").failures == 1
    assert session.actor == "agent-0-r1"


async def test_three_counted_failures_in_a_row_replace() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    sub.fail["request writeram"] = [internal() for _ in range(3)]
    for attempt in (1, 2):
        await session.think_and_step()
        assert session.failures_in_a_row == attempt
        assert session.actor == "agent-0"
        assert session.cursor == 0  # a failed step is retried, not skipped
    await session.think_and_step()
    assert session.actor == "agent-0-r1"
    assert totals(ctx, "http", "Step_01_start").failures == 3
    errors = totals(ctx, "http", "Step_01_start").errors
    assert errors == {"op 1 fill_ram: INTERNAL": 3}


async def test_a_successful_step_resets_the_count() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    sub.fail["request writeram"] = [internal(), internal()]
    await session.think_and_step()
    await session.think_and_step()
    await session.think_and_step()  # step 1 succeeds now
    assert session.failures_in_a_row == 0 and session.cursor == 1
    sub.fail["request ingest"] = [internal(), internal()]
    await session.think_and_step()
    await session.think_and_step()
    assert session.actor == "agent-0" and session.failures_in_a_row == 2


async def test_capacity_verdicts_are_not_counted() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    busy = SubstrateError("RESOURCE_EXHAUSTED", "no worker", status=503)
    sub.fail["request ping"] = [busy for _ in range(REPLACE_AFTER + 2)]
    for _ in range(REPLACE_AFTER + 2):
        await session.think_and_step()
    assert session.failures_in_a_row == 0
    assert session.actor == "agent-0"
    await session.think_and_step()
    assert session.cursor == 1


async def test_misconfigured_is_surfaced_once_per_code() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    bad = SubstrateError("INVALID_ARGUMENT", "key refused", status=400)
    sub.fail["request writeram"] = [bad, bad]
    await session.think_and_step()
    await session.think_and_step()
    assert list(ctx.misconfigured) == ["INVALID_ARGUMENT"]
    assert "Step" not in ctx.misconfigured["INVALID_ARGUMENT"]
    assert "agent-0: step 01_start: op 1 fill_ram" in ctx.misconfigured["INVALID_ARGUMENT"]
    assert session.failures_in_a_row == 0


@pytest.mark.parametrize(
    "refusal",
    [
        SubstrateError("PERMISSION_DENIED", "ResumeActor: not allowed"),  # gRPC, control
        SubstrateError("UNAUTHENTICATED", "bad token", status=401),  # JSON control API
        SubstrateError("HTTP_403", "PermissionDenied", status=403),  # the ate router
    ],
)
async def test_a_refused_credential_stops_the_run_with_one_line(refusal: SubstrateError) -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    sub.fail["request ping"] = [refusal]
    await session.think_and_step()
    assert ctx.stopping.is_set()
    assert ctx.fatal is not None and "\n" not in ctx.fatal
    assert ctx.fatal.startswith("credentials refused by ")
    assert refusal.code in ctx.fatal and "agent-0: wake probe" in ctx.fatal
    assert "target.token" in ctx.fatal  # names what to fix
    first = ctx.fatal
    ctx.surface(SubstrateError("UNAUTHENTICATED", "again"), "elsewhere")
    assert ctx.fatal == first  # the first refusal is the reason


async def test_a_misconfiguration_that_is_not_a_credential_does_not_stop_the_run() -> None:
    ctx = make_ctx(MemorySubstrate())
    ctx.surface(SubstrateError("INVALID_ARGUMENT", "size"), "op")
    assert ctx.fatal is None and not ctx.stopping.is_set()


async def test_server_time_is_booked_on_the_rows_that_got_it() -> None:
    class Timed(MemorySubstrate):
        async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
            await super().suspend_actor(atespace, name, wait=wait)
            note_server_time(300)

        async def request(self, atespace: str, actor: str, route: str, **kw: Any) -> RouterResponse:
            answer = await super().request(atespace, actor, route, **kw)
            note_server_time(50)
            return answer

    ctx = make_ctx(Timed())
    session = await started(ctx)
    await session.think_and_step()
    park = totals(ctx, "grpc", "SuspendActor")
    assert park.server.count == park.count == 2
    assert park.server.quantile(0.5) == pytest.approx(0.3, rel=0.01)
    assert totals(ctx, "http", "WakeFirstTouch").server.quantile(0.5) == pytest.approx(
        0.05, rel=0.01
    )
    # A step's server time is the sum over its ops (01_start: fill_ram + ping).
    step = totals(ctx, "http", "Step_01_start")
    assert step.server.quantile(0.5) == pytest.approx(0.1, rel=0.01)
    assert totals(ctx, "grpc", "CreateActor").server.count == 0  # the fake said nothing


async def test_failed_hibernate_is_redriven_before_the_next_turn() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    sub.fail["suspend"] = [SubstrateError("UNAVAILABLE", "try later", status=503)]
    await session.think_and_step()
    assert session.needs_hibernate
    assert sub.actors["agent-0"] == "RUNNING"
    mark = len(sub.calls)
    await session.think_and_step()
    assert [c for c, _ in sub.calls[mark : mark + 2]] == ["suspend", "request ping"]
    assert not session.needs_hibernate
    assert totals(ctx, "grpc", "SuspendActor").failures == 1
    assert sub.actors["agent-0"] == "SUSPENDED"


async def test_a_storm_of_replacements_logs_a_few_lines_and_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agentsession")
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    sessions = [await started(ctx, sid) for sid in range(40)]
    for session in sessions:
        await session.replace()
    assert sorted(ctx.ledger.live) == sorted(f"agent-{sid}-r1" for sid in range(40))
    replaced = [r.getMessage() for r in caplog.records if " replaced by " in r.getMessage()]
    # The first five (the log limit's burst) as they come, the other 35 summed up.
    assert replaced == [f"agent-{sid} replaced by agent-{sid}-r1" for sid in range(5)]
    ctx.summarise_logs(force=True)  # as at the end of the run
    summary = caplog.records[-1].getMessage()
    assert summary.startswith("… and 35 more replacements in the last ")


async def test_replace_survives_a_missing_old_actor() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    sub.actors.clear()
    await session.replace()
    assert ctx.ledger.live == ["agent-0-r1"]
    assert totals(ctx, "grpc", "DeleteActor").failures == 0


async def test_start_failure_is_a_step_failure_naming_the_actor() -> None:
    sub = MemorySubstrate()
    sub.fail["create"] = [SubstrateError("ALREADY_EXISTS", "taken", status=409)]
    ctx = make_ctx(sub)
    with pytest.raises(StepFailed, match="agent-0: CreateActor"):
        await started(ctx)
    assert ctx.ledger.live == []


# ------------------------------------------------------------------------- stop guard
async def test_after_stop_no_request_starts() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    ctx.stopping.set()
    mark = len(sub.calls)
    await session.think_and_step()
    with pytest.raises(Stopped):
        await session.wake(0)
    with pytest.raises(Stopped):
        await session.run_step(0)
    assert sub.calls[mark:] == []
    assert totals(ctx, "http", "Step_01_start").cancelled == 1


async def test_a_long_think_ends_when_the_run_stops() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub, think_scale=1000.0)
    session = await started(ctx)
    turn = asyncio.create_task(session.think_and_step())
    await asyncio.sleep(0)
    ctx.stopping.set()
    await asyncio.wait_for(turn, 5)
    assert [c for c, _ in sub.calls][-1] == "suspend"


# ------------------------------------------------------------------------- seeded schedule
def think_gaps(seed: int, sid: int, n: int) -> list[int]:
    ctx = make_ctx(MemorySubstrate(), think_scale=1.0, seed=seed)
    session = Session(ctx, sid)
    gaps = []
    for i in range(n):
        session.cursor = i % len(ctx.script.steps)
        gaps.append(session.think_ns(session.next_step()))
    return gaps


def test_think_gaps_follow_the_seed_and_the_session() -> None:
    assert think_gaps(7, 3, 50) == think_gaps(7, 3, 50)
    assert think_gaps(7, 3, 50) != think_gaps(8, 3, 50)
    assert think_gaps(7, 3, 50) != think_gaps(7, 4, 50)


def test_think_gaps_stay_within_the_jitter_band() -> None:
    ctx = make_ctx(MemorySubstrate(), think_scale=1.0)
    session = Session(ctx, 0)
    for i in range(400):
        session.cursor = i % len(ctx.script.steps)
        step = session.next_step()
        gap = session.think_ns(step) / 1e9
        assert 0.8 * step.think_seconds <= gap < 1.2 * step.think_seconds + 1e-9


def test_intended_log_records_think_gaps_only_when_asked() -> None:
    ctx = make_ctx(MemorySubstrate(), think_scale=1.0)
    session = Session(ctx, 2)
    session.think_ns(session.next_step())
    ctx.intended_log = []
    gap = session.think_ns(session.next_step())
    assert ctx.intended_log == [("think", 2, gap)]


async def test_a_late_wake_up_is_booked_as_dispatch_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    """wait_until books how late the loop woke the sleeper: the generator-health signal. Its
    clock is scripted, so the lateness is exactly what the test says, on any machine: it
    reads 20 ms before the deadline when it goes to sleep, 150 ms past it once woken."""
    ctx = make_ctx(MemorySubstrate())
    start = time.monotonic_ns()
    deadline = start + 20_000_000
    readings = [start, deadline + 150_000_000]
    clock = SimpleNamespace(
        monotonic_ns=lambda: readings.pop(0) if readings else time.monotonic_ns()
    )
    monkeypatch.setattr(context_module, "time", clock)
    assert await ctx.wait_until(deadline)
    assert readings == []  # both readings were its own
    lag = ctx.recorder.totals().row("generator", "DispatchLag").start_lag
    assert lag.count == 1
    assert 100.0 <= lag.quantile(1.0) <= 200.0  # ms: woken 150 ms after its deadline
    ctx.stopping.set()
    assert not await ctx.wait_until(time.monotonic_ns() + 10_000_000)
    assert ctx.recorder.totals().row("generator", "DispatchLag").count == 1  # stops: no booking


# ------------------------------------------------------------------------- review fixes
class LateCreateSubstrate(MemorySubstrate):
    """CreateActor lands on the substrate, but the answer never reaches the client."""

    async def create_actor(self, atespace: str, name: str, tns: str, tname: str) -> ActorInfo:
        self.actors[name] = "SUSPENDED"
        raise SubstrateError("TIMEOUT", "no answer within the timeout")


async def test_an_unanswered_create_is_still_cleaned_up() -> None:
    sub = LateCreateSubstrate()
    ctx = make_ctx(sub)
    with pytest.raises(StepFailed):
        await Session(ctx, 0).start(0)
    assert ctx.ledger.live == ["agent-0"]  # it may exist: cleanup must look
    leaks = await ctx.ledger.cleanup(sub, concurrency=2, timeout=5)
    assert leaks == [] and sub.deleted == ["agent-0"] and sub.actors == {}


async def test_a_refused_create_is_retried_until_the_session_starts() -> None:
    from agentsession_core.engine.populations.base import Population

    sub = MemorySubstrate()
    busy = SubstrateError("RESOURCE_EXHAUSTED", "no room", status=429)
    sub.fail["create"] = [busy, busy]
    ctx = make_ctx(sub)
    population = Population(ctx)
    session = population.new_session()
    assert await population.start_session(session, 0, prime=False)
    assert session.created and sub.actors == {"agent-0": "SUSPENDED"}
    create = totals(ctx, "grpc", "CreateActor")
    assert (create.count, create.failures) == (3, 2)
    assert ctx.ledger.live == ["agent-0"] and ctx.ledger.created == 1


async def test_a_failed_explicit_resume_is_a_failed_wake() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub, {"resume_mode": "explicit"})
    session = await started(ctx)
    sub.fail["resume"] = [SubstrateError("UNAVAILABLE", "try later", status=503)]
    with pytest.raises(StepFailed):
        await session.wake(0, time_to_wake=True)
    assert totals(ctx, "http", "WakeFirstTouch").failures == 1
    assert totals(ctx, "rps", "TimeToWake").failures == 1
    assert not session.awake


async def test_a_park_of_a_crashed_actor_replaces_it() -> None:
    sub = MemorySubstrate()
    ctx = make_ctx(sub)
    session = await started(ctx)
    await session.wake(0)
    sub.fail["suspend"] = [SubstrateError("ABORTED", "actor crashed", status=409)]
    assert await session.hibernate()  # the replacement is started and parked
    assert session.actor == "agent-0-r1" and sub.actors == {"agent-0-r1": "SUSPENDED"}
