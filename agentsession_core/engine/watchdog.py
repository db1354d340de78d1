"""The substrate watchdog: notices a substrate that stopped answering (killed, network
gone) so the run fails with that reason instead of hammering a corpse until the hold ends;
and one that answers again after missed probes (restarted), so the population can check
what it believes of its actors against the substrate (`on_back`: Engine.substrate_back).
Once a probe went unanswered it probes every RETRY_S, so that return is seen promptly; an
outage shorter than the probe period can fall between two probes and go unseen, and what it
cost is then found as each actor is next touched.

The failure line says how long the substrate has really been silent: the time since its last
answer on the monotonic clock, not the probe count times the probe interval, since each
unanswered probe also waits out its own timeout (five of them took ~35 s, not 10 s). And it
names why the last probe failed, even when the exception's text is empty (a bare
TimeoutError): an empty pair of parentheses tells the person reading it nothing.

A probe can also go unanswered because the load generator's own event loop stalled (a CPU
starved process, a loop blocked for seconds, a SIGSTOP): the answer came, and nobody read
it in time. So each probe runs beside a short heartbeat, and a probe the loop ran late
during, by STALL_S or more at once, is the generator's miss, not the substrate's (issue 29:
a run failed in registration with "substrate unreachable for 39 s" while its loop lagged
0.5–1.5 s). The substrate is called unreachable only after MISSES probes in a row went
unanswered while the loop was on time. MISSES unanswered while it stalled, or the
threshold's worth of lateness over unanswered probes, or stalls of STALL_S or more adding up
to STALL_FAIL_S within the last STARVED_WINDOW_S (one stall that long at once, or a
generator starved rather than stopped: answered or not, the generator could not watch, and
all it had in flight measured its own delay) fail the run with a line that blames the
generator and says the substrate was not shown unreachable. Either failure is final:
`on_failure` hears it at once (the engine stops starting work, so registration sends no
further CreateActor, docs/SPEC.md §4.2).

The loop's lateness comes from one heartbeat (the pulse) that beats beside the watchdog for
its whole life, not only while a probe is out: a generator stopped 2 s and let run 20 ms,
over and over, had every probe answered within its deadline and no single stall near
STALL_FAIL_S, and the watchdog, sleeping in step with the stops, saw nothing for three
minutes while the progress line said SATURATED every second (issue 34).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from agentsession_core.engine.params import RunParams
from agentsession_core.substrate.errors import TIMEOUT, TRANSPORT, SubstrateError
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")

EVERY_S = 2.0
PROBE_TIMEOUT_S = 5.0  # one probe's own deadline
# Gone: MISSES probes in a row unanswered, and silent for as long as MISSES probes EVERY_S
# apart take (probes come faster once one was missed).
MISSES = 5
# After a miss it is probed this often (at most EVERY_S), so its return is seen within half a
# second: until then the population cannot check what the outage cost it.
RETRY_S = 0.5
# The heartbeat beside each probe, and the lateness at once that makes a miss the generator's
# (a tenth of the probe's deadline: a loop that late cannot be relied on to read an answer
# within that deadline, each request needing several turns of it).
BEAT_S = 0.05
STALL_S = PROBE_TIMEOUT_S / 10
# A loop stalled this long at once (the watchdog's own threshold) fails the run, answers or
# not: the generator could not watch the substrate, and every request in flight meanwhile
# measured the generator's delay. So do stalls of STALL_S or more that add up to it within
# STARVED_WINDOW_S: half its time stopped is a generator that cannot keep time, whether it
# was stopped once or over and over (docs/SPEC.md §4.2). A loop that is merely busy runs late
# by milliseconds a turn, far below STALL_S, and never adds up here.
STALL_FAIL_S = MISSES * EVERY_S
STARVED_WINDOW_S = 2 * STALL_FAIL_S


class Watchdog:
    def __init__(
        self,
        substrate: Substrate,
        params: RunParams,
        *,
        on_back: Callable[[], None] | None = None,
        on_failure: Callable[[str, bool], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`on_back`: the substrate answers again after missed probes; `on_failure(line,
        unreachable)`: the watchdog failed the run (`unreachable`: the substrate's fault,
        else the generator's stalled loop)."""
        self.substrate = substrate
        self.params = params
        self.on_back = on_back
        self.on_failure = on_failure
        self.clock = clock
        self.failure: str | None = None
        self.unreachable = False  # the failure is the substrate's (not the generator's)
        self.outages = 0  # times it stopped answering, then answered again
        self.stopped = False
        # The substrate's last answer to a probe (on the monotonic clock the recorder's
        # windows use; preflight's answer just before the watchdog starts counts as one), and
        # how many probes in a row have gone unanswered since.
        self.answered_ns = time.monotonic_ns()
        self.missed = 0

    def stop(self) -> None:
        """Watch no more and say nothing more (the run was refused)."""
        self.stopped = True

    async def run(self) -> None:
        pulse = _Pulse()
        heart = asyncio.create_task(pulse.run(), name="watchdog-pulse")
        try:
            await self._watch(pulse)
        finally:
            heart.cancel()
            await asyncio.gather(heart, return_exceptions=True)

    async def _watch(self, pulse: _Pulse) -> None:
        since = _Since(self.clock())  # what happened since the last answer
        while self.failure is None and not self.stopped:
            interval = min(RETRY_S, EVERY_S) if since.misses else EVERY_S
            await asyncio.sleep(interval)
            if self.stopped:
                return
            since.late(*pulse.take())  # how late the loop ran while we slept
            if self._could_not_keep_time(since, pulse):
                return
            exc = await self._probe()
            if self.stopped:
                return
            late, worst = pulse.take()
            since.late(late, worst)
            if exc is not None and unanswered(exc):
                if worst >= STALL_S:
                    since.stalled += 1
                else:
                    since.clean += 1
                self.missed = since.misses
                since.silent = self.clock() - since.answered
                if self._could_not_keep_time(since, pulse, exc):
                    return
                if since.failed():
                    self._fail(since, exc)
                continue
            # It answered, even if with an error: it is alive.
            self.answered_ns, self.missed = time.monotonic_ns(), 0
            if self._could_not_keep_time(since, pulse):  # but the generator was not
                return
            if since.misses:
                silent = self.clock() - since.answered
                if since.clean:
                    self.outages += 1
                    log.warning("substrate answers again after %.1f s without an answer", silent)
                else:
                    log.warning(
                        "the watchdog's probes went unanswered for %.1f s while the load "
                        "generator's event loop stalled (%.1f s late in all, %.1f s at once); "
                        "the substrate answers",
                        silent,
                        since.late_s,
                        since.worst,
                    )
                if self.on_back is not None:  # what the actors hold may have changed meanwhile
                    self.on_back()
            since = _Since(self.clock())

    def silent_since(self, start_ns: int) -> str | None:
        """One line when the substrate has answered no probe since `start_ns` and the
        latest went unanswered: whatever was measured since then is an outage, not the
        substrate's answer to the load (a capacity probe run against a substrate already
        dead is no break, issue 38). None when it answered since, or no probe was missed."""
        if not self.missed or self.answered_ns >= start_ns:
            return None
        silent = (time.monotonic_ns() - self.answered_ns) / 1e9
        return (
            f"the substrate answered none of the watchdog's probes for {silent:.0f}s "
            f"({self.missed} in a row unanswered), since before this window began"
        )

    async def _probe(self) -> Exception | None:
        """One probe with its own deadline: what it raised, None when answered."""
        namespace, name = self.params.target.template_ref
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await self.substrate.get_template(namespace, name)
        except (SubstrateError, TimeoutError) as exc:
            return exc
        return None

    def _could_not_keep_time(
        self, since: _Since, pulse: _Pulse, exc: Exception | None = None
    ) -> bool:
        """The loop stalled STALL_FAIL_S at once, or that long in all over the last
        STARVED_WINDOW_S: fail the run as the generator's (True)."""
        stalled, stalls = pulse.stalled_recently()
        if since.worst < STALL_FAIL_S and stalled < STALL_FAIL_S:
            return False
        self._fail(since, exc, starved=(stalled, stalls))
        return True

    def _fail(
        self,
        since: _Since,
        exc: Exception | None,
        *,
        starved: tuple[float, int] | None = None,
    ) -> None:
        """Fail the run: the substrate unreachable (MISSES probes unanswered while the loop
        was on time), else the generator's stalled loop (`starved`: its stalls over the last
        STARVED_WINDOW_S, summed and counted, when those decided it)."""
        last = f"; last: {_reason(exc)}" if exc is not None else ""
        if starved is None and since.clean >= MISSES and since.worst < STALL_FAIL_S:
            self.unreachable = True
            self.failure = (
                f"substrate unreachable for {since.silent:.0f}s "
                f"({since.misses} probes in a row unanswered{last})"
            )
        else:
            if since.worst >= STALL_FAIL_S:
                what = (
                    f"for {since.worst:.0f}s at once, longer than the watchdog's "
                    f"{STALL_FAIL_S:g}s: it could not watch the substrate, and what it "
                    "measured meanwhile is its own delay"
                )
            elif starved is not None:
                stalled, stalls = starved
                what = (
                    f"for {stalled:.0f}s of the last {STARVED_WINDOW_S:g}s ({stalls} stalls of "
                    f"{STALL_S:g}s or more; the watchdog's limit is {STALL_FAIL_S:g}s): it "
                    "could not keep time, and what it measured meanwhile is its own delay"
                )
            else:
                what = (
                    f"({since.late_s:.0f}s late in all, {since.worst:.1f}s at once) while "
                    f"{since.misses} of the watchdog's probes in a row went unanswered over "
                    f"{since.silent:.0f}s"
                ) + (f" (last: {_reason(exc)})" if exc is not None else "")
            self.failure = (
                f"the load generator's event loop stalled {what}; the substrate was not "
                "shown unreachable: the generator was overloaded or paused (fewer sessions "
                "per generator, or generator.shards)"
            )
        log.error("%s", self.failure)
        if self.on_failure is not None:
            self.on_failure(self.failure, self.unreachable)


