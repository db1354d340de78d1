"""ShardedLoad: one run's load over K shards on Dask, a load like this process's own
(engine/load.py `Load`), so that neither the Run, nor a campaign, nor the flow needs to know.

The coordinator (this process) starts the embedded local substrate once when no URL is given,
opens the Dask cluster, puts one ShardActor on each worker, and drives every phase on all
shards at once. A pump (pump.py) drains every shard once a second: the deltas merge into one
recorder (stream.py), the t0 barrier is released once every shard has filled (all holds start
on the same intended t0), and the run writes its files once per merged second. Judging, abort
rules and drift run on the merged stream, exactly as on a single process's recorder.

A shard is lost when a call to it fails because its worker is gone, or when it leaves
LOST_AFTER_MISSES drains in a row unanswered (then it is first told to stop and delete its
own actors: a starved worker may still run; losses.py). The coordinator deletes the lost shard's
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
it and replaces what was lost (docs/SPEC.md §5.8). Closing the load stops every shard
(their load at once, then each deletes its own actors) and merges their last seconds; the
run then writes one set of artifacts with each shard's generator health beside it
(`shards/<k>/health.json`), and the cluster closes.

A paired run (docs/SPEC.md §6.8) pairs in every shard: each drives both arms, and the
reference's substrate, probe, server figures and lost-shard sweep are the coordinator's
(reference.py), beside the candidate's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

from agentsession_core.engine.arms import Arms
from agentsession_core.engine.context import now_ns
from agentsession_core.engine.engine import PreflightError
from agentsession_core.engine.load import Background, FinalStats, LoadFailure, StopRule
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import (
    FILL_DONE_MARKER,
    RESIDENT_TOLERANCE,
    shortfall_line,
)
from agentsession_core.engine.populations.turnover_window import level_rows
from agentsession_core.engine.server_source import open_server_metrics
from agentsession_core.engine.shards.cluster import ShardCluster
from agentsession_core.engine.shards.fleet import ShardFleet
from agentsession_core.engine.shards.losses import ShardLosses
from agentsession_core.engine.shards.pump import ShardPump
from agentsession_core.engine.shards.reference import ShardedReference
from agentsession_core.engine.shards.split import plan_shards, shard_count, shard_levels
from agentsession_core.engine.shards.stream import MergedHealth, ShardStream
from agentsession_core.engine.target import client_for, local_endpoints, local_substrate
from agentsession_core.engine.watchdog import Watchdog
from agentsession_core.errors import AgentsessionError, UsageError
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.server_sources import ServerMetrics
from agentsession_core.measure.stats import REFERENCE, RESIDENT_SHORTFALL_ROW
from agentsession_core.script.mix import ScriptMix
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")

CLOSE_TIMEOUT_S = 15.0
NS = 1_000_000_000
T = TypeVar("T")


class ShardedLoad:
    """A load from K shards on Dask (generator.shards, generator.cluster)."""

    def __init__(self, params: RunParams, atespace: str, substrate: Substrate | None) -> None:
        if substrate is not None:
            raise UsageError(
                "a sharded run (generator.shards > 1 or generator.cluster) reaches its "
                "substrate by URL: set target.substrate instead of passing a substrate object"
            )
        self.params = params
        self.atespace = atespace
        self.fleet = ShardFleet()
        # The merged recorder's clock is the shards' watermark once the stream is attached.
        self.recorder = Recorder(clock_ns=lambda: self.fleet.stream.clock_ns())
        self.health = MergedHealth(self.fleet.stream, self.recorder)
        self.server: ServerMetrics | None = None
        self.reference: ShardedReference | None = (
            ShardedReference(params, self.recorder, atespace, self._reference_books)
            if params.paired
            else None
        )
        self.arms = Arms(self.reference)  # the probes: the candidate's and the reference's
        self.phase = "setup"
        self.level = 1.0
        self.level_changes: list[tuple[int, float]] = []  # (when, level): turnover_window rows
        self.load_stopped_ns: int | None = None
        self.client: Substrate | None = None
        self.pump = ShardPump(self.fleet, self.recorder, self._lose)
        self.losses: ShardLosses | None = None
        self._stopping = False
        self._held = False
        self._pump_task: asyncio.Task[None] | None = None
        self._stopper: asyncio.Task[None] | None = None

    @property
    def paired(self) -> bool:
        return self.reference is not None

    @property
    def opened(self) -> bool:
        return bool(self.fleet.actors)

    @property
    def reference_server(self) -> ServerMetrics | None:
        return self.reference.server if self.reference is not None else None

    @property
    def stream(self) -> ShardStream:
        return self.fleet.stream

    # ------------------------------------------------------------ open / close
    async def open(
        self, stack: contextlib.AsyncExitStack, script: ScriptMix, logs: Path, bg: Background
    ) -> None:
        target, generator = self.params.target, self.params.generator
        url, router = target.substrate, target.router
        embedded = None
        if url is None:  # started once, here; every shard gets its URLs
            local = await stack.enter_async_context(local_substrate(target, logs / "substrate.log"))
            url, router = local_endpoints(local, target)
            embedded = local.url
        client = self.client = client_for(target, url, router)
        stack.push_async_callback(client.aclose)
        self.server = await stack.enter_async_context(  # docs/SPEC.md §5.9
            open_server_metrics(self.params, self.recorder, embedded)
        )
        theirs = None
        if self.reference is not None:
            theirs = await self.reference.open_target(stack, logs)
        sessions = self.params.population.sessions
        here = None if generator.cluster else shard_count(generator, sessions)
        cluster = await stack.enter_async_context(ShardCluster(generator.cluster, workers=here))
        known = await cluster.workers()
        fleet = self.fleet
        fleet.known_workers = set(known)
        count = here or shard_count(generator, sessions, sum(known.values()))
        fleet.stream = ShardStream(count, voids=generator.void_when_saturated)
        fleet.stream.attach(self.recorder)
        self.health = MergedHealth(fleet.stream, self.recorder)
        fleet.plans = plan_shards(
            self.params,
            count,
            target={"substrate": url, "router": router, "atespace": self.atespace},
            reference=theirs,
        )
        fleet.workers = await cluster.place(count)
        log.info("%d shards on %s", count, cluster.where)
        stack.push_async_callback(self._close_actors)
        started = await asyncio.gather(
            *(cluster.start_actor(k, w) for k, w in enumerate(fleet.workers))
        )
        fleet.futures = [f for f, _ in started]
        fleet.actors = [a for _, a in started]
        texts = script.encode()
        opened = (a.open(p, texts) for a, p in zip(fleet.actors, fleet.plans, strict=True))
        fleet.info = list(await asyncio.gather(*opened))
        self.losses = ShardLosses(
            fleet, self.params, self.atespace, client, cluster, self.reference, script, self
        )
        # The run's one probe of the substrate; its return after an outage goes to every shard.
        self.arms.watchdog = Watchdog(
            client, self.params, on_back=lambda: bg(self._substrate_back(), "substrate-back")
        )
        bg(self.arms.watchdog.run(), "watchdog")
        if self.reference is not None:
            self.reference.watch(
                lambda: bg(self._substrate_back(REFERENCE), "reference-substrate-back"), bg
            )
        self._pump_task = asyncio.create_task(self.pump.run(), name="shard-pump")

    async def close(self) -> None:
        """Stop every shard's load at once, let each delete its actors, merge their last
        seconds, sweep what lost shards left."""
        fleet, losses = self.fleet, self.losses
        self.phase = "cleanup"
        if losses is not None:
            await losses.settle()
        if self._pump_task is not None:
            self._pump_task.cancel()
            await asyncio.gather(self._pump_task, return_exceptions=True)
        await self._stop_load()
        cleanup = self.params.cleanup
        budget = cleanup.stop_grace_seconds + cleanup.timeout_seconds + 30.0
        live = fleet.live
        results = await asyncio.gather(
            *(_within(budget, fleet.actors[k].finish()) for k in live),
            return_exceptions=True,
        )
        for k, result in zip(live, results, strict=True):
            if isinstance(result, BaseException):
                await self._lose(k, f"while stopping: {type(result).__name__}: {result}")
            else:
                fleet.finals[k] = result
        await self.pump.drain_all()
        if losses is not None:
            await losses.sweep_again()
        fleet.stream.advance(final=True)
        self.phase = "done"

    async def _close_actors(self) -> None:
        fleet = self.fleet

        async def close(k: int) -> None:
            if k not in fleet.lost:
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await fleet.actors[k].close()

        await asyncio.gather(*(close(k) for k in range(len(fleet.actors))), return_exceptions=True)
        for future in fleet.futures:
            future.release()

    async def _lose(self, k: int, why: str, *, silent: bool = False) -> None:
        if self.losses is not None:
            await self.losses.lose(k, why, silent=silent)

    # ------------------------------------------------------------ phases
    async def preflight(self) -> PreflightError | None:
        """Every shard's preflight; the first refusal."""
        self.phase = "preflight"
        try:
            await self.fleet.each(self._lose, "phase", "preflight")
        except AgentsessionError as exc:
            return exc if isinstance(exc, PreflightError) else PreflightError(str(exc))
        return None

    async def register(self) -> None:
        self.phase = "register"
        await self.fleet.each(self._lose, "phase", "register")

    async def fill(self) -> None:
        self.phase = "fill"
        await self.fleet.each(self._lose, "phase", "fill")
        if self.failure() is None and not self._stopping:
            log.info(FILL_DONE_MARKER)
        self.phase = "hold"

    async def hold(
        self, seconds: float, *, level: float | None, stop: StopRule, start_ns: int | None
    ) -> tuple[int, int, str | None]:
        """Hold the load on every shard (they keep running; this only keeps time and watches
        the stop rules on the merged stream), then wait for the shards' last seconds."""
        if level is not None and level != self.level:
            log.info("level %.2fx", level)
            await self._set_shard_levels(level)
        t0 = self.fleet.t0_ns
        if start_ns is None:  # the first hold starts on the common t0
            start_ns = t0 if t0 is not None and not self._held else now_ns()
        if not self.level_changes or self.level_changes[-1][1] != self.level:
            self.level_changes.append((start_ns, self.level))
        self._held = True
        deadline = start_ns + int(seconds * 1e9)
        reason = None
        while (left := deadline - now_ns()) > 0:
            if (reason := stop()) is not None:
                break
            await asyncio.sleep(min(0.1, left / 1e9))
        end = now_ns()
        await self.pump.caught_up(end)
        return start_ns, end, reason

    async def next_second(self) -> None:
        await self.pump.next_second()

    # ------------------------------------------------------------ live control
    async def set_level(self, level: float) -> None:
        if self._held:  # a level by hand starts its own turnover_window row
            self.level_changes.append((now_ns(), level))
        await self._set_shard_levels(level)

    async def _set_shard_levels(self, level: float) -> None:
        """Every live shard to `level`, split exactly as at the start (shard_levels)."""
        fleet = self.fleet
        levels = shard_levels(self.params, fleet.plans, level)
        await asyncio.gather(
            *(fleet.actors[k].set_level(levels[k]) for k in fleet.live), return_exceptions=True
        )
        self.level = level

    async def apply_level(self) -> None:
        """The load's level on every live shard, its total split over the live plans (after a
        carry-on)."""
        fleet = self.fleet
        live = fleet.live
        levels = shard_levels(self.params, [fleet.plans[k] for k in live], self.level)
        await asyncio.gather(
            *(fleet.actors[k].set_level(level) for k, level in zip(live, levels, strict=True)),
            return_exceptions=True,
        )

    async def set_paused(self, paused: bool) -> None:
        await self.fleet.on_live("set_paused", paused)

    def set_awake(self, residents: int) -> None:
        """A density search resizes one process's resident set; shards keep their split."""

    def stop(self) -> None:
        """Stop the load everywhere now (a signal, a full disk)."""
        self._stopping = True
        self.arms.stop()
        if self._stopper is None and self.fleet.actors:
            self._stopper = asyncio.get_running_loop().create_task(self._stop_load())

    def stopping(self) -> bool:
        return self._stopping or self.failure() is not None

    def stop_watching(self) -> None:
        self.arms.stop_watching()

    async def _stop_load(self) -> None:
        if self.load_stopped_ns is None:
            self.load_stopped_ns = now_ns()
        fleet = self.fleet
        await asyncio.gather(
            *(_within(5.0, fleet.actors[k].stop_load()) for k in fleet.live),
            return_exceptions=True,
        )

    async def _substrate_back(self, *arm: str) -> None:
        """A watchdog saw its arm's substrate answer again: every shard checks that arm's
        residents."""
        await self.fleet.on_live("substrate_back", *arm)

    # ------------------------------------------------------------ what it says
    def failure(self) -> LoadFailure | None:
        """A probe's (the substrate gone, the coordinator's loop stalled), a loss the run
        could not go on after (void), or a shard's own (its watchdog, a refused credential)."""
        if (reason := self.arms.failure()) is not None:
            return LoadFailure(reason, generator_side=self.arms.generator_stalled())
        if self.losses is not None and self.losses.ended is not None:
            return LoadFailure(self.losses.ended, generator_side=True)
        for k, status in enumerate(self.fleet.stream.status):
            if status.get("failure"):
                return LoadFailure(f"shard {k}: {status['failure']}")
        return None

    def problem(self) -> str | None:
        """The merged resident set's mean gap over the turnover, against RESIDENT_TOLERANCE
        (docs/SPEC.md §4.2); a shard's short fill is in its own forwarded line."""
        population = self.params.population
        t0 = self.fleet.t0_ns
        if population.kind != "turnover" or t0 is None or not population.awake:
            return None
        start = t0 + NS - 1
        window = self.recorder.window(start, max(self.load_stopped_ns or now_ns(), start))
        if not window.duration_s:
            return None
        mean = window.row(*RESIDENT_SHORTFALL_ROW).events / window.duration_s
        if mean <= RESIDENT_TOLERANCE * population.awake:
            return None
        return shortfall_line(mean, population.awake, f"{window.duration_s:.0f} s")

    def silent_since(self, start_ns: int) -> str | None:
        dog = self.arms.watchdog
        return dog.silent_since(start_ns) if dog is not None else None

    def leaks(self) -> list[dict[str, str]]:
        found = [leak for final in self.fleet.finals.values() for leak in final.get("leaks", [])]
        swept = self.losses.leaks() if self.losses is not None else []
        theirs = self.reference.swept_leaks() if self.reference is not None else []
        return found + swept + theirs

    def residents(self) -> int | None:
        return None  # each shard holds its own resident set; their sum is not kept live

    def states(self) -> dict[str, int]:
        states: Counter[str] = Counter()
        for status in self.fleet.stream.status:
            states.update(status.get("states") or {})
        return dict(states)

    def progress_parts(self) -> list[str]:
        return [f"shards {len(self.fleet.live)}/{self.fleet.count}"]

    def sessions(self) -> int:
        """The live shards' sessions: a lost shard's are counted where they were carried on."""
        status = self.fleet.stream.status
        return sum(int(status[k].get("sessions", 0)) for k in self.fleet.live)

    def density_target(self) -> tuple[Substrate | None, int | None]:
        """None: a sharded load does not resize its shards' resident sets (set_awake), so the
        worker listing at a probe would not say what the probe's load held (docs/limits.md)."""
        return None, None

    def _reference_books(self) -> list[dict[str, Any]]:
        """Each shard's reference books: its final answer, else its last status."""
        finals = self.fleet.finals
        return [
            (finals.get(k) or status).get("reference") or {}
            for k, status in enumerate(self.fleet.stream.status)
        ]

    def shard_rows(self) -> list[dict[str, Any]]:
        """One entry per shard for status.json: where it ran, its share, its state."""
        fleet = self.fleet
        out = []
        for k, plan in enumerate(fleet.plans):
            status = fleet.stream.status[k] if k < fleet.stream.count else {}
            pop = plan.params.population
            final = fleet.finals.get(k, {})
            state = "lost" if k in fleet.lost else ("stopped" if k in fleet.finals else "running")
            swept = self.losses.deleted(k) if self.losses is not None else 0
            out.append(
                {
                    "shard": k,
                    "state": state,
                    "lost_reason": fleet.lost.get(k),
                    "worker": fleet.workers[k] if k < len(fleet.workers) else None,
                    **(fleet.info[k] if k < len(fleet.info) else {}),
                    "sessions": pop.sessions,
                    "first_session": plan.first_session,
                    "adopted_from": plan.adopted_from,
                    "awake": getattr(pop, "awake", None),  # a turnover's
                    "target_rps": getattr(pop, "target_rps", None),  # turnover's, cold-resume's
                    "phase": status.get("phase"),
                    "start_skew_ms": status.get("start_skew_ms"),
                    "actors_created": final.get("created", status.get("actors_created", 0)),
                    "actors_deleted": final.get("deleted", status.get("actors_deleted", 0)) + swept,
                }
            )
        return out

    def books(self) -> dict[str, Any]:
        fleet, stream = self.fleet, self.fleet.stream
        rows = self.shard_rows()
        misconfigured: dict[str, str] = {}
        for status in stream.status:
            for code, line in (status.get("misconfigured") or {}).items():
                misconfigured.setdefault(code, line)
        return {
            "actors_created": sum(r["actors_created"] for r in rows),
            "actors_deleted": sum(r["actors_deleted"] for r in rows),
            "leaked_actors": self.leaks(),
            "misconfigured": misconfigured,
            **({"reference": self.reference.status()} if self.reference is not None else {}),
            "shards": rows,
            "generator": {
                "shards": fleet.count,
                "cluster": self.params.generator.cluster or "local",
                "lost": sorted(fleet.lost),
                "min_shards": self.params.generator.shards_needed(len(fleet.first_split)),
                "losses": [
                    {
                        "shard": loss.shard,
                        "at_unix": loss.at,
                        "reason": loss.reason,
                        "carried_on_unix": loss.back,
                        "carried_by": loss.carried_by,
                        "stages_s": loss.stages,  # swept, opened, preflight, register, fill
                    }
                    for loss in stream.losses
                ],
                # The common intended t0 and how late each shard's loop reached its start.
                "t0_unix": fleet.start_unix.get(0),
                "start_skew_ms": {
                    str(k): row["start_skew_ms"]
                    for k, row in enumerate(rows)
                    if row["start_skew_ms"] is not None
                },
                "merge_ms_per_delta": (
                    1e3 * stream.merge_seconds / stream.merged_deltas
                    if stream.merged_deltas
                    else None
                ),
            },
        }

    def final_stats(self) -> FinalStats:
        """The merged stream's whole run (every shard has stopped: nothing is left out), the
        turnover_window rows over it and each shard's health file."""
        if not self.opened:
            return FinalStats(None)
        rec = self.recorder
        rec.flush(now_ns() + NS)
        whole = rec.window_seconds(rec.first_second, rec.closed_until)
        rows = self.shard_rows()
        files = {}
        for k in range(self.fleet.count):
            counts = self.fleet.finals.get(k, {}).get("counts")  # each row's, as the shard saw
            health = self.fleet.stream.health_summary(k)
            files[f"shards/{k}/health.json"] = {**rows[k], **health, "counts": counts}
        return FinalStats(whole, self._population_rows(), None, files)

    def _level_segments(self) -> list[tuple[int, float]]:
        """(start, level) of each load level from the common t0 on."""
        t0 = self.fleet.t0_ns
        assert t0 is not None
        segments = [(t0, 1.0)]
        for at, level in self.level_changes:
            if at <= t0:  # the first hold's own level
                segments = [(t0, level)]
            else:
                segments.append((at, level))
        return segments

    def _population_rows(self) -> dict[str, dict[str, Any]]:
        """The turnover_window rows over the merged stream, one per level: whole seconds from
        the common t0 to the stop of the load, at the whole run's target
        (TurnoverPopulation.summary_rows)."""
        population = self.params.population
        if population.kind != "turnover" or self.fleet.t0_ns is None:
            return {}
        return level_rows(
            self.recorder,
            self._level_segments(),
            self.load_stopped_ns or now_ns(),
            target_rps=population.target_rps,
            awake=population.awake,
        )


async def _within(seconds: float, awaitable: Awaitable[T]) -> T:
    """`awaitable`, or TimeoutError after `seconds` (asyncio.wait_for is banned: pyproject)."""
    async with asyncio.timeout(seconds):
        return await awaitable


__all__ = ["ShardedLoad"]
