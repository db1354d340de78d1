"""One shard on a Dask worker: a long-lived Engine on its own thread and event loop, driven
by the coordinator through a Dask actor (`ShardActor`).

The engine gets a loop of its own (uvloop when installed) so the worker's loop — Dask's
comms, heartbeats, the actor calls — never shares a loop with the load, and the generator
health this shard reports measures its engine alone. The actor's methods are coroutines on
the worker's loop that hand work to the engine's loop and await it.

Once a second, just after the second ends, the shard flushes its recorder and queues a
`ShardDelta`: the seconds it closed (handed over, then dropped here), its gauges, the actor
names it is about to create or has deleted (`JournalLedger`, so the coordinator can delete
a lost shard's actors), its log lines and status. The coordinator drains the queue.

A shard whose coordinator stops draining it for ORPHAN_S (the coordinator died) stops its
load and deletes its own actors.

A shard runs no substrate watchdog of its own: the coordinator's one probe watches the
substrate for the whole run and, when it answers again after an outage, tells every shard
(`substrate_back`) to check its residents against it (docs/SPEC.md §5.8).

In a paired run every shard drives both arms (docs/SPEC.md §6.8): its own engine is the
candidate's and a second engine, on the same loop and recorder (its rows `:arm=reference`),
the reference's, with its own ledger and journal. Both start from the coordinator's t0 and
tick half a second apart in the order the run's seed draws (ArmOrder), as a single process's
arms do, so the same seconds of both arms are a pair in every shard and in the merged stream.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any, TypeVar

from agentsession_core.engine.arms import Arms
from agentsession_core.engine.context import now_ns, one_second
from agentsession_core.engine.engine import Engine
from agentsession_core.engine.ledger import ActorLedger
from agentsession_core.engine.population_params import TurnoverParams
from agentsession_core.engine.reference_arm import ArmOrder, ReferenceArm
from agentsession_core.engine.shards.split import ShardLevel, ShardPlan
from agentsession_core.engine.shards.stream import ShardDelta
from agentsession_core.engine.target import client_for
from agentsession_core.measure.health import GeneratorHealth
from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.measure.stats import CANDIDATE, REFERENCE
from agentsession_core.script.mix import ScriptMix
from agentsession_core.substrate.errors import SubstrateError

log = logging.getLogger("agentsession")


class _QuietClosedComm(logging.Filter):
    """Dask logs a connection closed under a batched send at INFO with its whole traceback
    (distributed.batched). When a run stops that is the expected end of the cluster, and a
    person saw it as a crash (issue #11: one line, no traceback): the line stays, the
    traceback goes. A warning or an error keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.levelno < logging.WARNING:
            record.exc_info = None
            record.exc_text = None
        return True


# Here, not in cluster.py: every worker process imports this module to run its shard.
logging.getLogger("distributed.batched").addFilter(_QuietClosedComm())

T = TypeVar("T")
BACK_WAIT_S = 10.0  # after an outage, how long a shard waits for the substrate to answer it
ORPHAN_S = 60.0  # undrained this long: the coordinator is gone, clean up alone
LOG_LINES = 2000  # log lines kept between drains at most


class JournalLedger(ActorLedger):
    """The ledger, also noting every name it is about to create ("+") or has given up
    ("-"), for the coordinator's copy of the shared ledger."""

    def __init__(self, atespace: str) -> None:
        super().__init__(atespace)
        self.journal: list[tuple[str, str]] = []

    def creating(self, name: str) -> bool:
        self.journal.append(("+", name))
        return super().creating(name)

    def not_created(self, name: str) -> None:
        super().not_created(name)
        self.journal.append(("-", name))

    def deleted_actor(self, name: str) -> None:
        super().deleted_actor(name)
        self.journal.append(("-", name))

    def take(self) -> list[tuple[str, str]]:
        taken, self.journal = self.journal, []
        return taken


class _LogLines(logging.Handler):
    """The engine thread's log records, as (level, message), for the coordinator's log."""

    def __init__(self, thread_id: int) -> None:
        super().__init__(logging.INFO)
        self.thread_id = thread_id
        self.lines: deque[tuple[int, str]] = deque(maxlen=LOG_LINES)

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread_id:
            self.lines.append((record.levelno, record.getMessage()))


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class ShardEngine:
    """The engine of one shard, on a thread of its own."""

    def __init__(self, plan: ShardPlan, scripts: list[tuple[str, int]]) -> None:
        self.plan = plan
        self.script = ScriptMix.decode(scripts, f"shard {plan.index} script")
        self.outbox: deque[ShardDelta] = deque()
        self.last_drain = time.monotonic()
        self.waiting_t0 = False
        self.finished = False
        self.arms = Arms(None)  # the candidate's engine (its own) and, paired, the reference's
        self.health: GeneratorHealth | None = None
        self._t0: asyncio.Future[int] | None = None
        self.start_skew_ms: float | None = None  # how late this shard's loop reached t0
        self._tasks: list[asyncio.Task[None]] = []
        self.loop = _new_loop()
        self.thread = threading.Thread(
            target=self._run_loop, name=f"agentsession-shard-{plan.index}", daemon=True
        )
        self.thread.start()
        self.logs = _LogLines(self.thread.ident or 0)

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule `coro` on the engine's loop (from any thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    # ------------------------------------------------------------ on the engine's loop
    async def open(self) -> None:
        params = self.plan.params
        recorder = Recorder()
        engine = self._engine_for(params, recorder)
        self.arms.candidate = engine
        if params.reference is not None:
            arm = self.arms.reference = ReferenceArm(params, recorder, engine.ledger.atespace)
            arm.engine = self._engine_for(arm.params, arm.recorder)
            order = ArmOrder(params.seed)  # every shard's the same: one seed
            engine.ctx.tick_phase = order.of(CANDIDATE)
            arm.engine.ctx.tick_phase = order.of(REFERENCE)
        self._t0 = self.loop.create_future()
        logger = logging.getLogger("agentsession")
        logger.addHandler(self.logs)
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)
        logger.propagate = False  # this worker's stderr is not the run's log: the coordinator is
        self.health = GeneratorHealth(recorder)
        await self.health.start()
        self._tasks.append(asyncio.create_task(self._every_second(), name="reporter"))

    def _engine_for(self, params: Any, recorder: Any) -> Engine:
        """One arm's engine: `params.target` holds the coordinator's URLs, in the target's
        wire form (json or ate); its ledger journals every name for the coordinator."""
        target = params.target
        substrate = client_for(target, target.substrate or "", target.router)
        atespace = target.atespace or "agentsession"
        engine = Engine(
            params,
            substrate,
            self.script,
            recorder,
            atespace=atespace,
            ledger=JournalLedger(atespace),
            labels=self.plan.labels,
        )
        engine.ctx.actor_prefix = self.plan.actor_prefix
        engine.ctx.first_session = self.plan.first_session
        engine.ctx.common_t0 = self._wait_for_t0
        return engine

    @property
    def reference(self) -> Engine | None:
        arm = self.arms.reference
        return arm.engine if arm is not None else None

    async def phase(self, name: str) -> None:
        """`name` on every arm at once; a refusal or failure names its arm (Arms)."""
        if name == "preflight":
            refused = await self.arms.preflight()
            if refused is not None:
                raise refused
        elif name in ("register", "fill") and not self._engine().ctx.stopping.is_set():
            await self.arms.each(name)

    async def _wait_for_t0(self) -> int:
        """RunContext.common_t0: wait for the coordinator's t0 (or a stop)."""
        assert self._t0 is not None
        self.waiting_t0 = True
        stopping = asyncio.ensure_future(self._engine().ctx.stopping.wait())
        try:
            await asyncio.wait((self._t0, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            self.waiting_t0 = False
        return self._t0.result() if self._t0.done() else now_ns()

    def release_t0(self, t0_unix_ns: int) -> None:
        """The common t0, from unix time to this process's monotonic clock."""
        mono = t0_unix_ns - (time.time_ns() - time.monotonic_ns())
        if self._t0 is not None and not self._t0.done():
            self._t0.set_result(mono)
            self._tasks.append(self.loop.create_task(self._note_start(t0_unix_ns, mono)))

    async def _note_start(self, t0_unix_ns: int, mono: int) -> None:
        """The start skew: how long after the common t0 (unix time, the coordinator's) this
        shard's loop woke to start its steady load (its clock's own offset included)."""
        await asyncio.sleep(max(0.0, (mono - now_ns()) / 1e9))
        self.start_skew_ms = (time.time_ns() - t0_unix_ns) / 1e6

    async def substrate_back(self, arm: str = CANDIDATE) -> None:
        """The coordinator's watchdog saw `arm`'s substrate answer again after an outage. This
        shard's own connection may not be back yet (a gRPC channel in its reconnect backoff:
        the check's ListActors would fail and check nothing), so it waits until the
        substrate answers it too (BACK_WAIT_S at most), then checks its residents."""
        engine = self.reference if arm == REFERENCE else self._engine()
        if engine is None:
            return
        namespace, name = engine.params.target.template_ref
        give_up = time.monotonic() + BACK_WAIT_S
        while True:
            try:
                async with asyncio.timeout(2.0):
                    await engine.substrate.get_template(namespace, name)
                break
            except (SubstrateError, TimeoutError) as exc:
                if time.monotonic() > give_up:
                    log.warning("substrate back, but not to this shard (%s): checking anyway", exc)
                    break
                await asyncio.sleep(0.25)
        log.info("substrate back (the coordinator's probe saw it): checking residents")
        engine.substrate_back()

    async def set_level(self, level: ShardLevel) -> None:
        for engine in self.arms.engines:  # both arms at every level
            population = engine.params.population
            if level.target_rps is not None and isinstance(population, TurnoverParams):
                population.target_rps = level.target_rps
            engine.population.set_level(level.multiplier)

    async def set_paused(self, paused: bool) -> None:
        self.arms.set_paused(paused)

    async def stop_load(self) -> None:
        self.arms.stop()

    async def finish(self) -> dict[str, Any]:
        """Stop the load, delete this shard's actors (every arm's), hand over the last
        seconds."""
        engine = self._engine()
        candidate_leaks = await engine.cleanup()
        reference = self.reference
        if reference is not None:
            await reference.cleanup()
        if self.health is not None:
            await self.health.stop()
        self.ship(now_ns() + NS_PER_S)  # close the last open second
        self.finished = True
        counts = {"/".join(key): s.count for key, s in engine.recorder.totals().rows.items()}
        theirs = self.arms.reference.leaks() if self.arms.reference is not None else []
        return {
            "leaks": candidate_leaks + theirs,
            "created": engine.ledger.created,
            "deleted": engine.ledger.deleted,
            "counts": counts,  # every row's requests over the whole run, for the record
            **(
                {"reference": {**_books(reference), "leaked_actors": theirs}}
                if reference is not None
                else {}
            ),
        }

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.health is not None:
            await self.health.stop()
        for engine in self.arms.engines:
            await engine.substrate.aclose()
        logging.getLogger("agentsession").removeHandler(self.logs)

    async def _every_second(self) -> None:
        engine = self._engine()
        rec = engine.recorder
        while True:
            await one_second(rec, self.arms.sample)
            self.ship()
            if time.monotonic() - self.last_drain > ORPHAN_S and not self.finished:
                log.error("no coordinator for %.0fs: stopping, cleaning up", ORPHAN_S)
                await self.finish()
                return

    def ship(self, flush_ns: int | None = None) -> None:
        """Queue everything closed so far as one ShardDelta (then drop it here)."""
        engine = self._engine()
        rec = engine.recorder
        if flush_ns is None:  # the gauges were sampled mid-second (_every_second)
            engine.ctx.summarise_logs()
        rec.flush(flush_ns)
        intervals, rec.intervals = rec.intervals, {}
        gauges, rec.gauges = rec.gauges, {}
        ledger = engine.ledger
        assert isinstance(ledger, JournalLedger)
        reference = self.reference
        theirs = reference.ledger if reference is not None else None
        assert theirs is None or isinstance(theirs, JournalLedger)
        lines = list(self.logs.lines)
        self.logs.lines.clear()
        self.outbox.append(
            ShardDelta(
                intervals=intervals,
                gauges=gauges,
                closed_until=rec.closed_until,
                monitored=[list(span) for span in self.health.monitored] if self.health else [],
                journal=ledger.take(),
                reference_journal=theirs.take() if theirs is not None else [],
                logs=lines,
                status=self.status(),
            )
        )

    def status(self) -> dict[str, Any]:
        engine = self._engine()
        return {
            "phase": engine.phase,
            "sessions": len(engine.population.sessions),
            "states": dict(engine.population.states()),
            "actors_created": engine.ledger.created,
            "actors_deleted": engine.ledger.deleted,
            "misconfigured": dict(engine.ctx.misconfigured),
            # A refused credential (a substrate gone is the coordinator's watchdog's to say),
            # on either arm, naming it.
            "failure": self.arms.failure(),
            "waiting_t0": self.waiting_t0,
            "start_skew_ms": self.start_skew_ms,
            **({"reference": _books(self.reference)} if self.reference is not None else {}),
        }

    def drain(self) -> list[ShardDelta]:
        """Everything queued since the last drain (any thread)."""
        self.last_drain = time.monotonic()
        out = []
        while self.outbox:
            out.append(self.outbox.popleft())
        return out

    def _engine(self) -> Engine:
        if self.arms.candidate is None:
            raise RuntimeError("shard not opened")
        return self.arms.candidate

    def stop_thread(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _books(engine: Engine) -> dict[str, Any]:
    """One arm's counts of actors, for the coordinator's status.json."""
    return {
        "actors_created": engine.ledger.created,
        "actors_deleted": engine.ledger.deleted,
        "misconfigured": dict(engine.ctx.misconfigured),
    }


class ShardActor:
    """The Dask actor the coordinator drives (`client.submit(ShardActor, actor=True)`).
    Every method is a coroutine on the worker's loop; engine work runs on the shard's own."""

    def __init__(self) -> None:
        self.shard: ShardEngine | None = None

    async def _on_engine(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(self._shard().run(coro))

    def _shard(self) -> ShardEngine:
        if self.shard is None:
            raise RuntimeError("shard not opened")
        return self.shard

    async def open(self, plan: ShardPlan, scripts: list[tuple[str, int]]) -> dict[str, Any]:
        """`scripts`: the run's scripts as (YAML text, weight), in the mix's order."""
        self.shard = ShardEngine(plan, scripts)
        await self._on_engine(self.shard.open())
        return {"pid": os.getpid(), "host": socket.gethostname(), "seed": plan.params.seed}

    async def phase(self, name: str) -> None:
        shard = self._shard()
        await self._on_engine(shard.phase(name))

    async def drain(self) -> list[ShardDelta]:
        return self.shard.drain() if self.shard is not None else []  # not opened yet: nothing

    async def start_at(self, t0_unix_ns: int) -> None:
        shard = self._shard()
        shard.loop.call_soon_threadsafe(shard.release_t0, t0_unix_ns)

    async def set_level(self, level: ShardLevel) -> None:
        await self._on_engine(self._shard().set_level(level))

    async def substrate_back(self, arm: str = CANDIDATE) -> None:
        await self._on_engine(self._shard().substrate_back(arm))

    async def set_paused(self, paused: bool) -> None:
        await self._on_engine(self._shard().set_paused(paused))

    async def stop_load(self) -> None:
        await self._on_engine(self._shard().stop_load())

    async def finish(self) -> dict[str, Any]:
        return await self._on_engine(self._shard().finish())

    async def close(self) -> None:
        shard = self.shard
        if shard is None:
            return
        with contextlib.suppress(Exception):
            await self._on_engine(shard.close())
        await asyncio.to_thread(shard.stop_thread)
        self.shard = None


__all__ = ["JournalLedger", "ShardActor", "ShardEngine"]