class _Pulse:
    """A heartbeat beside the watchdog for its whole life: how late the loop ran, in all and
    at once, since the watchdog last looked (`take`), and the stalls of STALL_S or more over
    the last STARVED_WINDOW_S. Lateness is measured on the loop's own clock, so a process
    the kernel stopped is as late as one that blocked its own loop."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.asked = self.loop.time()  # when the pending beat went to sleep
        self._late = 0.0  # summed since the last take
        self._worst = 0.0  # at once, since the last take
        self._taken = 0.0  # of the pending beat's lateness, already given to a take
        self._stalls: deque[tuple[float, float]] = deque()  # (ended at, lasted)

    async def run(self) -> None:
        while True:
            self.asked = self.loop.time()
            self._taken = 0.0
            await asyncio.sleep(BEAT_S)
            now = self.loop.time()
            lateness = now - self.asked - BEAT_S
            if lateness > 0:
                self._late += lateness - self._taken
                self._worst = max(self._worst, lateness - self._taken)
                if lateness >= STALL_S:
                    self._stalls.append((now, lateness))

    def _pending(self) -> float:
        """How late the beat still asleep is already: the loop has not come back to it."""
        return max(0.0, self.loop.time() - self.asked - BEAT_S)

    def take(self) -> tuple[float, float]:
        """The lateness since the last take, the pending beat's included: (summed, worst)."""
        pending = self._pending()
        late = self._late + pending - self._taken
        worst = max(self._worst, pending - self._taken)
        self._late = self._worst = 0.0
        self._taken = pending
        return late, worst

    def stalled_recently(self) -> tuple[float, int]:
        """The stalls of STALL_S or more over the last STARVED_WINDOW_S: (seconds, count),
        the pending beat's included once it is that late."""
        now = self.loop.time()
        while self._stalls and self._stalls[0][0] < now - STARVED_WINDOW_S:
            self._stalls.popleft()
        stalled = sum(lasted for _, lasted in self._stalls)
        count = len(self._stalls)
        pending = self._pending()
        if pending >= STALL_S:
            stalled, count = stalled + pending, count + 1
        return stalled, count


