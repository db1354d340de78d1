"""ShardedRun: one run over K shards on Dask, with the surface a Campaign and the flow use
from Run (recorder, health, preflight / register / fill / hold, signal, finish, result,
run_dir, extra_rows, finalizers), so neither needs to know.

The coordinator (this process) starts the embedded local substrate once when no URL is given,
opens the Dask cluster, puts one ShardActor on each worker, and drives every phase on all
shards at once. A pump (pump.py) drains every shard once a second: the deltas merge into one
recorder (stream.py), the t0 barrier is released once every shard has filled (all holds start
on the same intended t0), stats_history.csv and status.json are written once a second. Judging,
abort rules and drift run on the merged stream, exactly as on a single process's recorder.

A shard is lost when a call to it fails because its worker is gone, or when it leaves
LOST_AFTER_MISSES drains in a row unanswered (then it is first told to stop and delete its
own actors: a starved worker may still run). The coordinator deletes the lost shard's
actors itself — the names the shard published, plus whatever the atespace listing shows
under its prefix — and then, in the hold, carries its sessions on: the lost shard's plan
is split again over the surviving workers (replan: same seed, same session ids and actor
names, so no session is counted twice), one new shard per survivor, each registering and
filling its part and starting its steady load on the next whole second. The window the
loss cut is void (named: "shard 2 lost at …"), later windows are judged on the full load
again. A loss before the hold, or one that leaves fewer than `generator.min_shards`
workers, ends the run void with the shard named.

The coordinator's watchdog is the run's one probe of the substrate (the shards run none):
when the substrate answers again after an outage, every shard checks its residents against
it and replaces what was lost (docs/SPEC.md §5.8). Leaving the run stops every shard
(their load at once, then each deletes its own actors), merges their last seconds, writes
one set of artifacts with each shard's generator health beside it, and closes the cluster.

A paired run (docs/SPEC.md §6.8) pairs in every shard: each drives both arms, and the
reference's substrate, probe, server figures and lost-shard sweep are the coordinator's
(reference.py), beside the candidate's.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from agentsession_core.engine.arms import Arms
from agentsession_core.engine.context import now_ns
from agentsession_core.engine.engine import PreflightError
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import FILL_DONE_MARKER
from agentsession_core.engine.run import Run
from agentsession_core.engine.server_source import open_server_metrics
from agentsession_core.engine.shards import files
from agentsession_core.engine.shards.cluster import ShardCluster
from agentsession_core.engine.shards.losses import ShardLosses
from agentsession_core.engine.shards.pump import ShardPump
from agentsession_core.engine.shards.reference import ShardedReference
from agentsession_core.engine.shards.split import (
    ShardPlan,
    plan_shards,
    shard_count,
    shard_levels,
)
from agentsession_core.engine.shards.stream import MergedHealth, ShardStream
from agentsession_core.engine.target import client_for, local_endpoints, local_substrate
from agentsession_core.engine.watchdog import Watchdog
from agentsession_core.errors import AgentsessionError, UsageError
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.stats import REFERENCE
from agentsession_core.script.mix import load_mix
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")

CLOSE_TIMEOUT_S = 15.0


class ShardedRun(ShardPump, ShardLosses, Run):
    """A Run whose load comes from K shards on Dask (generator.shards, generator.cluster)."""

    def __init__(
        self,
        params: RunParams,
        *,
        substrate: Substrate | None = None,
        live: bool = False,
        handle_signals: bool = True,
    ) -> None:
        if substrate is not None:
            raise UsageError(
                "a sharded run (generator.shards > 1 or generator.cluster) reaches its "
                "substrate by URL: set target.substrate instead of passing a substrate object"
            )
        super().__init__(params, live=live, handle_signals=handle_signals)
        self.stream: ShardStream | None = None
        self.recorder = Recorder(clock_ns=self._merged_clock)
        self.health = MergedHealth(ShardStream(0), self.recorder)
        self.reference: ShardedReference | None = (
            ShardedReference(params, self.recorder, self.atespace, self._reference_books)
            if params.paired
            else None
        )
        self.arms = Arms(self.reference)
        self.phase = "setup"
        self.level = 1.0
        self.t0_ns: int | None = None  # the common t0, on this process's monotonic clock
        self.level_changes: list[tuple[int, float]] = []  # (when, level): turnover_window rows
        self.load_stopped_ns: int | None = None
        self.workers: list[str] = []
        self.known_workers: set[str] = set()  # the cluster's workers when the run started
        self.shard_info: list[dict[str, Any]] = []
        self.actors: list[Any] = []
        self.futures: list[Any] = []
        self.shard_start_unix: dict[int, int] = {}  # shard -> the unix second it started at
        self._started = asyncio.Event()  # set when shards got their start, or were lost
        self.finals: dict[int, dict[str, Any]] = {}
        self.client: Substrate | None = None
        self.cluster: ShardCluster | None = None
        self.plans: list[ShardPlan] = []
        self._held = False
        self._init_losses()  # lost, ended, swept: losses.py
        self._misses: dict[int, int] = {}
        self._pump_task: asyncio.Task[None] | None = None
        self._stopper: asyncio.Task[None] | None = None
        self._last_report_second = 0
        self._last_progress = 0.0

    def _merged_clock(self) -> int:
        return self.stream.clock_ns() if self.stream is not None else time.monotonic_ns()

    @property
    def count(self) -> int:
        return self.stream.count if self.stream is not None else 0

    @property
    def live_shards(self) -> list[int]:
        return [k for k in range(len(self.actors)) if k not in self.lost]

    @property
    def live_workers(self) -> list[str]:
        """The distinct workers some live shard runs on (a worker is one generator host)."""
        return sorted({self.workers[k] for k in self.live_shards})

    # ------------------------------------------------------------ enter / leave
    async def _open(self) -> None:
        self.script = await asyncio.to_thread(load_mix, self.params.script)
        await self._write_start_files()
        target, generator = self.params.target, self.params.generator
        url, router = target.substrate, target.router
        embedded = None
        if url is None:  # started once, here; every shard gets its URLs
            log_path = self.run_dir.file("substrate.log")
            local = await self._stack.enter_async_context(local_substrate(target, log_path))
            url, router = local_endpoints(local, target)
            embedded = local.url
        client = self.client = client_for(target, url, router)
        self._stack.push_async_callback(client.aclose)
        self.server = await self._stack.enter_async_context(  # docs/SPEC.md §5.9
            open_server_metrics(self.params, self.recorder, embedded)
        )
        theirs = None
        if self.reference is not None:
            theirs = await self.reference.open_target(self._stack, self.run_dir)
        sessions = self.params.population.sessions
        here = None if generator.cluster else shard_count(generator, sessions)
        cluster = ShardCluster(generator.cluster, workers=here)
        self.cluster = await self._stack.enter_async_context(cluster)
        known = await cluster.workers()
        self.known_workers = set(known)
        cores = sum(known.values())
        count = here or shard_count(generator, sessions, cores)
        self.stream = ShardStream(count, voids=generator.void_when_saturated)
        self.stream.attach(self.recorder)
        self.health = MergedHealth(self.stream, self.recorder)
        plans = plan_shards(
            self.params,
            count,
            target={"substrate": url, "router": router, "atespace": self.atespace},
            reference=theirs,
        )
        self.plans = plans
        self.workers = await cluster.place(count)
        log.info("%d shards on %s", count, cluster.where)
        self._stack.push_async_callback(self._close_actors)
        started = await asyncio.gather(
            *(cluster.start_actor(k, w) for k, w in enumerate(self.workers))
        )
        self.futures = [f for f, _ in started]
        self.actors = [a for _, a in started]
        texts = self.script.encode()
        opened = (a.open(p, texts) for a, p in zip(self.actors, plans, strict=True))
        self.shard_info = list(await asyncio.gather(*opened))
        if self.params.metrics_port is not None:
            await self._serve_metrics(client)
        # The run's one probe of the substrate; its return after an outage goes to every shard.
        self._watchdog = Watchdog(client, self.params, on_back=self._on_substrate_back)
        self._background(self._watchdog.run(), "watchdog")
        if self.reference is not None:
            self.reference.watch(self._on_reference_back, self._background)
        self._pump_task = asyncio.create_task(self._pump(), name="shard-pump")
        # Registered last, so it runs first on the way out: stop every shard, sweep.
        self._stack.push_async_callback(self._shutdown)

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        handled = await super().__aexit__(exc_type, exc, tb)
        if self.result is not None:
            self.result.leaks = self.leaks
        return handled

    def write_final_files(self) -> None:
        files.write_final_files(self)

    # ------------------------------------------------------------ phases
    async def _all(self, method: str, *args: Any, shards: list[int] | None = None) -> None:
        """`method` on every live shard (or on `shards`) at once. A shard lost meanwhile is
        skipped (the run's stop reason, or its carry-on, says so); a shard's own error (a
        refused preflight) is the run's."""

        async def one(k: int) -> None:
            try:
                await getattr(self.actors[k], method)(*args)
            except AgentsessionError:
                raise
            except Exception as exc:
                if k not in self.lost and not await self._is_lost(k):
                    raise AgentsessionError(f"shard {k}: {method}: {exc}") from exc
                await self._lose(k, f"{type(exc).__name__}: {exc}")

        live = self.live_shards
        await asyncio.gather(*(one(k) for k in (live if shards is None else shards) if k in live))

    async def preflight(self) -> bool:
        """Every shard's preflight; False when one refused (Run.refuse: said once, the later
        phases do nothing, the run ends `refused`)."""
        if self.refusal is not None:
            return False
        self.phase = "preflight"
        try:
            await self._all("phase", "preflight")
        except AgentsessionError as exc:
            self.refuse(exc if isinstance(exc, PreflightError) else PreflightError(str(exc)))
            return False
        return True

    async def register(self) -> None:
        if not self.stop_reason():
            self.phase = "register"
            await self._all("phase", "register")

    async def fill(self) -> None:
        if not self.stop_reason():
            self.phase = "fill"
            await self._all("phase", "fill")
            if not self.stop_reason():
                log.info(FILL_DONE_MARKER)
        self.phase = "hold"

    async def hold(
        self,
        seconds: float,
        *,
        level: float | None = None,
        should_stop: Any = None,
        start_ns: int | None = None,
    ) -> tuple[int, int, str | None]:
        """Hold the load on every shard (they keep running; this only keeps time and watches
        the stop rules on the merged stream), then wait for the shards' last seconds."""

        stop = self.hold_stop(should_stop)
        if (reason := stop()) is not None:
            return now_ns(), now_ns(), self.unless_stopped_by_hand(reason)
        if level is not None and level != self.level:
            log.info("level %.2fx", level)
            await self._set_shard_levels(level)
        if start_ns is None:  # the first hold starts on the common t0
            start_ns = self.t0_ns if self.t0_ns is not None and not self._held else now_ns()
        if not self.level_changes or self.level_changes[-1][1] != self.level:
            self.level_changes.append((start_ns, self.level))
        self._held = True
        deadline = start_ns + int(seconds * 1e9)
        while (left := deadline - now_ns()) > 0:
            if (reason := stop()) is not None:
                break
            await asyncio.sleep(min(0.1, left / 1e9))
        end = now_ns()
        await self._caught_up(end)
        return start_ns, end, self.unless_stopped_by_hand(reason)

    # ------------------------------------------------------------ live control
    @property
    def current_level(self) -> float:
        return self.level

    def state(self) -> str:
        return self.phase

    def residents(self) -> int | None:
        return None  # each shard holds its own resident set; their sum is not kept live

    async def apply_level(self, level: float) -> None:
        if self._held:  # a level by hand starts its own turnover_window row
            self.level_changes.append((now_ns(), level))
        await self._set_shard_levels(level)

    async def _set_shard_levels(self, level: float) -> None:
        """Every live shard to `level`, split exactly as at the start (shard_levels)."""
        levels = shard_levels(self.params, self.plans, level)
        await asyncio.gather(
            *(self.actors[k].set_level(levels[k]) for k in self.live_shards),
            return_exceptions=True,
        )
        self.level = level

    async def apply_paused(self, paused: bool) -> None:
        await asyncio.gather(
            *(self.actors[k].set_paused(paused) for k in self.live_shards),
            return_exceptions=True,
        )

    async def _apply_level(self) -> None:
        """The run's level on every live shard, its total split over the live plans."""
        live = self.live_shards
        levels = shard_levels(self.params, [self.plans[k] for k in live], self.level)
        await asyncio.gather(
            *(self.actors[k].set_level(level) for k, level in zip(live, levels, strict=True)),
            return_exceptions=True,
        )

    # ------------------------------------------------------------ stop rules
    def load_problem(self) -> str | None:
        """A resident set that averaged short over the merged turnover (docs/SPEC.md §4.2);
        a shard's short fill is in its own forwarded line."""
        return files.load_problem(self)

    def stop_reason(self) -> str | None:
        reason = super().stop_reason()
        if reason is not None:
            return reason
        if self.ended is not None:
            return self.ended
        return self._shard_failure()

    def cut_short(self, reason: str) -> bool:
        return super().cut_short(reason) or reason == self.ended

    def _settle(self) -> None:
        super()._settle()
        if self.signal is not None or self.status == "refused":
            return
        if self.ended is not None:
            self.status, self.reason = "void", self.ended
        elif (failed := self._shard_failure()) is not None:
            self.status, self.reason = "failed", failed

    def _shard_failure(self) -> str | None:
        """A shard's own reason to stop: its substrate watchdog, a refused credential."""
        for k, status in enumerate(self.stream.status if self.stream else []):
            if status.get("failure"):
                return f"shard {k}: {status['failure']}"
        return None

    def _on_signal(self, sig: signal.Signals) -> None:
        super()._on_signal(sig)
        if self._stopper is None and self.actors:  # stop the load everywhere now
            self._stopper = asyncio.get_running_loop().create_task(self._stop_load())

    async def _stop_load(self) -> None:
        if self.load_stopped_ns is None:
            self.load_stopped_ns = now_ns()
        await asyncio.gather(
            *(_within(5.0, self.actors[k].stop_load()) for k in self.live_shards),
            return_exceptions=True,
        )

    def _on_substrate_back(self) -> None:
        self._background(self._substrate_back(), "substrate-back")

    def _on_reference_back(self) -> None:
        self._background(self._substrate_back(REFERENCE), "reference-substrate-back")

    async def _substrate_back(self, *arm: str) -> None:
        """A watchdog saw its arm's substrate answer again: every shard checks that arm's
        residents."""
        await asyncio.gather(
            *(self.actors[k].substrate_back(*arm) for k in self.live_shards),
            return_exceptions=True,
        )

    def _reference_books(self) -> list[dict[str, Any]]:
        """Each shard's reference books: its final answer, else its last status."""
        statuses = self.stream.status if self.stream is not None else []
        return [
            (self.finals.get(k) or status).get("reference") or {}
            for k, status in enumerate(statuses)
        ]

    @property
    def leaks(self) -> list[dict[str, str]]:
        found = [leak for final in self.finals.values() for leak in final.get("leaks", [])]
        swept = [leak for s in self.swept.values() for leak in s.leaks]
        theirs = self.reference.swept_leaks() if self.reference is not None else []
        return found + swept + theirs

    # ------------------------------------------------------------ the way out
    async def _shutdown(self) -> None:
        """Stop every shard's load at once, let each delete its actors, merge their last
        seconds, sweep what lost shards left."""
        assert self.stream is not None
        self.phase = "cleanup"
        for carrying in self._carry_ons.values():
            carrying.cancel()
        await asyncio.gather(*self._carry_ons.values(), return_exceptions=True)
        if self._pump_task is not None:
            self._pump_task.cancel()
            await asyncio.gather(self._pump_task, return_exceptions=True)
        await self._stop_load()
        cleanup = self.params.cleanup
        budget = cleanup.stop_grace_seconds + cleanup.timeout_seconds + 30.0
        live = self.live_shards
        results = await asyncio.gather(
            *(_within(budget, self.actors[k].finish()) for k in live),
            return_exceptions=True,
        )
        for k, result in zip(live, results, strict=True):
            if isinstance(result, BaseException):
                await self._lose(k, f"while stopping: {type(result).__name__}: {result}")
            else:
                self.finals[k] = result
        await asyncio.gather(*(self._drain(k) for k in self.live_shards))
        await asyncio.gather(*self._sweeps.values(), return_exceptions=True)
        for k in list(self.lost):  # once more: a dying shard may have created more
            await self._sweep(k)
        self.stream.advance(final=True)
        self.phase = "done"

    async def _close_actors(self) -> None:
        async def close(k: int) -> None:
            if k not in self.lost:
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await self.actors[k].close()

        await asyncio.gather(*(close(k) for k in range(len(self.actors))), return_exceptions=True)
        for future in self.futures:
            future.release()


__all__ = ["ShardedRun"]


T = TypeVar("T")


async def _within(seconds: float, awaitable: Awaitable[T]) -> T:
    """`awaitable`, or TimeoutError after `seconds` (asyncio.wait_for is banned: pyproject)."""
    async with asyncio.timeout(seconds):
        return await awaitable
