"""turnover (docs/SPEC.md §4.2): keep `awake` sessions resident and swap R per second with parked
ones, and keep the resident set at `awake` whatever fails.

Ticks run on intended times (t0 + k seconds) and never wait for the previous tick: each park
and each wake is its own task. A swap parks the longest-idle resident that is not inside a
step and wakes the longest-parked session, which runs its next scripted step while busy.
TimeToWake (the rps/TimeToWake row) is measured from the tick's intended time to the woken
actor's first answer. When fewer idle residents or parked sessions exist than the tick asks
for, the shortfall is booked as turnover/Backlog events, never silently absorbed.

The resident set holds its size. Residents are the sessions whose actor is awake: the idle ones
and the woken ones inside their step. A wake claims its slot when it starts (as the park it
is paired with gives one up), so the conductor never wakes twice for one slot, but its
session is a resident only once the actor answered: a wake stuck waiting for a worker is a
gap. A failed wake gives its slot back and a failed park keeps its session resident, so each
tick:
  1. books the gap the last second left, awake − residents (at least 0), as a
     `turnover`/ResidentShortfall event: a figure thresholds judge (docs/SPEC.md §6);
  2. parks sessions above `awake` (failed parks, retried first) without a paired wake;
  3. wakes the slots owed to the set (neither resident nor claimed by a wake), at most
     max(1, ceil(catch_up_ratio × swaps per tick)) on top of its swaps: a burst of failures
     is made good over a few ticks without exceeding the configured rate by more than that
     bounded catch-up;
  4. starts its swaps: park and wake together, or, once a park failed and until one parks
     again, the wake after its park and only if it parked (_swap_in_turn), so failing parks
     beside succeeding wakes do not grow the set past `awake`.
A woken session whose step fails stays resident (only the conductor parks); one that has to
be replaced comes back parked and its slot is owed like a failed wake's.

swap_pacing `even` spreads a tick's swaps over the tick (swap j at tick + j·tick/R), each
from its own intended time: a burst of R swaps on one instant costs R swaps' worth of the
generator's CPU in start lag (about 0.3 ms each on the ate wire, bench/RESULTS.md), so above
a few dozen swaps a second only an even pace keeps start lag to milliseconds.

After an outage (the watchdog saw the substrate stop answering, then answer again), the
residents are checked against what the substrate runs (ListActors): a substrate that
restarted lost what was in its workers, and a resident whose actor is crashed, gone or parked
is no resident. Its slot is owed at once (booked as ResidentShortfall), a crashed or gone
actor (a resident's or a parked session's) is replaced, fill_concurrency at a time, and the
ticks wake the owed slots at the catch-up rate. Without the check the engine would count a
dead actor as awake until it next happened to park it, and wake the parked sessions of a
substrate that lost its state one failed wake at a time. The check runs again 1 s and 3 s
later (CHECK_AFTER_S): a session inside a step, or moving, during one pass is judged by the
next, once its step has ended on the actor the restart lost.

A mix of scripts (docs/SPEC.md §1.6) keeps each script's share of the resident set: its quota
is how many of the first `awake` sessions run it (engine/script_mix.py assign: exact shares),
the fill and the owed wakes fill each script up to its quota, a park above quota parks that
script's longest-idle resident, and each swap parks and wakes within one script, the scripts
dealt their swaps by quota (script_mix.Dealer: exact over every `awake` swaps). A script
whose quota is 0 is never woken after registration. With one script all of this is the plain
rule above.

Fill: `awake` sessions are woken, fill_concurrency at a time; a failed fill wake is retried
(with the next parked session, after a short backoff) until the set is full or the fill
deadline passes. A fill that ends short says so in one line, which the run carries
(`problem`); the ticks then wake the owed sessions at the catch-up rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from typing import TYPE_CHECKING, Any

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.population_params import TurnoverParams, settings_of
from agentsession_core.engine.populations.base import Population, failure_line
from agentsession_core.engine.populations.turnover_window import level_rows
from agentsession_core.engine.script_mix import Dealer
from agentsession_core.engine.session import Session, StepFailed, Stopped
from agentsession_core.measure.stats import BACKLOG_ROW, RESIDENT_SHORTFALL_ROW
from agentsession_core.substrate.errors import FailureClass, SubstrateError

if TYPE_CHECKING:
    from agentsession_core.measure.recorder import Recorder

log = logging.getLogger("agentsession")

FILL_DONE_MARKER = "agentsession: turnover fill done"
TICK_NS = 1_000_000_000
NS_PER_S = 1_000_000_000
FILL_RETRY_BACKOFF_S = 0.2  # a fill slot whose wake failed waits this long before the next
# The passes of the check after an outage, from when the substrate answers again (the doc).
CHECK_AFTER_S = (0.0, 1.0, 3.0)
# What the substrate may say of an actor that still holds a worker: a resident's.
SERVING = ("RUNNING", "RESUMING")
DEAD = (None, "CRASHED")  # not listed, or crashed: replaced (docs/SPEC.md §3.4)
# A turnover whose resident set averaged a larger gap than this share of `awake` did not hold
# the load it was asked for (the default ResidentShortfall threshold uses the same bound).
RESIDENT_TOLERANCE = 0.02


def shortfall_line(mean: float, awake: int, over: str) -> str:
    """The one line of a turnover whose resident set averaged short."""
    return (
        f"turnover: the resident set averaged {awake - mean:.1f} of {awake} sessions over "
        f"{over} (ResidentShortfall mean {mean:.2f}, more than {RESIDENT_TOLERANCE:.0%} of awake)"
    )


class TurnoverPopulation(Population):
    kind = "turnover"

    @property
    def settings(self) -> TurnoverParams:
        """This population's own settings (its kind's model)."""
        return settings_of(self.ctx.params.population, TurnoverParams)

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        params = settings_of(ctx.params.population, TurnoverParams)
        self.awake = params.awake
        self.idle: deque[Session] = deque()  # awake, not in a step; oldest first
        self.parked: deque[Session] = deque()  # hibernated; longest parked first
        self.waking: set[Session] = set()  # wakes in flight (with their step): slots claimed
        self.turnover_start_ns: int | None = None
        self.swaps_started = 0
        self.tick_ns = TICK_NS  # one tick a second (tests shorten it)
        self.segments: list[tuple[int, float]] = []  # (start, level multiplier) per level
        self.fill_short: str | None = None  # the fill's one line when it ended short
        self.last_wake_failure: str | None = None
        self.shortfall_total = 0  # Σ ResidentShortfall over the ticks so far
        self.ticks = 0
        self._filling = False
        self._checking = False  # a check of the residents after an outage is under way
        # The last park failed: swaps park first and wake after (_swap_in_turn) until one parks.
        self._parks_failing = False
        # Residents wanted per script (module docstring), and who gets the next swap.
        self.mixed = ctx.mix.mixed
        self.quota = self._quota(self.awake)
        self._dealer = Dealer(self.quota)
        self._fill_claimed: list[int] = []
        self._shortfall = ctx.recorder.row(*RESIDENT_SHORTFALL_ROW)
        self._backlog = ctx.recorder.row(*BACKLOG_ROW)
        ctx.registers = True
        ctx.primes = params.awake > 0 or params.lifecycle_mode == "none"

    @property
    def claimed(self) -> int:
        """Slots held or being woken into: what the conductor fills up to `awake`."""
        return len(self.idle) + len(self.waking)

    def claimed_by_script(self) -> list[int]:
        """`claimed`, per script (an O(awake) count: a mix only)."""
        if not self.mixed:
            return [self.claimed]
        out = [0] * len(self.quota)
        for session in (*self.idle, *self.waking):
            out[session.part.index] += 1
        return out

    def _find(self, queue: deque[Session], part: int) -> int | None:
        """Where the first session of script `part` is in `queue` (None: there is none)."""
        if not self.mixed:
            return 0 if queue else None
        for i, session in enumerate(queue):
            if session.part.index == part:
                return i
        return None

    @staticmethod
    def _pop(queue: deque[Session], at: int) -> Session:
        if at == 0:
            return queue.popleft()
        session = queue[at]
        del queue[at]
        return session

    def _take(self, queue: deque[Session], part: int) -> Session | None:
        at = self._find(queue, part)
        return None if at is None else self._pop(queue, at)

    def _fill_pick(self) -> Session | None:
        """The longest-parked session whose script is below its quota."""
        if not self.mixed:
            return self.parked.popleft()
        for i, session in enumerate(self.parked):
            part = session.part.index
            if self._fill_claimed[part] < self.quota[part]:
                self._fill_claimed[part] += 1
                return self._pop(self.parked, i)
        return None

    @property
    def residents(self) -> int:
        """Sessions whose actor is awake: the idle ones and the woken ones (docs/SPEC.md §4.2)."""
        return len(self.idle) + sum(1 for s in self.waking if s.awake)

    # ------------------------------------------------------------ registration and fill
    async def register(self) -> None:
        await self.register_all(prime=self.ctx.primes)
        for session in self.sessions:
            if session.created:
                self.parked.append(session)

    async def fill(self) -> None:
        """Wake `awake` sessions (retrying failed wakes until the deadline), then tick."""
        params = self.settings
        self._filling = True
        if params.lifecycle_mode == "none":
            self._fill_claimed = self.claimed_by_script()
            while self.parked and len(self.idle) < self.awake:
                if (session := self._fill_pick()) is None:
                    break
                self.idle.append(session)
        else:
            await self._fill(params.fill_deadline(), params.fill_concurrency)
        if self.ctx.stopping.is_set():
            return
        log.info(FILL_DONE_MARKER)
        # In a sharded run the common t0 (once every shard filled), which may lie ahead.
        self.steady_start_ns = self.turnover_start_ns = await self.ctx.steady_start()
        self.segments = [(self.turnover_start_ns, self.level_multiplier)]
        self.spawn(self._tick_forever(self.turnover_start_ns), "turnover-ticks")

    async def _fill(self, deadline_s: float, concurrency: int) -> None:
        deadline = now_ns() + int(deadline_s * NS_PER_S)
        gate = asyncio.Semaphore(concurrency)
        changed = asyncio.Event()
        self._fill_claimed = self.claimed_by_script()
        while not self.ctx.stopping.is_set() and len(self.idle) < self.awake:
            left = (deadline - now_ns()) / NS_PER_S
            if left <= 0 or (not self.parked and not self.waking):
                break
            if self.claimed < self.awake and self.parked and not gate.locked():
                session = self._fill_pick()
                if session is not None:
                    await gate.acquire()
                    self.waking.add(session)
                    self.spawn(self._fill_wake(session, gate, changed), f"fill-{session.id}")
                    continue
            changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, 1.0)):
                    await changed.wait()
        short = self.awake - len(self.idle)
        if short <= 0 or self.ctx.stopping.is_set():
            return
        if self.parked or self.waking:
            if self.last_wake_failure is not None:
                why = f"last failed wake: {self.last_wake_failure}"
            else:
                why = f"{len(self.waking)} wakes still waiting for an answer"
            how = f"at the {deadline_s:g} s fill deadline ({why})"
        else:
            how = "with no parked session left to wake"
        self.fill_short = (
            f"fill: {len(self.idle)} of {self.awake} sessions resident {how}; the turnover "
            f"starts {short} short and books the gap as turnover/ResidentShortfall every second"
        )
        log.error("%s", self.fill_short)

    async def _fill_wake(
        self, session: Session, gate: asyncio.Semaphore, changed: asyncio.Event
    ) -> None:
        try:
            try:
                await session.wake(now_ns(), time_to_wake=True)
            except StepFailed as failed:
                self.last_wake_failure = failure_line(failed)
                await session.handle(failed, park=False)
            except Stopped:
                pass
            finally:
                self.waking.discard(session)
                self._requeue(session)
                if self.mixed and not session.awake:  # its script's slot is free again
                    self._fill_claimed[session.part.index] -= 1
                changed.set()
            if not session.awake:  # back off before this slot tries the next session
                await asyncio.sleep(FILL_RETRY_BACKOFF_S)
        finally:
            gate.release()
            changed.set()  # the slot is free again

    # ------------------------------------------------------------ ticks
    def catch_up(self) -> int:
        """Owed wakes one tick may start on top of its swaps (docs/SPEC.md §4.2)."""
        per_tick = self.level * self.tick_ns / NS_PER_S
        return max(1, math.ceil(self.settings.catch_up_ratio * per_tick))

    async def _tick_forever(self, t0_ns: int) -> None:
        rate_owed = 0.0
        tick = 0
        while not self.ctx.stopping.is_set():
            # The first tick on t0 itself: a window [t0, t0 + n s) holds n ticks (t0 is a whole
            # second, so a tick on its last edge would fall in the next window).
            intended = self.ctx.tick_time(t0_ns, tick, self.tick_ns)
            tick += 1
            if not await self.ctx.wait_until(intended):
                return
            if self.paused:  # by hand: no swap, no shortfall, nothing owed for this tick
                continue
            rate_owed += self.level * self.tick_ns / NS_PER_S
            swaps = int(rate_owed)
            rate_owed -= swaps
            self.tick(intended, swaps)

    def tick(self, intended_ns: int, swaps: int) -> None:
        """One tick: book the gap, park the excess, wake the owed, swap (module docstring)."""
        shortfall = max(0, self.awake - self.residents)
        self.ticks += 1
        self.shortfall_total += shortfall
        self._shortfall.event(intended_ns, shortfall)
        if self.settings.lifecycle_mode == "none":
            return  # nothing parks or wakes: the gauge of a density run only
        # Per script in a mix (module docstring); with one script, its one quota is `awake`.
        quota = self.quota if self.mixed else [self.awake]
        claimed = self.claimed_by_script()
        for part, wanted in enumerate(quota):
            for _ in range(claimed[part] - wanted):
                if (resident := self._take(self.idle, part)) is None:
                    break
                self._start_park(resident, intended_ns)
        owed_budget = self.catch_up()
        for part, wanted in enumerate(quota):
            for _ in range(min(wanted - claimed[part], owed_budget)):
                if (session := self._take(self.parked, part)) is None:
                    break
                owed_budget -= 1
                self._start_wake(session, intended_ns)
        if swaps > 1 and self.settings.swap_pacing == "even":
            self.spawn(self._paced_swaps(intended_ns, swaps), "turnover-pacer")
            return
        for _ in range(swaps):
            self._swap(intended_ns)

    async def _paced_swaps(self, intended_ns: int, swaps: int) -> None:
        """swap_pacing even: the tick's swaps at intended_ns + j·tick/swaps, each booked from
        its own intended time; every swap already due goes at once (a late loop catches up,
        it never drops a swap or restamps one)."""
        for j in range(swaps):
            due = intended_ns + j * self.tick_ns // swaps
            if due > now_ns() and not await self.ctx.wait_until(due):
                return
            self._swap(due)

    def _swap(self, intended_ns: int) -> None:
        """One swap: park the longest-idle resident and wake the longest-parked session, of
        the script the dealer deals next in a mix."""
        part = self._dealer.next()
        out, into = self._find(self.idle, part), self._find(self.parked, part)
        if out is None or into is None:
            self._backlog.event(intended_ns)
            return
        resident, session = self._pop(self.idle, out), self._pop(self.parked, into)
        self.swaps_started += 1
        if self._parks_failing:
            self._start_swap_in_turn(resident, session, intended_ns)
            return
        self._start_park(resident, intended_ns)
        self._start_wake(session, intended_ns)

    def _start_park(self, session: Session, intended_ns: int) -> None:
        self.spawn(self._park(session, intended_ns), f"park-{session.id}")

    def _start_wake(self, session: Session, intended_ns: int) -> None:
        self.waking.add(session)  # the slot is claimed now, whatever the wake's answer
        self.spawn(self._wake(session, intended_ns), f"wake-{session.id}")

    def _start_swap_in_turn(self, out: Session, into: Session, intended_ns: int) -> None:
        self.waking.add(into)  # claims the slot `out` is to give up, so no tick wakes for it
        self.spawn(self._swap_in_turn(out, into, intended_ns), f"swap-{out.id}-{into.id}")

    async def _swap_in_turn(self, out: Session, into: Session, intended_ns: int) -> None:
        """A swap while parks fail: the wake waits for its park and is not sent when the park
        failed. Sent together, a wake that succeeds beside a park that fails grows the set past
        `awake`, a second's swaps at a time: on the ate wire the router serves again seconds
        before gRPC has reconnected, and the surplus of real residents then hid the residents
        the restart lost (docs/SPEC.md §4.2). TimeToWake still runs from the tick."""
        try:
            parked = await self._park(out, intended_ns)
        except BaseException:
            self.waking.discard(into)
            self.parked.appendleft(into)
            raise
        if parked:
            await self._wake(into, intended_ns)
            return
        self.waking.discard(into)
        self.parked.appendleft(into)  # still the longest parked: the next swap takes it
        if not self.ctx.stopping.is_set():
            self._backlog.event(intended_ns)  # a swap the tick asked for and did not make

    async def _park(self, session: Session, intended_ns: int) -> bool:
        # After stop hibernate sends nothing (the stop guard), so a swap whose tick fired just
        # before stop is either whole or not started.
        await session.hibernate(intended_ns=intended_ns)
        if session.awake:
            self.idle.appendleft(session)  # still resident: the next tick parks it first
            if not self.ctx.stopping.is_set():
                self._parks_failing = True
            return False
        self.parked.append(session)
        self._parks_failing = False
        return True

    async def _wake(self, session: Session, intended_ns: int) -> None:
        try:
            await session.turn(intended_ns, first_touch=False, time_to_wake=True, park=False)
        except Stopped:
            pass
        finally:
            self.waking.discard(session)
            if session.wake_given_up and not self.ctx.stopping.is_set():
                self.spawn(self._park_given_up(session), f"park-{session.id}")
            else:
                self._requeue(session)

    def _requeue(self, session: Session) -> None:
        """Back among the residents or the parked sessions, as its actor now is."""
        (self.idle if session.awake else self.parked).append(session)

    async def _park_given_up(self, session: Session) -> None:
        """A wake the client gave up on (no answer in time) may still complete on the
        substrate, and its actor would then hold a worker that no resident counts until the
        session is next woken (minutes, at sessions / rate). It is parked (SuspendActor, a
        no-op for an actor that never woke) before it joins the parked sessions; a park that
        fails is re-driven by its next turn."""
        try:
            await session.hibernate()
        finally:
            self._requeue(session)

    # ------------------------------------------------------------ after an outage
    def substrate_back(self) -> None:
        if self.turnover_start_ns is None or self._checking or self.ctx.stopping.is_set():
            return  # the fill's own wakes find out; one check at a time
        if self.settings.lifecycle_mode == "none":
            return  # nothing is ever woken again in a density run: no slot to make good
        self._checking = True
        self.spawn(self._check_actors(), "check-actors")

    async def _check_actors(self) -> None:
        """The check after an outage, in passes (module docstring)."""
        try:
            waited = 0.0
            for after in CHECK_AFTER_S:
                await asyncio.sleep(after - waited)
                waited = after
                if self.ctx.stopping.is_set():
                    return
                await self._check_once()
        finally:
            self._checking = False

    async def _check_once(self) -> None:
        """Residents and parked sessions against ListActors. Only sessions in the same place
        (and on the same actor) before and after the call are judged: one that moved meanwhile
        was parked, woken or replaced on the way, and the list says nothing about its new
        state (the next pass judges it)."""
        before = {s: s.actor for s in (*self.idle, *self.parked)}
        try:
            listed = await self.ctx.substrate.list_actors(self.ctx.atespace)
        except SubstrateError as exc:
            if exc.failure_class is not FailureClass.REPLACE:  # not "the atespace is gone"
                log.warning("after the outage: ListActors failed (%s): not checked", exc)
                return
            listed = []
        status = {actor.name: actor.status for actor in listed}

        def unchanged(session: Session) -> bool:
            return before.get(session) == session.actor

        lost = {s for s in self.idle if unchanged(s) and status.get(s.actor) not in SERVING}
        # A parked session whose actor is gone or crashed would fail its next wake: it is
        # replaced now, before a tick picks it.
        gone = {s for s in self.parked if unchanged(s) and status.get(s.actor) in DEAD}
        if not lost and not gone:
            return
        self.idle = deque(s for s in self.idle if s not in lost)
        self.parked = deque(s for s in self.parked if s not in gone)
        dead = [s for s in lost if status.get(s.actor) in DEAD]
        log.warning(
            "after the outage: %d of %d residents no longer ran on the substrate (%d "
            "crashed or gone) and %d parked actors were gone or crashed: replacing them; "
            "the residents' gap is booked as ResidentShortfall and woken again at the "
            "catch-up rate",
            len(lost),
            len(lost) + len(self.idle),
            len(dead),
            len(gone),
        )
        for session in lost.difference(dead):  # parked by the substrate (a clean stop)
            session.awake = False
            session.needs_hibernate = False
            session.state = "parked"
            self.parked.append(session)
        # Bounded like the fill: each replacement primes its actor on a worker.
        gate = asyncio.Semaphore(self.settings.fill_concurrency)
        for session in sorted((*dead, *gone), key=lambda s: s.id):
            self.spawn(self._replace_lost(session, gate), f"replace-{session.id}")

    async def _replace_lost(self, session: Session, gate: asyncio.Semaphore) -> None:
        """An actor that died with the substrate: a fresh one, parked, to be woken like any
        other parked session (a resident's slot is owed meanwhile)."""
        try:
            async with gate:
                await session.replace()
        finally:
            self._requeue(session)

    # ------------------------------------------------------------ levels, gauges, summary
    def set_level(self, multiplier: float) -> None:
        super().set_level(multiplier)
        if self.turnover_start_ns is not None:
            self.segments.append((now_ns(), multiplier))

    def _quota(self, awake: int) -> list[int]:
        """Residents wanted per script: the scripts of the first `awake` sessions (their
        assignment makes these shares exact, engine/script_mix.py)."""
        quota = [0] * len(self.ctx.parts)
        for i in range(awake):
            quota[self.ctx.part_of(self.ctx.first_session + i).index] += 1
        return quota

    def set_awake(self, count: int) -> None:
        """Resize the resident set (a density search's level, docs/SPEC.md §6.7): a larger
        one is woken into at once, a smaller one parks its excess at the next tick."""
        self.awake = max(0, count)
        if self.mixed:
            self.quota = self._quota(self.awake)
        if self.turnover_start_ns is None or self.settings.lifecycle_mode == "none":
            return
        intended = now_ns()
        for _ in range(min(self.awake - self.claimed, len(self.parked))):
            self._start_wake(self.parked.popleft(), intended)

    def gauges(self) -> dict[str, dict[str, int]]:
        out = {"turnover_sessions": self.gauge()}
        if self._filling:
            residents = self.residents
            out["turnover_resident"] = {
                "resident": residents,
                "shortfall": max(0, self.awake - residents),
            }
        return out

    def gauge(self) -> dict[str, int]:
        """agentsession_turnover_sessions{state=awake|parked|waking|parking}."""
        counts = {"awake": 0, "parked": 0, "waking": 0, "parking": 0}
        for session in self.sessions:
            if session.state == "waking":
                counts["waking"] += 1
            elif session.state == "hibernating":
                counts["parking"] += 1
            elif session.awake:
                counts["awake"] += 1
            elif session.created:
                counts["parked"] += 1
        return counts

    def problem(self) -> str | None:
        """The fill's line, or a resident set that averaged short over the turnover."""
        if self.fill_short is not None:
            return self.fill_short
        if not self.ticks or not self.awake:
            return None
        mean = self.shortfall_total / self.ticks
        if mean <= RESIDENT_TOLERANCE * self.awake:
            return None
        return shortfall_line(mean, self.awake, f"{self.ticks} ticks")

    def summary_rows(self, recorder: Recorder) -> dict[str, dict[str, Any]]:
        """One `turnover_window` row per level (turnover_window.py)."""
        if self.turnover_start_ns is None:
            return {}
        params = self.settings
        return level_rows(
            recorder,
            self.segments,
            self.stopped_ns or now_ns(),
            target_rps=params.target_rps,
            awake=self.awake,
        )