@dataclass
class _Since:
    """What the watchdog saw since the substrate last answered: probes unanswered while the
    loop was on time (`clean`) and while it stalled, and how late the loop ran."""

    answered: float  # on the watchdog's clock
    clean: int = 0
    stalled: int = 0
    late_s: float = 0.0  # summed
    worst: float = 0.0  # at once
    silent: float = 0.0  # since `answered`, at the last unanswered probe

    @property
    def misses(self) -> int:
        return self.clean + self.stalled

    def late(self, lateness: float, worst: float | None = None) -> None:
        if lateness > 0:
            self.late_s += lateness
            self.worst = max(self.worst, lateness if worst is None else worst)

    def failed(self) -> bool:
        """Silent for the watchdog's threshold, and either MISSES probes went unanswered
        while the loop was on time (the substrate's fault) or the loop stalled through the
        silence (the generator's): MISSES misses while it stalled, or the threshold's worth
        of lateness."""
        if self.silent < MISSES * EVERY_S:
            return False
        if self.clean >= MISSES:
            return True
        return self.stalled >= MISSES or (self.stalled > 0 and self.late_s >= STALL_FAIL_S)


def unanswered(exc: Exception) -> bool:
    """No answer came back (also the cleanup's test of a substrate gone, engine/ledger.py).
    gRPC (the ate wire) reports a dead or unreachable server as UNAVAILABLE or
    DEADLINE_EXCEEDED with no HTTP status, where the JSON wire says TRANSPORT or TIMEOUT; an
    UNAVAILABLE with a status is a server that answered."""
    if not isinstance(exc, SubstrateError):
        return True
    if exc.code in (TRANSPORT, TIMEOUT):
        return True
    return exc.status == 0 and exc.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")


def _reason(exc: Exception) -> str:
    """Why a probe failed, never empty: a SubstrateError's code (and message when it has
    one), the probe's own deadline for a bare timeout, else the exception's type and text."""
    if isinstance(exc, SubstrateError):
        message = exc.message.strip()
        return f"{exc.code}: {message}" if message else exc.code
    text = str(exc).strip()
    if isinstance(exc, TimeoutError) and not text:
        return f"no answer within the probe's {PROBE_TIMEOUT_S:g}s"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
