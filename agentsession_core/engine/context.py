"""What every session of one run shares: the RunContext (substrate, recorder, script,
parameters, ledger), the stop flag and the one clock.

`RunContext.wait_until` is the only way a session sleeps towards an intended time, so a stop
wakes every sleeper at once and every late wake is booked as dispatch lag. `surface` keeps
the first message of each misconfiguration code for status.json, and a refused credential
stops the run at once (`fatal`): no retry can fix it, and every request after it would only
fill the failure rows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from agentsession_core.engine.failure_log import FailureLog
from agentsession_core.engine.ledger import ActorLedger
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.script_mix import ScriptPart, parts_of
from agentsession_core.engine.worker_pools import PoolDraw
from agentsession_core.log_limit import LogLimiter
from agentsession_core.measure.health import DISPATCH_LAG_ROW
from agentsession_core.script.mix import ScriptMix
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.interface import Substrate

if TYPE_CHECKING:
    from agentsession_core.measure.recorder import Recorder, Row
    from agentsession_core.script import Script

log = logging.getLogger("agentsession")


class Parked(Protocol):
    """What a read-back of a park sees of its session (engine/park_check.py)."""

    id: int
    actor: str
    wakes: int
    not_suspended: bool


class ParkReadBack(Protocol):
    """A run's read-back of a sample of parks, as its sessions and engine use it
    (engine/park_check.py ParkCheck)."""

    def after_park(self, session: Parked) -> None: ...

    def stop(self) -> None: ...


# Requests answered "never servable" (INVALID_ARGUMENT, 400, 413: docs/SPEC.md §3.4) in a row
# across the run, with no step succeeding in between, before the run ends as misconfigured:
# no retry and no replacement can fix such a request, and every step would only repeat it.
MISCONFIGURED_GIVE_UP = 10


# Once a second the gauges are sampled this far into the second, half a second from a
# turnover's ticks (on whole seconds: steady_start), and the second is closed (flushed) this
# long after it ends. Sampled at the flush, just after a tick, they caught every tick's swaps
# with their wakes in flight and booked them as resident gaps the ticks never saw: 14-24
# resident-seconds of shortfall in a sharded run's gauges where its stats.jsonl booked 0-2,
# and 553 against 355 in an unsharded 30-minute ate soak whose latency faults made wakes
# slow (issue 18).
GAUGE_SAMPLE_AT_NS = 500_000_000
FLUSH_AFTER_NS = 20_000_000


async def one_second(recorder: Recorder, sample: Callable[[], None]) -> None:
    """One beat of a run's (or a shard's) reporter: `sample` the gauges mid-second, unless
    that moment has passed (the second then keeps the last sample: gauges hold), then sleep
    until just after the second ends, when the caller closes it."""
    second = recorder.second_of(now_ns())
    middle = recorder.mono_ns_of_second(second) + GAUGE_SAMPLE_AT_NS
    if now_ns() < middle:
        await asyncio.sleep((middle - now_ns()) / 1e9)
        sample()
    boundary = recorder.mono_ns_of_second(second + 1) + FLUSH_AFTER_NS
    await asyncio.sleep(max(0.0, (boundary - now_ns()) / 1e9))


def now_ns() -> int:
    return time.monotonic_ns()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class StopSignal(asyncio.Event):
    """The run's stop flag: an Event that, when set, also wakes every RunContext.wait_until
    sleeper directly."""

    def __init__(self) -> None:
        super().__init__()
        self.sleepers: set[asyncio.Future[None]] = set()

    def set(self) -> None:
        super().set()
        for wake in list(self.sleepers):
            _resolve(wake)


@dataclass
class RunContext:
    """What every session of one run shares."""

    substrate: Substrate
    recorder: Recorder
    script: Script | ScriptMix  # one script, or the run's mix (docs/SPEC.md §1.6)
    params: RunParams
    atespace: str
    ledger: ActorLedger
    stopping: StopSignal = field(default_factory=lambda: StopSignal())
    misconfigured: dict[str, str] = field(default_factory=dict)  # code -> first message
    fatal: str | None = None  # why the run must stop (a credential, a bad request), set once
    # Misconfigured answers since the last step that succeeded (Session.run_step resets it).
    refused_in_a_row: int = 0
    # Opt-in record of the schedule drawn from the seeded streams, as (what, session id,
    # nanoseconds): think gaps and turn arrivals (offset from the steady start). None in
    # normal runs, so the hot path pays one `is None` test.
    intended_log: list[tuple[str, int, int]] | None = None
    # Turnover and turns register their sessions: first parks are booked *_Register, so
    # SuspendActor / SuspendActorAsync hold only the population's own parks (docs/SPEC.md §4.2).
    registers: bool = False
    # Sessions run step 1 as soon as their actor serves, so it holds real state before its
    # first think (docs/SPEC.md §4.2 registration rule; closed in lifecycle none too). A
    # replacement starts the same way.
    primes: bool = False
    failure_log: FailureLog = field(default_factory=FailureLog)
    # EnsureAtespace calls after the first, each for a CreateActor answered NOT_FOUND: the
    # substrate lost its state (Session.start).
    atespace_remade: int = 0
    # "<old> replaced by <new>": one a replacement, thousands a minute when a substrate
    # fails under load, so a few are shown and the rest summed up.
    replacements: LogLimiter = field(default_factory=lambda: LogLimiter("replacements"))
    # Actor names are `<actor_prefix>-<session id>`; the shards of a sharded run each have
    # their own prefix, so their names never collide in the shared atespace.
    actor_prefix: str = "agent"
    # The first session's id: a lost shard's sessions carried on by a survivor keep theirs.
    first_session: int = 0
    # When the steady load starts (see steady_start); set by a shard of a sharded run and in
    # a paired run (both arms start in one second).
    common_t0: Callable[[], Awaitable[int]] | None = None
    # A paired run's arm: how far into each second of the steady load its tick lies
    # (engine/reference_arm.py ArmOrder: the arms take turns going first); None: on the second.
    tick_phase: Callable[[int], int] | None = None
    # The script of each session id (engine/script_mix.py assign) in a mix; None: all run
    # the one script. Ids past its end (a closed population grown by a level) repeat it.
    labels: Sequence[int] | None = None
    # A sample of parks read back in implicit mode (park_check.py); None: not checked.
    park_check: ParkReadBack | None = None
    dispatch_lag: Row = field(init=False)
    # Each actor name's worker pool (target.worker_pools; None: no pools, no selector).
    pools: PoolDraw | None = field(init=False)
    mix: ScriptMix = field(init=False)
    parts: tuple[ScriptPart, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.mix = self.script if isinstance(self.script, ScriptMix) else ScriptMix.of(self.script)
        self.parts = parts_of(self.mix)
        # How late the loop wakes a sleeper past its intended time: the generator-health
        # signal that judges a window void (telemetry.GeneratorHealth).
        self.dispatch_lag = self.recorder.row(*DISPATCH_LAG_ROW)
        self.pools = PoolDraw.of(self.params.seed, self.params.target.worker_pools)

    def part_of(self, sid: int) -> ScriptPart:
        """The script session `sid` runs, with its rows."""
        if self.labels is None or not self.labels:
            return self.parts[0]
        # By position in this engine's sessions (a carried-on part's ids start past 0).
        return self.parts[self.labels[(sid - self.first_session) % len(self.labels)]]

    async def steady_start(self) -> int:
        """The intended start of the steady load (the fill is done): the next whole second,
        or in a sharded or paired run the common t0 given once every shard or arm has filled
        (a whole second too); a paired arm's first tick lies its phase into it (tick_time).
        It may lie ahead: the populations schedule from it and sleep towards it. On whole
        seconds, a turnover's ticks lie half a second from the gauges' samples
        (GAUGE_SAMPLE_AT_NS)."""
        if self.common_t0 is not None:
            return await self.common_t0() + self._phase(0)
        rec = self.recorder
        return rec.mono_ns_of_second(rec.second_of(now_ns()) + 1)

    def tick_time(self, start_ns: int, tick: int, tick_ns: int) -> int:
        """The intended time of a ticking population's tick `tick` (from 0) when its first
        lies at `start_ns` (steady_start): whole ticks on, and a paired arm's tick where the
        arm order puts it in that second (the same count of ticks in every second)."""
        return start_ns + tick * tick_ns + self._phase(tick) - self._phase(0)

    def _phase(self, tick: int) -> int:
        return self.tick_phase(tick) if self.tick_phase is not None else 0

    async def wait_until(self, deadline_ns: int) -> bool:
        """Sleep until `deadline_ns` unless the run stops first; True when the deadline was
        reached. A think or an arrival gap can be minutes long, and stop must not wait it out."""
        delay = (deadline_ns - time.monotonic_ns()) / 1e9
        if self.stopping.is_set():
            return False
        if delay <= 0:
            return True
        stopping = self.stopping
        # One timer per sleeper; StopSignal.set wakes them all. (wait_for(Event.wait()) costs
        # a task per sleep and an O(waiters) removal from the Event on every timeout: with
        # 20k sleeping sessions that alone stalled the loop for seconds at 2k turns/s.)
        loop = asyncio.get_running_loop()
        wake = loop.create_future()
        timer = loop.call_later(delay, _resolve, wake)
        stopping.sleepers.add(wake)
        try:
            await wake
        finally:
            timer.cancel()
            stopping.sleepers.discard(wake)
        if stopping.is_set():
            return False
        woke = time.monotonic_ns()
        self.dispatch_lag.ok(deadline_ns, woke, woke)
        return True

    def summarise_logs(self, *, force: bool = False) -> None:
        """Sum up the log lines held back (failures, replacements) once their interval is
        over, or now when forced (at the end of the run)."""
        self.failure_log.summarise(force=force)
        self.replacements.summarise(force=force)

    def surface(self, exc: SubstrateError, where: str) -> None:
        """INVALID_ARGUMENT / UNAUTHENTICATED / PERMISSION_DENIED / 401 / 403 mean the run
        itself is wrong: say so loudly, once per code, and keep it for status.json. A refused
        credential also stops the run, with one line naming the problem; so do
        MISCONFIGURED_GIVE_UP requests no actor can serve with no step succeeding in between
        (docs/SPEC.md §3.4)."""
        if exc.code not in self.misconfigured:
            self.misconfigured[exc.code] = f"{where}: {exc}"
            log.error("MISCONFIGURED run: %s: %s", where, exc)
        if exc.credential_refused and self.fatal is None:
            self.fatal = credential_refused_line(exc, where)
            log.error("%s", self.fatal)
            self.stopping.set()
            return
        self.refused_in_a_row += 1
        if self.refused_in_a_row >= MISCONFIGURED_GIVE_UP and self.fatal is None:
            self.fatal = (
                f"misconfigured: {self.refused_in_a_row} requests in a row refused as never "
                f"servable, no step succeeding in between; the last: {where}: {exc}"
            )
            log.error("%s", self.fatal)
            self.stopping.set()


def credential_refused_line(exc: SubstrateError, where: str) -> str:
    """The one line that ends a run whose credential the substrate refused."""
    who = exc.by or (f"the router (HTTP {exc.status})" if exc.status else "the control API")
    check = exc.check or (
        "target.token (or AGENTSESSION_TOKEN, or the Secret block target.token_secret names), "
        "target.token_file, or the client certificate (target.cert_file/key_file)"
    )
    return f"credentials refused by {who}: {where}: {exc}; check {check}"
