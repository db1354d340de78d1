"""ShardedRun: one run over K shards on Dask, with the surface a Campaign and the flow use
from Run (recorder, health, preflight / register / fill / hold, signal, finish, result,
run_dir, extra_rows, finalizers), so neither needs to know.

The coordinator (this process) starts the embedded local substrate once when no URL is given,
opens the Dask cluster, puts one ShardActor on each worker, and drives every phase on all
shards at once. A pump drains every shard each PUMP_S: the deltas merge into one recorder
(stream.py), the t0 barrier is released once every shard has filled (all holds start on the
same intended t0), stats_history.csv and status.json are written once a second. Judging,
abort rules and drift run on the merged stream, exactly as on a single process's recorder.

A shard is lost when Dask says its actor's worker is gone or two drains in a row fail: the
run stops with the shard named (the window it cut is void), and the coordinator deletes the
lost shard's actors itself — the names the shard published, plus whatever the atespace
listing shows under its prefix. Leaving the run stops every shard (their load at once, then
each deletes its own actors), merges their last seconds, writes one set of artifacts with
each shard's generator health beside it, and closes the cluster.
"""

from __future__ import annotations

import asyncio
import logging
import math
import signal
import time
from typing import Any

from agentsession_core.engine.context import now_ns
from agentsession_core.engine.engine import PreflightError
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import FILL_DONE_MARKER
from agentsession_core.engine.run import Run
from agentsession_core.engine.server_source import open_server_metrics
from agentsession_core.engine.shards import files
from agentsession_core.engine.shards.cluster import ShardCluster
from agentsession_core.engine.shards.split import (
    ShardPlan,
    plan_shards,
    shard_count,
    shard_levels,
)
from agentsession_core.engine.shards.stream import MergedHealth, ShardStream
from agentsession_core.engine.shards.sweep import Swept, sweep
from agentsession_core.engine.target import client_for, local_endpoints, local_substrate
from agentsession_core.engine.watchdog import Watchdog
from agentsession_core.errors import AgentsessionError, UsageError
from agentsession_core.measure.prometheus import MetricsServer
from agentsession_core.measure.recorder import Recorder
from agentsession_core.script.mix import load_mix
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")

PUMP_S = 0.25  # how often every shard is drained
DRAIN_TIMEOUT_S = 2.0
LOST_AFTER_MISSES = 2  # failed drains in a row before a shard counts as lost
CATCH_UP_S = 5.0  # how long the end of a hold waits for the shards' last seconds
T0_LEAD_S = 0.5  # the common t0 is the first whole second at least this far ahead
CLOSE_TIMEOUT_S = 15.0


