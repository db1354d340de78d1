"""The long-lived engine: one object that owns the sessions, the population and the
recorder for a whole run, driven phase by phase (preflight → register → fill → hold … →
stop → cleanup) so that load stays continuous while a caller (the CLI, a Prefect flow)
cuts the hold into windows.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from agentsession_core.engine.backoff import Backoff, transient
from agentsession_core.engine.context import RunContext, credential_refused_line, now_ns
from agentsession_core.engine.ledger import ActorLedger
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.park_check import ParkCheck
from agentsession_core.engine.populations.base import Population
from agentsession_core.engine.populations.burst import BurstPopulation
from agentsession_core.engine.populations.closed import ClosedPopulation
from agentsession_core.engine.populations.cold_resume import ColdResumePopulation
from agentsession_core.engine.populations.spawn import SpawnPopulation
from agentsession_core.engine.populations.turnover import TurnoverPopulation
from agentsession_core.engine.populations.turns import TurnsPopulation
from agentsession_core.engine.script_mix import assign
from agentsession_core.errors import PreflightError
from agentsession_core.measure.recorder import Recorder
from agentsession_core.script import Script
from agentsession_core.script.mix import ScriptMix
from agentsession_core.script.quantity import format_quantity
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.interface import Substrate, Template
from agentsession_core.substrate.op_limits import over_limits

log = logging.getLogger("agentsession")
T = TypeVar("T")

TASKS_GAUGE = "engine_tasks"

# Preflight's calls are retried on a transient failure by the engine's one backoff (0.2 s,
# 0.4 s, 0.8 s, 1.6 s: about 3 s of waits), so one reset connection does not refuse a run,
# while a substrate that is really down is still refused within seconds.
PREFLIGHT_ATTEMPTS = 5

POPULATIONS: dict[str, type[Population]] = {
    "closed": ClosedPopulation,
    "turnover": TurnoverPopulation,
    "turns": TurnsPopulation,
    "spawn": SpawnPopulation,
    "burst": BurstPopulation,
    "cold-resume": ColdResumePopulation,
}


def _preflight_error(exc: SubstrateError, where: str) -> PreflightError:
    if exc.credential_refused:
        return PreflightError(credential_refused_line(exc, where))
    return PreflightError(f"{where}: {exc}")


class Engine:
    def __init__(
        self,
        params: RunParams,
        substrate: Substrate,
        script: Script | ScriptMix,
        recorder: Recorder,
        *,
        atespace: str,
        ledger: ActorLedger | None = None,
        labels: Sequence[int] | None = None,
    ) -> None:
        """`script`: the run's one script or its mix; `labels`: each session's script in a
        mix (default: engine/script_mix.py assign over the run's own sessions; a shard is
        given its share of the run's)."""
        self.params = params
        self.substrate = substrate
        self.mix = script if isinstance(script, ScriptMix) else ScriptMix.of(script)
        self.script = self.mix.first
        self.recorder = recorder
        self._states_seen: set[str] = set()  # a state no session is in any more reads 0
        self.ledger = ledger if ledger is not None else ActorLedger(atespace)
        if labels is None and self.mix.mixed:
            pop = params.population
            awake = pop.awake if pop.kind == "turnover" else 0
            labels = assign(params.seed, pop.sessions, awake, self.mix.weights)
        self.ctx = RunContext(
            substrate, recorder, self.mix, params, atespace, self.ledger, labels=labels
        )
        self.ctx.park_check = ParkCheck.of(self.ctx)
        self.population = POPULATIONS[params.population.kind](self.ctx)
        self.phase = "created"
        self.template: Template | None = None
        self.leaks: list[dict[str, str]] = []
        # The watchdog's line when it found the substrate unreachable: cleanup then checks
        # once rather than retrying every actor against it until its deadline.
        self.unreachable: str | None = None

    # ------------------------------------------------------------------ phases
    async def preflight(self) -> Template:
        """docs/SPEC.md §3.1: the template must hold the script. Also creates the atespace."""
        self.phase = "preflight"
        namespace, name = self.params.target.template_ref
        where = f"substrate {self.params.target.substrate or 'local'}"
        try:
            # The run's first call: a refused credential ends it here, before any load.
            template = await self._retried(
                f"GetTemplate {namespace}/{name}",
                lambda: self.substrate.get_template(namespace, name),
            )
        except SubstrateError as exc:
            raise _preflight_error(exc, f"{where}: GetTemplate {namespace}/{name}") from None
        # Every actor is made from the one template: it must hold the mix's largest script.
        largest = self.mix.largest_memory()
        need = largest.min_actor_memory
        limit = template.memory_limit_bytes
        if limit is None:
            log.warning(
                "template %s/%s has no memory limit; script %s needs %s",
                namespace,
                name,
                largest.name,
                format_quantity(need),
            )
        elif limit < need:
            raise PreflightError(
                f"template {namespace}/{name} memory limit {format_quantity(limit)} is below "
                f"script {largest.name}'s min_actor_memory {format_quantity(need)}; "
                f"use a template with at least {format_quantity(need)} (--template) "
                "or a script that needs less"
            )
        caps = template.op_limits
        refused = None
        for script in self.mix.scripts:
            if caps is not None and refused is None:
                refused = over_limits(script, caps)
        if refused is not None:
            # Every attempt of that op would be refused INVALID_ARGUMENT (docs/SPEC.md §3.1).
            raise PreflightError(
                f"{refused} (template {namespace}/{name}, {where}); "
                "use a script within the cap or a substrate that allows more"
            )
        try:
            await self._retried(
                f"EnsureAtespace {self.ledger.atespace}",
                lambda: self.substrate.ensure_atespace(self.ledger.atespace),
            )
        except SubstrateError as exc:
            raise _preflight_error(exc, f"{where}: EnsureAtespace {self.ledger.atespace}") from None
        target, population = self.params.target, self.params.population
        if (
            target.substrate is None
            and population.kind == "turnover"
            and population.lifecycle_mode != "none"
            and target.local_workers * target.local_worker_capacity <= population.awake
        ):
            # A local worker runs `local_worker_capacity` actors: residents plus the session
            # being woken need a slot each, or wakes park until the park timeout.
            log.warning(
                "awake (%d) needs at least %d local worker slots (local_workers=%d x "
                "local_worker_capacity=%d): wakes will wait for a worker and may fail with "
                "RESOURCE_EXHAUSTED",
                population.awake,
                population.awake + 1,
                target.local_workers,
                target.local_worker_capacity,
            )
        self.template = template
        return template

    async def _retried(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """`call`, retried on a transient failure up to PREFLIGHT_ATTEMPTS attempts in all
        (docs/SPEC.md §3.1); the last failure, or a final one, is raised. A stop (a signal)
        ends the waiting."""
        backoff = Backoff()
        for attempt in range(1, PREFLIGHT_ATTEMPTS + 1):
            try:
                return await call()
            except SubstrateError as exc:
                last = attempt == PREFLIGHT_ATTEMPTS or self.ctx.stopping.is_set()
                if last or not transient(exc):
                    raise
                wait = backoff.next()
                # No URL in this line: a refusal is said once, with the substrate named there.
                log.warning(
                    "preflight: %s failed (%s); attempt %d of %d in %.1fs",
                    what,
                    exc.code,
                    attempt + 1,
                    PREFLIGHT_ATTEMPTS,
                    wait,
                )
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")  # the loop returns or raises

    async def register(self) -> None:
        self.phase = "register"
        await self.population.register()

    async def fill(self) -> None:
        self.phase = "fill"
        await self.population.fill()
        # Sessions, actors and rows made so far live for the whole run: move them out of the
        # collector's reach, or a full collection over 100k sessions stalls the loop for
        # hundreds of ms in the middle of a judged window (bench/RESULTS.md, accuracy).
        gc.freeze()
        self.phase = "hold"

    async def hold(
        self,
        seconds: float,
        *,
        level: float | None = None,
        should_stop: Callable[[], str | None] | None = None,
        start_ns: int | None = None,
    ) -> tuple[int, int, str | None]:
        """Keep the load running for `seconds` (at `level` × the base level when given)
        from `start_ns` (default now: a window that starts where the last one ended tiles
        the hold, whatever the caller spent between them). `should_stop` is polled every
        100 ms; a reason it returns ends the hold early. Returns (start_ns, end_ns, reason)."""
        self.phase = "hold"
        if level is not None and level != self.population.level_multiplier:
            log.info("level %.2fx", level)
            self.population.set_level(level)
        if start_ns is None:  # the first hold starts on the steady start, which may lie ahead
            steady = self.population.steady_start_ns
            start_ns = steady if steady is not None and steady > now_ns() else now_ns()
        start = start_ns
        deadline = start + int(seconds * 1e9)
        reason = None
        while (left := deadline - now_ns()) > 0:
            if self.ctx.stopping.is_set():
                reason = "stopped"
                break
            if should_stop is not None and (reason := should_stop()):
                break
            await asyncio.sleep(min(0.1, left / 1e9))
        return start, now_ns(), reason

    def sample(self) -> None:
        """Once a second: the gauges (sessions by state, the engine's tasks, and the
        population's own)."""
        rec = self.recorder
        # The engine's own tasks in flight (session loops, swaps, wakes, parks): what a leak
        # would grow, for soaks. Its set's size costs nothing; asyncio.all_tasks() walks every
        # task (20 ms at 100k), too much once a second on the loop it measures.
        rec.gauge(TASKS_GAUGE, {}, self.population.tasks_in_flight)
        states = self.population.states()
        self._states_seen |= set(states)
        for state in sorted(self._states_seen):
            rec.gauge("sessions", {"state": state}, states.get(state, 0))
        for gauge, counts in self.population.gauges().items():
            for state, n in counts.items():
                rec.gauge(gauge, {"state": state}, n)

    def substrate_back(self) -> None:
        """The watchdog saw the substrate answer again after an outage."""
        self.population.substrate_back()

    def watchdog_failed(self, failure: str, unreachable: bool) -> None:
        """The watchdog failed the run (the substrate unreachable, or the generator's own
        loop stalled): nothing new starts from here on, so registration sends no further
        CreateActor (docs/SPEC.md §4.2); the run's stop reason says why."""
        if unreachable:
            self.unreachable = failure
        self.ctx.stopping.set()
        # What was sent before the failure is all the substrate may see (a test counts it
        # against the substrate's own count).
        log.info(
            "nothing new starts after the failure (%d CreateActor sent before it)",
            self.ledger.create_calls,
        )

    async def stop(self) -> None:
        if self.phase in ("stopping", "stopped"):
            return
        self.phase = "stopping"
        await self.population.stop(self.params.cleanup.stop_grace_seconds)
        if self.ctx.park_check is not None:
            self.ctx.park_check.stop()
        self.phase = "stopped"

    async def cleanup(self) -> list[dict[str, str]]:
        """Suspend and delete every actor the run created; returns what was left."""
        await self.stop()
        self.ctx.summarise_logs(force=True)
        self.phase = "cleanup"
        self.leaks = await self.ledger.cleanup(
            self.substrate,
            concurrency=self.params.cleanup.concurrency,
            timeout=self.params.cleanup.timeout_seconds,
            unreachable=self.unreachable,
        )
        self.phase = "done"
        return self.leaks
