"""turnover (docs/SPEC.md §4.2): keep `awake` sessions resident and swap R per second with parked
ones.

Ticks run on intended times (t0 + k seconds) and never wait for the previous tick: each
swap is its own task. A swap parks the longest-idle resident that is not inside a step and
wakes the longest-parked session, which runs its next scripted step while busy. TimeToWake
(the rps/TimeToWake row) is measured from the tick's intended time to the woken actor's first
answer. When fewer idle residents or parked sessions exist than the tick asks for, the
shortfall is booked as turnover/Backlog events, never silently absorbed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from agentsession_core.engine.context import RunContext, now_ns
from agentsession_core.engine.populations.base import Population
from agentsession_core.engine.session import Session, StepFailed, Stopped
from agentsession_core.judge.verdict import achieved
from agentsession_core.measure.stats import TIME_TO_WAKE_ROW

if TYPE_CHECKING:
    from agentsession_core.measure.recorder import Recorder
    from agentsession_core.measure.stats import Window

log = logging.getLogger("agentsession")

FILL_DONE_MARKER = "agentsession: turnover fill done"
TICK_NS = 1_000_000_000


class TurnoverPopulation(Population):
    kind = "turnover"

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx)
        self.idle: deque[Session] = deque()  # awake, not in a step; oldest first
        self.parked: deque[Session] = deque()  # hibernated; longest parked first
        self.turnover_start_ns: int | None = None
        self.swaps_started = 0
        # Residents above `awake`: a park that failed while its paired wake went ahead.
        # Later ticks park these without a paired wake, so the resident set comes back.
        self.excess = 0
        ctx.registers = True

    # ------------------------------------------------------------ registration and fill
    async def register(self) -> None:
        params = self.ctx.params.population
        prime = params.awake > 0 or params.lifecycle_mode == "none"
        await self.register_all(prime=prime)
        for session in self.sessions:
            if session.created:
                self.parked.append(session)

    async def fill(self) -> None:
        """Wake `awake` sessions, fill_concurrency at a time, then start ticking."""
        params = self.ctx.params.population
        gate = asyncio.Semaphore(params.fill_concurrency)
        chosen = [self.parked.popleft() for _ in range(min(params.awake, len(self.parked)))]

        async def wake(session: Session) -> None:
            async with gate:
                if self.ctx.stopping.is_set():
                    self.parked.append(session)
                    return
                try:
                    await session.wake(now_ns(), time_to_wake=True)
                except StepFailed as failed:
                    await session.handle(failed)
                except Stopped:
                    return
                (self.idle if session.awake else self.parked).append(session)

        if params.lifecycle_mode != "none":
            await asyncio.gather(*(wake(s) for s in chosen))
        else:
            self.idle.extend(chosen)
        log.info(FILL_DONE_MARKER)
        self.steady_start_ns = self.turnover_start_ns = await self.ctx.steady_start()
        if params.lifecycle_mode != "none":
            self.spawn(self._tick_forever(self.turnover_start_ns), "turnover-ticks")

    # ------------------------------------------------------------ ticks
    async def _tick_forever(self, t0_ns: int) -> None:
        owed = 0.0
        tick = 0
        backlog = self.ctx.recorder.row("turnover", "Backlog")
        while not self.ctx.stopping.is_set():
            tick += 1
            intended = t0_ns + tick * TICK_NS
            if not await self.ctx.wait_until(intended):
                return
            while self.excess and self.idle:
                self.excess -= 1
                out = self.idle.popleft()
                self.spawn(self._park(out, intended), f"park-{out.id}")
            owed += self.level
            wanted = int(owed)
            owed -= wanted
            for _ in range(wanted):
                if not self.idle or not self.parked:
                    backlog.event(intended)
                    continue
                out, into = self.idle.popleft(), self.parked.popleft()
                self.swaps_started += 1
                self.spawn(self._park(out, intended), f"park-{out.id}")
                self.spawn(self._wake(into, intended), f"wake-{into.id}")

    async def _park(self, session: Session, intended_ns: int) -> None:
        # A tick that fired just before stop spawns its swaps after it: the stop guard
        # applies to parks as to wakes, so a swap is either whole or not started.
        if self.ctx.stopping.is_set():
            return
        try:
            await session.hibernate(intended_ns=intended_ns)
        except Stopped:
            return
        if session.awake:
            self.excess += 1
            self.idle.append(session)
        else:
            self.parked.append(session)

    async def _wake(self, session: Session, intended_ns: int) -> None:
        try:
            await session.turn(intended_ns, first_touch=False, time_to_wake=True)
        except Stopped:
            return
        (self.idle if session.awake else self.parked).append(session)

    # ------------------------------------------------------------ gauge and summary
    def gauges(self) -> dict[str, dict[str, int]]:
        return {"turnover_sessions": self.gauge()}

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

    def summary_rows(self, recorder: Recorder) -> dict[str, dict[str, Any]]:
        """One `turnover_window` row over whole seconds of turnover only: the first second
        starts after the fill's own wakes, the last ends when the load stopped (not after
        cleanup), so achieved_rps is swaps over the time they were asked for."""
        start = self.turnover_start_ns
        if start is None:
            return {}
        end = self.stopped_ns or now_ns()
        window = recorder.window(start + 999_999_999, max(end, start + 999_999_999))
        return {"turnover_window": turnover_measurements(window, self.level)}


def turnover_measurements(window: Window, target_rps: float) -> dict[str, Any]:
    """The turnover phase only: per-request counts, failures and rates, achieved vs target."""
    duration = window.duration_s or 1.0
    wakes = window.row(*TIME_TO_WAKE_ROW)
    out: dict[str, Any] = {
        "start_unix": window.start_s,
        "end_unix": window.end_s,
        "duration_s": window.duration_s,
        "target_rps": target_rps,
        "achieved_rps": achieved(window)[0],
        "backlog": window.row("turnover", "Backlog").events,
    }
    for quantile_key, value in wakes.measurements(duration).items():
        if quantile_key.startswith("p"):
            out[f"time_to_wake_{quantile_key}"] = value
    requests = failures = 0
    for (kind, name), stats in sorted(window.rows.items()):
        if kind == "generator" or not stats.count:
            continue
        requests += stats.count
        failures += stats.failures
        out[f"{kind}_{name}_count"] = stats.count
        out[f"{kind}_{name}_failures"] = stats.failures
        out[f"{kind}_{name}_rps"] = stats.count / duration
    out.update(
        requests=requests,
        failures=failures,
        rps=requests / duration,
        failure_ratio=failures / requests if requests else 0.0,
    )
    return out