class ShardedRun(Run):
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
        self.phase = "setup"
        self.level = 1.0
        self.t0_ns: int | None = None  # the common t0, on this process's monotonic clock
        self.level_changes: list[tuple[int, float]] = []  # (when, level): turnover_window rows
        self.load_stopped_ns: int | None = None
        self.workers: list[str] = []
        self.shard_info: list[dict[str, Any]] = []
        self.actors: list[Any] = []
        self.futures: list[Any] = []
        self.lost: dict[int, str] = {}
        self.finals: dict[int, dict[str, Any]] = {}
        self.swept: dict[int, Swept] = {}
        self.client: Substrate | None = None
        self.cluster: ShardCluster | None = None
        self.plans: list[ShardPlan] = []
        self._held = False
        self._sweeps: dict[int, asyncio.Task[None]] = {}
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
        sessions = self.params.population.sessions
        here = None if generator.cluster else shard_count(generator, sessions)
        cluster = ShardCluster(generator.cluster, workers=here)
        self.cluster = await self._stack.enter_async_context(cluster)
        cores = sum((await cluster.workers()).values())
        count = here or shard_count(generator, sessions, cores)
        self.stream = ShardStream(count)
        self.stream.attach(self.recorder)
        self.health = MergedHealth(self.stream, self.recorder)
        plans = plan_shards(
            self.params,
            count,
            target={"substrate": url, "router": router, "atespace": self.atespace},
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
            metrics = MetricsServer(self.recorder, self.params.metrics_port)
            await metrics.start()
            self._stack.push_async_callback(metrics.stop)
            log.info("metrics on %s", metrics.url)
        self._watchdog = Watchdog(client, self.params)
        self._background(self._watchdog.run(), "watchdog")
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
    async def _all(self, method: str, *args: Any) -> None:
        """`method` on every live shard at once. A shard lost meanwhile is skipped (the run's
        stop reason says so); a shard's own error (a refused preflight) is the run's."""

        async def one(k: int) -> None:
            try:
                await getattr(self.actors[k], method)(*args)
            except AgentsessionError:
                raise
            except Exception as exc:
                if k not in self.lost and not await self._is_lost(k):
                    raise AgentsessionError(f"shard {k}: {method}: {exc}") from exc
                await self._lose(k, f"{type(exc).__name__}: {exc}")

        await asyncio.gather(*(one(k) for k in self.live_shards))

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

        def stop() -> str | None:
            return self.stop_reason() or (should_stop() if should_stop else None)

        if (reason := stop()) is not None:
            return now_ns(), now_ns(), reason
        if level is not None and level != self.level:
            log.info("level %.2fx", level)
            levels = shard_levels(self.params, self.plans, level)
            await asyncio.gather(
                *(self.actors[k].set_level(levels[k]) for k in self.live_shards),
                return_exceptions=True,
            )
            self.level = level
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
        return start_ns, end, reason

    async def _caught_up(self, end_ns: int) -> None:
        """Until the merged stream holds every second before `end_ns` (or CATCH_UP_S)."""
        assert self.stream is not None
        wanted = self.recorder.second_of(end_ns)
        give_up = time.monotonic() + CATCH_UP_S
        while self.stream.merged_until < wanted and self.stream.live:
            if time.monotonic() > give_up:
                log.warning("shards still behind %ss after the hold ended", CATCH_UP_S)
                return
            await asyncio.sleep(0.05)

    # ------------------------------------------------------------ stop rules
    def load_problem(self) -> str | None:
        """A resident set that averaged short over the merged turnover (docs/SPEC.md §4.2);
        a shard's short fill is in its own forwarded line."""
        return files.load_problem(self)

    def stop_reason(self) -> str | None:
        reason = super().stop_reason()
        if reason is not None:
            return reason
        if self.lost:
            return next(iter(self.lost.values()))
        return self._shard_failure()

    def cut_short(self, reason: str) -> bool:
        return super().cut_short(reason) or reason in self.lost.values()

    def _settle(self) -> None:
        super()._settle()
        if self.signal is not None or self.status == "refused":
            return
        if self.lost:
            self.status, self.reason = "void", next(iter(self.lost.values()))
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
            *(asyncio.wait_for(self.actors[k].stop_load(), 5.0) for k in self.live_shards),
            return_exceptions=True,
        )

    # ------------------------------------------------------------ the pump
    async def _pump(self) -> None:
        while True:
            await asyncio.sleep(PUMP_S)
            await asyncio.gather(*(self._drain(k) for k in self.live_shards))
            await self._release_t0()
            await self._report()

    async def _drain(self, k: int) -> None:
        assert self.stream is not None
        try:
            deltas = await asyncio.wait_for(self.actors[k].drain(), DRAIN_TIMEOUT_S)
        except Exception as exc:
            self._misses[k] = self._misses.get(k, 0) + 1
            if await self._is_lost(k) or self._misses[k] >= LOST_AFTER_MISSES:
                await self._lose(k, f"{type(exc).__name__}: {exc}".rstrip(": "))
            return
        self._misses[k] = 0
        for delta in deltas:
            self.stream.add(k, delta)
            for level, line in delta.logs:
                log.log(level, "shard %d: %s", k, line)

    async def _is_lost(self, k: int) -> bool:
        """Dask's own word: the actor's task is no longer held by a live worker."""
        return self.futures[k].status not in ("finished", "pending")

    async def _release_t0(self) -> None:
        """Once every live shard waits at the fill's barrier: t0 for all of them."""
        if self.t0_ns is not None or self.stream is None:
            return
        live = self.live_shards
        if not live or not all(self.stream.status[k].get("waiting_t0") for k in live):
            return
        t0_unix_s = math.ceil(time.time() + T0_LEAD_S)
        t0_unix_ns = t0_unix_s * 1_000_000_000
        self.t0_ns = t0_unix_ns - (time.time_ns() - time.monotonic_ns())
        at = time.strftime("%H:%M:%S", time.gmtime(t0_unix_s))
        log.info("common t0 for %d shards: %s UTC", len(live), at)
        await asyncio.gather(
            *(self.actors[k].start_at(t0_unix_ns) for k in live), return_exceptions=True
        )

    async def _report(self) -> None:
        """stats_history.csv (+ .jsonl) and status.json once per merged second; a progress
        line."""
        second = self.recorder.closed_until
        if second == self._last_report_second:
            return
        self._last_report_second = second
        texts = self.history.render_closed_files(self.recorder, files.sessions(self))
        await self._save_progress(texts, lambda: files.status_document(self, final=False))
        if time.monotonic() - self._last_progress >= 10.0:
            self._last_progress = time.monotonic()
            log.info("progress: %s", files.progress_line(self))

    # ------------------------------------------------------------ lost shards
    async def _lose(self, k: int, why: str) -> None:
        if k in self.lost or self.stream is None:
            return
        worker = self.workers[k] if k < len(self.workers) else "?"
        reason = self.lost[k] = f"shard {k} lost (worker {worker}): {why}"
        log.error("%s", reason)
        self.stream.drop(k)
        self._sweeps[k] = asyncio.create_task(self._sweep(k), name=f"sweep-shard-{k}")

    async def _sweep(self, k: int) -> None:
        """Delete lost shard `k`'s actors (sweep.py)."""
        assert self.stream is not None and self.client is not None
        self.stream.names[k] = await sweep(
            self.client,
            self.atespace,
            f"{self.plans[k].actor_prefix}-",
            self.stream.names[k],
            self.params.cleanup,
            self.swept.setdefault(k, Swept()),
        )

    @property
    def leaks(self) -> list[dict[str, str]]:
        found = [leak for final in self.finals.values() for leak in final.get("leaks", [])]
        return found + [leak for swept in self.swept.values() for leak in swept.leaks]

    # ------------------------------------------------------------ the way out
    async def _shutdown(self) -> None:
        """Stop every shard's load at once, let each delete its actors, merge their last
        seconds, sweep what lost shards left."""
        assert self.stream is not None
        self.phase = "cleanup"
        if self._pump_task is not None:
            self._pump_task.cancel()
            await asyncio.gather(self._pump_task, return_exceptions=True)
        await self._stop_load()
        cleanup = self.params.cleanup
        budget = cleanup.stop_grace_seconds + cleanup.timeout_seconds + 30.0
        live = self.live_shards
        results = await asyncio.gather(
            *(asyncio.wait_for(self.actors[k].finish(), budget) for k in live),
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
                await asyncio.wait_for(self.actors[k].close(), CLOSE_TIMEOUT_S)

        await asyncio.gather(*(close(k) for k in range(len(self.actors))), return_exceptions=True)
        for future in self.futures:
            future.release()


__all__ = ["ShardedRun"]
