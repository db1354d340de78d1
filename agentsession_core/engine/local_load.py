"""The load of one process (engine/load.py `Load`): its arms side by side, the candidate's
engine and, in a paired run, the reference arm's (arms.py), each with its substrate, watchdog
and server figures.

Opening starts the candidate's substrate client (or the embedded local substrate when
params.target names no URL; a substrate given by the caller is driven and left open), its
server figures, its engine, the reference arm when paired, generator health and the
candidate's watchdog. Closing stops every arm's load and deletes its actors, at once.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from agentsession_core.engine.arms import Arms
from agentsession_core.engine.context import now_ns, one_second
from agentsession_core.engine.engine import Engine, PreflightError
from agentsession_core.engine.load import Background, FinalStats, LoadFailure, StopRule
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.reference_arm import ReferenceArm
from agentsession_core.engine.server_source import embedded_url, open_server_metrics
from agentsession_core.engine.target import open_substrate
from agentsession_core.engine.watchdog import Watchdog
from agentsession_core.errors import one_line
from agentsession_core.measure.health import GeneratorHealth
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.server_sources import ServerMetrics
from agentsession_core.script.mix import ScriptMix
from agentsession_core.substrate.interface import Substrate

NS = 1_000_000_000


class LocalLoad:
    """This process's engines (engine/load.py `Load`)."""

    def __init__(self, params: RunParams, atespace: str, substrate: Substrate | None) -> None:
        self.params = params
        self.atespace = atespace
        self.given = substrate  # the caller's: driven, never closed here
        self.recorder = Recorder()
        self.health = GeneratorHealth(self.recorder, voids=params.generator.void_when_saturated)
        self.server: ServerMetrics | None = None
        # A paired run's second arm (docs/SPEC.md §6.8); the candidate is this load's own.
        self.reference = ReferenceArm(params, self.recorder, atespace) if params.paired else None
        self.arms = Arms(self.reference)
        self.client: Substrate | None = None

    @property
    def engine(self) -> Engine | None:
        """The candidate's engine (None before the load opened)."""
        return self.arms.candidate

    @property
    def paired(self) -> bool:
        return self.reference is not None

    @property
    def opened(self) -> bool:
        return self.engine is not None

    @property
    def reference_server(self) -> ServerMetrics | None:
        return self.reference.server if self.reference is not None else None

    # ------------------------------------------------------------ open / close
    async def open(
        self, stack: contextlib.AsyncExitStack, script: ScriptMix, logs: Path, bg: Background
    ) -> None:
        substrate = self.given
        if substrate is None:
            try:
                substrate = await stack.enter_async_context(
                    open_substrate(self.params.target, logs / "substrate.log")
                )
            except (RuntimeError, OSError) as exc:  # the embedded substrate did not start
                raise PreflightError(self.arms.said(f"substrate local: {one_line(exc)}")) from None
        self.client = substrate
        # The substrate's own metrics; stopped before the substrate (the stack unwinds).
        embedded = None if self.given or self.params.target.substrate else substrate
        self.server = await stack.enter_async_context(
            open_server_metrics(self.params, self.recorder, embedded_url(embedded))
        )
        engine = self.arms.candidate = Engine(
            self.params, substrate, script, self.recorder, atespace=self.atespace
        )
        if self.reference is not None:
            await self.reference.open(stack, logs, script, bg)
            self.arms.pair(self.recorder)
        await self.health.start()
        stack.push_async_callback(self.health.stop)
        self.arms.watchdog = Watchdog(
            substrate,
            self.params,
            on_back=engine.substrate_back,
            on_failure=engine.watchdog_failed,  # a failed run starts nothing more
        )
        bg(self.arms.watchdog.run(), "watchdog")

    async def close(self) -> None:
        await self.arms.cleanup()

    # ------------------------------------------------------------ phases
    def _engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("the load is used before it opened (outside `async with Run`)")
        return self.engine

    @property
    def phase(self) -> str:
        return self.engine.phase if self.engine is not None else "setup"

    async def preflight(self) -> PreflightError | None:
        self._engine()
        return await self.arms.preflight()

    async def register(self) -> None:
        self._engine()
        await self.arms.each("register")

    async def fill(self) -> None:
        self._engine()
        await self.arms.each("fill")

    async def hold(
        self, seconds: float, *, level: float | None, stop: StopRule, start_ns: int | None
    ) -> tuple[int, int, str | None]:
        if level is not None and self.reference is not None and self.reference.engine:
            self.reference.engine.population.set_level(level)  # both arms at every level
        return await self._engine().hold(seconds, level=level, should_stop=stop, start_ns=start_ns)

    async def next_second(self) -> None:
        engine = self._engine()
        await one_second(self.recorder, self.arms.sample)  # the gauges mid-second
        engine.ctx.summarise_logs()
        self.recorder.flush()

    # ------------------------------------------------------------ live control
    @property
    def level(self) -> float:
        return self.engine.population.level_multiplier if self.engine is not None else 1.0

    async def set_level(self, level: float) -> None:
        self._engine()
        self.arms.set_level(level)

    async def set_paused(self, paused: bool) -> None:
        self._engine()
        self.arms.set_paused(paused)

    def set_awake(self, residents: int) -> None:
        population = self.engine.population if self.engine is not None else None
        set_awake = getattr(population, "set_awake", None)  # a turnover's
        if set_awake is not None:
            set_awake(residents)

    def stop(self) -> None:
        self.arms.stop()

    def stop_watching(self) -> None:
        self.arms.stop_watching()

    # ------------------------------------------------------------ what it says
    def failure(self) -> LoadFailure | None:
        reason = self.arms.failure()
        if reason is None:
            return None
        # A generator whose own loop stalled measured nothing of the substrate.
        return LoadFailure(reason, generator_side=self.arms.generator_stalled())

    def problem(self) -> str | None:
        return self.engine.population.problem() if self.engine is not None else None

    def silent_since(self, start_ns: int) -> str | None:
        dog = self.arms.watchdog
        return dog.silent_since(start_ns) if dog is not None else None

    def leaks(self) -> list[dict[str, str]]:
        return self.arms.leaks()

    def residents(self) -> int | None:
        population = self.engine.population if self.engine is not None else None
        return getattr(population, "residents", None)  # a turnover's

    def states(self) -> dict[str, int]:
        return self.engine.population.states() if self.engine is not None else {}

    def progress_parts(self) -> list[str]:
        population = self.engine.population if self.engine is not None else None
        awake = getattr(population, "awake", None)
        residents = self.residents()
        return [f"resident {residents}/{awake}"] if residents is not None and awake else []

    def sessions(self) -> int:
        return len(self.engine.population.sessions) if self.engine is not None else 0

    def books(self) -> dict[str, Any]:
        engine = self.engine
        return {
            "actors_created": engine.ledger.created if engine else 0,
            "actors_deleted": engine.ledger.deleted if engine else 0,
            "leaked_actors": self.leaks(),  # a reference arm's with `arm`: the exit code
            "misconfigured": engine.ctx.misconfigured if engine else {},
            # A paired run's reference arm: its own books (docs/SPEC.md §6.8).
            **({"reference": self.reference.status()} if self.reference is not None else {}),
        }

    def density_target(self) -> tuple[Substrate | None, int | None]:
        engine = self.engine
        template = engine.template if engine is not None else None
        return self.client, template.memory_limit_bytes if template is not None else None

    def final_stats(self) -> FinalStats:
        engine = self.engine
        if engine is None:
            return FinalStats(None)
        rec = self.recorder
        rec.flush(now_ns() + NS)  # close the last open second
        whole = rec.window(rec.mono_ns_of_second(rec.first_second), now_ns() + NS)
        reference = self.reference
        theirs = None
        if reference is not None and reference.engine is not None:
            theirs = reference.engine.population.summary_rows(reference.recorder)
        return FinalStats(whole, engine.population.summary_rows(rec), theirs)


__all__ = ["LocalLoad"]
