"""The reference arm of a paired run (docs/SPEC.md §6.8): the release in production, driven
side by side with the candidate (the run's own target) by the same generator.

The arm is a second engine on the run's event loop, identical to the candidate's in script,
population, rates, levels and seed, against its own substrate (`params.reference`: a URL, or
an embedded local substrate of its own). It books into the run's recorder through an
ArmRecorder, so its rows are the candidate's names with `:arm=reference`, its seconds line up
with the candidate's exactly, and everything cut from the recorder (windows, hold seconds)
has both arms. It has its own actors and ledger (its own atespace, so two pools of one
platform never share names), cleanup, watchdog and server figures. Both arms start their
steady load in the same second (`SteadyStart`) and tick half a second apart, taking turns at
going first (`ArmOrder`), so the same seconds of both arms are a pair and neither arm's
requests always go first.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from agentsession_core.engine.context import now_ns
from agentsession_core.engine.engine import Engine, PreflightError
from agentsession_core.engine.pacing import derive_seed
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.server_source import embedded_url, open_server_metrics
from agentsession_core.engine.target import open_substrate
from agentsession_core.engine.watchdog import Watchdog
from agentsession_core.errors import one_line
from agentsession_core.measure.arm_recorder import ArmRecorder
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.server_sources import ServerMetrics
from agentsession_core.measure.stats import CANDIDATE, REFERENCE
from agentsession_core.script.mix import ScriptMix

log = logging.getLogger("agentsession")
T = TypeVar("T")

REFERENCE_LOG = "substrate.reference.log"
# The arm whose task is logging: every task the reference arm starts inherits it, so each
# of its log lines says so (both arms log the same lines otherwise).
_ARM: contextvars.ContextVar[str | None] = contextvars.ContextVar("arm", default=None)


class _ArmPrefix(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        arm = _ARM.get()
        if arm is not None and not getattr(record, "arm", None):
            record.msg, record.arm = f"[{arm} arm] {record.msg}", arm
        return True


_prefix = _ArmPrefix()


async def as_arm(arm: str, work: Awaitable[T]) -> T:
    """`work` awaited as `arm`'s: its log lines, and those of every task it starts, name the
    arm (the reference's; the candidate's lines stay as an unpaired run's)."""
    if arm != REFERENCE:
        return await work
    log.addFilter(_prefix)  # once: a filter added twice is kept once
    token = _ARM.set(arm)  # tasks started meanwhile copy it
    try:
        return await work
    finally:
        _ARM.reset(token)


def reference_params(params: RunParams) -> RunParams:
    """The run's parameters as the reference arm runs them: its target, nothing else changed."""
    assert params.reference is not None
    return params.model_copy(update={"target": params.reference, "reference": None})


def arm_line(arm: str, text: str) -> str:
    """`text` said of one arm: a paired run's refusals and failures name the arm."""
    return f"{arm} arm: {text}"


# Where an arm's tick lies within its second. Ticks of the two arms at the same instant race:
# whichever arm's timer fires first sends first and its substrate gets the cores first
# (measured: an A/A pilot's candidate, always first, woke 29 % faster at p50). So the arms
# tick half a second apart, a quarter second from the run's own per-second work (the flush
# just after the whole second, the gauges at the half). Those two places are not alike: an
# A/A candidate always at +0.25 s woke about 4 % slower at p50, and with the arms taking turns
# whichever went first was the slower, whichever arm it was (bench/RESULTS.md, "the paired
# arms' order"): the cost belongs to the place, not the arm. So the arms take turns
# (ArmOrder), and each pays it alike.
LEAD_NS = 250_000_000
TRAIL_NS = 750_000_000


class ArmOrder:
    """Which arm ticks first in each second of a paired run's steady load: the seconds go in
    rounds of two, each arm leading in one second of every round, the round's first leader
    drawn from the run's seeded stream (so no periodic work of the machine can line up with
    one arm, and every round holds both orders once). Tick k of each arm lies in second k of
    the steady load (both start in the same second, SteadyStart): at LEAD_NS into it for the
    arm that leads, TRAIL_NS for the other. The same seed gives the same order in every
    process and shard."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def leader(self, second: int) -> str:
        """The arm that ticks first in the steady load's `second`-th second (from 0)."""
        round_, half = divmod(second, 2)
        first = CANDIDATE if derive_seed(self.seed, "arm-order", round_) % 2 == 0 else REFERENCE
        return first if half == 0 else (REFERENCE if first == CANDIDATE else CANDIDATE)

    def phase_ns(self, arm: str, second: int) -> int:
        """How far into the steady load's `second`-th second `arm` ticks."""
        return LEAD_NS if self.leader(second) == arm else TRAIL_NS

    def of(self, arm: str) -> Callable[[int], int]:
        """RunContext.tick_phase of `arm`: its phase in each second."""
        return functools.partial(self.phase_ns, arm)


class SteadyStart:
    """Both arms' steady load starts in one second, once both have filled: each RunContext's
    `common_t0` is `second`, its `tick_phase` the ArmOrder's (RunContext.steady_start)."""

    def __init__(self, recorder: Recorder, arms: int = 2) -> None:
        self.recorder = recorder
        self.waiting = arms
        self.ready = asyncio.Event()
        self.t0 = 0

    async def second(self) -> int:
        """The whole second (monotonic ns) both arms start in, once both arrived."""
        self.waiting -= 1
        if self.waiting <= 0:
            self._set()
        await self.ready.wait()
        return self.t0

    def _set(self) -> None:
        rec = self.recorder
        self.t0 = rec.mono_ns_of_second(rec.second_of(now_ns()) + 1)
        self.ready.set()

    def release(self) -> None:
        """An arm that will never fill (it failed, the run stops): the other starts without
        waiting for it."""
        if not self.ready.is_set():
            self._set()


class ReferenceArm:
    """The reference arm's substrate, engine, watchdog and server figures."""

    def __init__(self, params: RunParams, recorder: Recorder, atespace: str) -> None:
        self.params = reference_params(params)
        self.recorder = ArmRecorder(recorder, REFERENCE)
        self.atespace = self.params.target.atespace or f"{atespace}-{REFERENCE}"
        self.engine: Engine | None = None
        self.server: ServerMetrics | None = None
        self.watchdog: Watchdog | None = None

    async def open(
        self,
        stack: contextlib.AsyncExitStack,
        logs: Path,
        script: ScriptMix,
        background: Callable[[Any, str], None],
    ) -> Engine:
        """Start the arm on the run's exit stack (so it is closed with the run), its
        substrate's log in `logs`; a substrate that does not come up is a refusal naming the
        arm."""
        try:
            substrate = await stack.enter_async_context(
                open_substrate(self.params.target, logs / REFERENCE_LOG)
            )
        except (RuntimeError, OSError) as exc:
            raise PreflightError(arm_line(REFERENCE, f"substrate local: {one_line(exc)}")) from None
        embedded = None if self.params.target.substrate else substrate
        self.server = await stack.enter_async_context(
            open_server_metrics(self.params, self.recorder, embedded_url(embedded))
        )
        engine = self.engine = Engine(
            self.params, substrate, script, self.recorder, atespace=self.atespace
        )
        self.watchdog = Watchdog(
            substrate,
            self.params,
            on_back=engine.substrate_back,
            on_failure=engine.watchdog_failed,  # a failed arm starts nothing more
        )
        log.addFilter(_prefix)
        token = _ARM.set(REFERENCE)  # the watchdog's task copies it: its lines name the arm
        try:
            background(self.watchdog.run(), "reference-watchdog")
        finally:
            _ARM.reset(token)
        return engine

    def failure(self) -> str | None:
        """Why the arm cannot go on (a fatal answer, a substrate gone), naming the arm."""
        engine = self.engine
        if engine is not None and engine.ctx.fatal:
            return arm_line(REFERENCE, engine.ctx.fatal)
        if self.watchdog is not None and self.watchdog.failure:
            return arm_line(REFERENCE, self.watchdog.failure)
        return None

    def leaks(self) -> list[dict[str, str]]:
        return [{**leak, "arm": REFERENCE} for leak in (self.engine.leaks if self.engine else [])]

    def status(self) -> dict[str, Any]:
        """status.json's `reference`: the arm's own books."""
        engine = self.engine
        return {
            "arm": REFERENCE,
            "atespace": self.atespace,
            "phase": engine.phase if engine else "setup",
            "actors_created": engine.ledger.created if engine else 0,
            "actors_deleted": engine.ledger.deleted if engine else 0,
            "leaked_actors": self.leaks(),
            "misconfigured": engine.ctx.misconfigured if engine else {},
        }


__all__ = [
    "CANDIDATE",
    "LEAD_NS",
    "REFERENCE",
    "REFERENCE_LOG",
    "TRAIL_NS",
    "ArmOrder",
    "ReferenceArm",
    "SteadyStart",
    "arm_line",
    "as_arm",
    "reference_params",
]
