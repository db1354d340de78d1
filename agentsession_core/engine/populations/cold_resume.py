"""cold-resume (docs/SPEC.md §4.7): a fleet of suspended actors resumed at a target rate,
each suspended again once it answered, so it is cold again for a later resume — the control
plane's resume path measured at a rate, as a platform load tests it alone.

Registration is turnover's (docs/SPEC.md §4.2): `sessions` actors are created at the spawn
rate and parked (booked *_Register); with wake_probe none (the control plane alone) nothing
goes through the router, so no first touch and no step. From the steady start the ticks run
on intended times t0 + k s, as turnover's do, and each asks for target_rps × level resumes
(the fractional part carried to the next tick); `swap_pacing` says when a tick's resumes start:
together on the tick, or spread evenly over it, each from its own intended time.

A resume takes the longest-cold actor (the fleet is a queue: suspended the longest, first),
wakes it (Session.wake: TimeToWake from its intended time to ResumeActor's answer with
wake_probe none, else to the probe's), then suspends it by the lifecycle mode and returns it
to the back of the queue. A resume the rate asks for when no actor is cold (every one is
being resumed or suspended) is not made: it is booked as a `cold_resume`/FleetExhausted event
at its intended time, and a second that holds one is void (measure/health.py
`exhausted_reason`): its rate was the fleet's size, not the platform's.

A failed wake is handled as any session's failure (docs/SPEC.md §3.4: counted, or the actor
replaced by a fresh, parked one); its actor joins the fleet again once it is parked.
"""

from __future__ import annotations

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.population_params import ColdResumeParams, settings_of
from agentsession_core.engine.populations.base import Population
from agentsession_core.engine.session import Session, Stopped
from agentsession_core.measure.stats import FLEET_EXHAUSTED_ROW

NS_PER_S = 1_000_000_000


class ColdResumePopulation(Population):
    kind = "cold-resume"

    @property
    def settings(self) -> ColdResumeParams:
        """This population's own settings (its kind's model)."""
        return settings_of(self.ctx.params.population, ColdResumeParams)

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        ctx.registers = True
        ctx.primes = False
        self.cold: list[Session] = []  # parked, longest cold first (a FIFO, see _take)
        self._head = 0
        self.tick_ns = NS_PER_S  # one tick a second (tests shorten it)
        self.resumes_started = 0
        self.exhausted = 0  # resumes asked for with no cold actor left
        self._exhausted_row = ctx.recorder.row(*FLEET_EXHAUSTED_ROW)

    # ------------------------------------------------------------ the fleet
    @property
    def cold_count(self) -> int:
        return len(self.cold) - self._head

    def _take(self) -> Session | None:
        if self._head >= len(self.cold):
            return None
        session = self.cold[self._head]
        self._head += 1
        if self._head > 1024 and self._head * 2 > len(self.cold):  # drop the taken prefix
            del self.cold[: self._head]
            self._head = 0
        return session

    async def register(self) -> None:
        await self.register_all(prime=False)
        self.cold.extend(s for s in self.sessions if s.created)

    async def fill(self) -> None:
        await super().fill()
        start = self.steady_start_ns if self.steady_start_ns is not None else now_ns()
        self.spawn(self._tick_forever(start), "cold-resume-ticks")

    # ------------------------------------------------------------ ticks
    async def _tick_forever(self, t0_ns: int) -> None:
        owed = 0.0
        tick = 0
        while not self.ctx.stopping.is_set():
            intended = self.ctx.tick_time(t0_ns, tick, self.tick_ns)
            tick += 1
            if not await self.ctx.wait_until(intended):
                return
            if self.paused:  # by hand: nothing owed for this tick
                continue
            owed += self.level * self.tick_ns / NS_PER_S
            resumes = int(owed)
            owed -= resumes
            self.tick(intended, resumes)

    def tick(self, intended_ns: int, resumes: int) -> None:
        if resumes > 1 and self.settings.swap_pacing == "even":
            self.spawn(self._paced(intended_ns, resumes), "cold-resume-pacer")
            return
        for _ in range(resumes):
            self.resume_one(intended_ns)

    async def _paced(self, intended_ns: int, resumes: int) -> None:
        """swap_pacing even: resume j at intended_ns + j·tick/resumes, each from its own
        intended time; one already due goes at once (never dropped or restamped)."""
        for j in range(resumes):
            due = intended_ns + j * self.tick_ns // resumes
            if due > now_ns() and not await self.ctx.wait_until(due):
                return
            self.resume_one(due)

    def resume_one(self, intended_ns: int) -> None:
        session = self._take()
        if session is None:
            self.exhausted += 1
            self._exhausted_row.event(intended_ns)
            return
        self.resumes_started += 1
        self.spawn(self._cycle(session, intended_ns), f"cold-resume-{session.id}")

    async def _cycle(self, session: Session, intended_ns: int) -> None:
        """Resume one cold actor, then suspend it again; back in the fleet once it is."""
        try:
            await session.turn(intended_ns, first_touch=False, time_to_wake=True, park=False)
            if session.awake:  # resumed (its probe may have failed): cold again first
                await session.hibernate()
        except Stopped:
            pass
        finally:
            # A park that failed is re-driven by the session's next turn, before its wake.
            self.cold.append(session)

    # ------------------------------------------------------------ what the run says
    def problem(self) -> str | None:
        """A plain run whose fleet ran out measured the fleet's size, not the platform."""
        if not self.exhausted:
            return None
        return exhausted_line(self.exhausted, len(self.sessions), self.ctx)

    def gauges(self) -> dict[str, dict[str, int]]:
        return {
            "cold_resume": {
                "cold": self.cold_count,
                "started": self.resumes_started,
                "exhausted": self.exhausted,
            }
        }


def exhausted_line(missed: int, fleet: int, ctx: RunContext) -> str:
    """The one line of a cold-resume whose fleet ran out."""
    rate = settings_of(ctx.params.population, ColdResumeParams).target_rps
    return (
        f"cold-resume: fleet exhausted: {missed} resumes found no cold actor left (a fleet "
        f"of {fleet} at target_rps {rate:g}); register more sessions or lower the rate"
    )


__all__ = ["ColdResumePopulation", "exhausted_line"]
