"""The engines one Run drives side by side: its own (the candidate's) and, in a paired run,
the reference arm's (docs/SPEC.md §6.8; the arm itself is engine/reference_arm.py).

Every phase runs on each arm at once (`each`, `preflight`, `cleanup`), every change by hand
reaches both, and whatever one arm says or fails with names the arm once there are two. An
unpaired run has one arm and reads exactly as before: nothing is named.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentsession_core.engine.engine import Engine
from agentsession_core.engine.reference_arm import (
    ArmOrder,
    ReferenceArm,
    SteadyStart,
    arm_line,
    as_arm,
)
from agentsession_core.errors import AgentsessionError, PreflightError
from agentsession_core.measure.stats import CANDIDATE, REFERENCE

if TYPE_CHECKING:
    from agentsession_core.engine.watchdog import Watchdog
    from agentsession_core.measure.recorder import Recorder


class Arms:
    """The candidate's engine and watchdog (the Run's own) and a paired run's reference."""

    def __init__(self, reference: ReferenceArm | None) -> None:
        self.reference = reference
        self.candidate: Engine | None = None
        self.watchdog: Watchdog | None = None
        self.steady: SteadyStart | None = None

    def pair(self, recorder: Recorder) -> None:
        """Both arms made: their steady loads start in one second and tick half a second
        apart, taking turns at going first (ArmOrder, from the run's seed)."""
        assert self.candidate is not None and self.reference and self.reference.engine
        self.steady = SteadyStart(recorder)
        order = ArmOrder(self.candidate.params.seed)
        for arm, engine in ((CANDIDATE, self.candidate), (REFERENCE, self.reference.engine)):
            engine.ctx.common_t0 = self.steady.second
            engine.ctx.tick_phase = order.of(arm)

    @property
    def engines(self) -> list[Engine]:
        out = [self.candidate] if self.candidate is not None else []
        if self.reference is not None and self.reference.engine is not None:
            out.append(self.reference.engine)
        return out

    def arm_of(self, engine: Engine) -> str:
        return CANDIDATE if engine is self.candidate else REFERENCE

    def said(self, text: str, arm: str = CANDIDATE) -> str:
        """`text` of one arm, named in a paired run."""
        return arm_line(arm, text) if self.reference is not None else text

    async def _on_each(self, work: Callable[[Engine], Awaitable[Any]]) -> list[Any]:
        """`work` on every arm at once, each as its arm (its log lines name it); results or
        exceptions, in arm order."""
        engines = self.engines
        return await asyncio.gather(
            *(as_arm(self.arm_of(e), work(e)) for e in engines), return_exceptions=True
        )

    async def preflight(self) -> PreflightError | None:
        """Every arm's preflight; the first refusal, naming its arm (None: all can run)."""
        for engine, result in zip(self.engines, await self._on_each(Engine.preflight), strict=True):
            if isinstance(result, PreflightError):
                return PreflightError(self.said(str(result), self.arm_of(engine)))
            if isinstance(result, BaseException):
                raise result
        return None

    async def each(self, phase: str) -> None:
        """`phase` (register, fill) on every arm at once; the first failure is raised once
        both ended, naming its arm. An arm that fails lets the other start its steady load
        alone rather than wait for it."""

        async def one(engine: Engine) -> None:
            try:
                await getattr(engine, phase)()
            except BaseException:
                if self.steady is not None:
                    self.steady.release()
                raise

        for engine, result in zip(self.engines, await self._on_each(one), strict=True):
            if isinstance(result, AgentsessionError) and self.reference is not None:
                raise type(result)(self.said(str(result), self.arm_of(engine))) from result
            if isinstance(result, BaseException):
                raise result

    async def cleanup(self) -> None:
        """Every arm stops its load and deletes its actors, at once."""
        for result in await self._on_each(Engine.cleanup):
            if isinstance(result, BaseException):
                raise result

    def stop(self) -> None:
        """Stop starting work on every arm (a signal, a full disk)."""
        for engine in self.engines:
            engine.ctx.stopping.set()
        if self.steady is not None:  # an arm still filling must not wait for the other
            self.steady.release()

    def stop_watching(self) -> None:
        """The run was refused: no watchdog says an unreachable substrate again."""
        for dog in self._watchdogs():
            dog.stop()

    def sample(self) -> None:
        for engine in self.engines:
            engine.sample()

    def set_level(self, level: float) -> None:
        for engine in self.engines:
            engine.population.set_level(level)

    def set_paused(self, paused: bool) -> None:
        for engine in self.engines:
            engine.population.set_paused(paused)

    def leaks(self) -> list[dict[str, str]]:
        """The actors cleanup could not delete; the reference arm's with `arm`."""
        mine = self.candidate.leaks if self.candidate is not None else []
        return mine + (self.reference.leaks() if self.reference is not None else [])

    def failure(self) -> str | None:
        """A fatal answer or a substrate gone, on either arm (named in a paired run)."""
        if self.candidate is not None and self.candidate.ctx.fatal:
            return self.said(self.candidate.ctx.fatal)
        if self.watchdog is not None and self.watchdog.failure:
            return self.said(self.watchdog.failure)
        return self.reference.failure() if self.reference is not None else None

    def generator_stalled(self) -> bool:
        """A watchdog failed its arm for the generator's stalled loop, not the substrate."""
        return any(d.failure and not d.unreachable for d in self._watchdogs())

    def _watchdogs(self) -> list[Watchdog]:
        dogs = [self.watchdog, self.reference.watchdog if self.reference is not None else None]
        return [d for d in dogs if d is not None]


__all__ = ["Arms"]
