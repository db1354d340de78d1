"""Losing a shard and carrying its sessions on: the part of a ShardedRun that deals with a
shard gone mid-run (docs/SPEC.md §5.8; the coordinator's module docstring tells the story).

A shard is lost when a call to it fails because its worker is gone, or when it stays silent
(the pump's drains). Its actors are deleted by the coordinator (sweep.py; a paired run's on
both arms). Before the hold, or below `generator.min_shards`, the loss ends the run void;
in the hold its sessions are re-planned over the survivors (split.replan), each part going
through preflight, registration and fill to the next whole second's start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from agentsession_core.engine.shards.split import ShardPlan, replan
from agentsession_core.engine.shards.stream import Loss
from agentsession_core.engine.shards.sweep import Swept, sweep
from agentsession_core.errors import AgentsessionError

if TYPE_CHECKING:
    from agentsession_core.engine.params import RunParams
    from agentsession_core.engine.shards.cluster import ShardCluster
    from agentsession_core.engine.shards.reference import ShardedReference
    from agentsession_core.engine.shards.stream import ShardStream
    from agentsession_core.script.mix import ScriptMix
    from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")
STOP_LOST_S = 10.0  # how long a shard lost by its silence gets to stop and clean up itself


class ShardLosses:
    """A ShardedRun's lost shards: the sweep of their actors and the carry-on of their
    sessions. Mixed into ShardedRun, whose state it reads (declared below for the types)."""

    def _init_losses(self) -> None:
        self.lost: dict[int, str] = {}
        self.ended: str | None = None  # the loss the run could not go on after: it ends void
        self.swept: dict[int, Swept] = {}
        self._sweeps: dict[int, asyncio.Task[None]] = {}
        self._carry_ons: dict[int, asyncio.Task[None]] = {}
        self._replanning = asyncio.Lock()

    if TYPE_CHECKING:  # the ShardedRun's own
        params: RunParams
        atespace: str
        phase: str
        level: float
        stream: ShardStream | None
        plans: list[ShardPlan]
        workers: list[str]
        known_workers: set[str]
        actors: list[Any]
        futures: list[Any]
        shard_info: list[dict[str, Any]]
        shard_start_unix: dict[int, int]
        client: Substrate | None
        cluster: ShardCluster | None
        reference: ShardedReference | None
        script: ScriptMix | None
        _started: asyncio.Event

        @property
        def live_shards(self) -> list[int]: ...
        @property
        def live_workers(self) -> list[str]: ...
        def stop_reason(self) -> str | None: ...
        async def _all(self, method: str, *args: Any, shards: list[int] | None = None) -> None: ...
        async def _apply_level(self) -> None: ...

    async def _lose(self, k: int, why: str, *, silent: bool = False) -> None:
        """Shard `k` is lost (`silent`: it stopped answering, its worker may still run)."""
        if k in self.lost or self.stream is None:
            return
        worker = self.workers[k] if k < len(self.workers) else "?"
        at = time.time()
        clock = time.strftime("%H:%M:%S", time.gmtime(at))
        reason = self.lost[k] = f"shard {k} lost at {clock} UTC (worker {worker}): {why}"
        log.error("%s", reason)
        self.stream.drop(k)
        self._started.set()  # a carry-on waiting for this shard's start waits no more
        sweeping = self._stop_and_sweep(k) if silent else self._sweep(k)
        self._sweeps[k] = asyncio.create_task(sweeping, name=f"sweep-shard-{k}")
        needed = self.params.generator.shards_needed(len(self.plans_of_first_split))
        if self.phase != "hold" or not self.live_shards:
            self.ended = self.ended or reason  # before the hold nothing is carried on
        elif len(self.live_workers) < needed:
            self.ended = self.ended or (
                f"{reason}; {len(self.live_workers)} of {needed} shards needed "
                "(generator.min_shards) remain"
            )
        else:
            loss = Loss(k, at, reason)
            self.stream.losses.append(loss)
            self._carry_ons[k] = asyncio.create_task(self._carry_on(loss), name=f"carry-on-{k}")

    @property
    def plans_of_first_split(self) -> list[ShardPlan]:
        return [plan for plan in self.plans if plan.adopted_from is None]

    async def _stop_and_sweep(self, k: int) -> None:
        """A shard counted lost by its silence may still run (a starved worker, not a dead
        one): it is told to stop its load and delete its own actors first (bounded; a dead
        worker fails at once), so it creates nothing under the names its sessions will have
        elsewhere; then the coordinator deletes what is left."""
        cleanup = self.params.cleanup
        with contextlib.suppress(Exception):
            async with asyncio.timeout(cleanup.stop_grace_seconds + STOP_LOST_S):
                await self.actors[k].finish()
        await self._sweep(k)

    async def _sweep(self, k: int) -> None:
        """Delete lost shard `k`'s actors (sweep.py), a paired run's on both arms."""
        assert self.stream is not None and self.client is not None
        plan = self.plans[k]
        self.stream.names[k] = await sweep(
            self.client,
            self.atespace,
            plan.owns,
            f"shard {k} ({plan.actor_prefix}-*)",
            self.stream.names[k],
            self.params.cleanup,
            self.swept.setdefault(k, Swept()),
        )
        if self.reference is not None:
            names = self.stream.reference_names
            names[k] = await self.reference.sweep(k, plan, names[k])

    async def _carry_on(self, loss: Loss) -> None:
        """Lost shard `loss.shard`'s sessions, once its actors are deleted, re-created on the
        surviving workers: one new shard per survivor with its part (replan), through
        preflight, registration and fill to the next whole second's start."""
        k = loss.shard
        try:
            async with self._replanning:  # one re-plan at a time: the shard lists grow
                await asyncio.gather(self._sweeps[k], return_exceptions=True)
                loss.stages["swept"] = time.time() - loss.at
                await self._start_parts(loss)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            line = f"{loss.reason}; its sessions could not be carried on: {exc}"
            log.error("%s", line)
            self.ended = self.ended or line

    async def _start_parts(self, loss: Loss) -> None:
        assert self.stream is not None and self.cluster is not None
        if self.stop_reason() is not None or self.phase != "hold":
            return
        survivors = self.live_workers
        # One part per surviving shard, placed first on a spare: a worker that was up when the
        # run started and runs no shard (its process is warm); then beside a survivor (two
        # engines in one process share its GIL); last on a worker that came up since (the
        # lost one restarted by its nanny: still importing, seconds away from an actor).
        alive = set(await self.cluster.workers())
        busy = {self.workers[k] for k in self.live_shards}
        spare = sorted((alive & self.known_workers) - busy)
        late = sorted(alive - self.known_workers - busy)
        places = spare + [w for w in survivors if w in alive] + late
        if not places:
            raise AgentsessionError("no live worker left in the cluster")
        count = min(len(survivors), len(places))
        parts = replan(self.plans[loss.shard], count, len(self.plans))
        for plan, worker in zip(parts, places, strict=False):
            index = self.stream.grow()
            assert index == plan.index == len(self.plans)
            self.plans.append(plan)
            self.workers.append(worker)
        indices = [plan.index for plan in parts]
        started = await asyncio.gather(
            *(self.cluster.start_actor(i, self.workers[i]) for i in indices)
        )
        self.futures.extend(f for f, _ in started)
        self.actors.extend(a for _, a in started)
        assert self.script is not None
        texts = self.script.encode()
        opened = (self.actors[i].open(self.plans[i], texts) for i in indices)
        self.shard_info.extend(await asyncio.gather(*opened))
        loss.carried_by = indices
        loss.stages["opened"] = time.time() - loss.at
        for phase in ("preflight", "register", "fill"):
            await self._all("phase", phase, shards=indices)
            loss.stages[phase] = time.time() - loss.at
        while not all(i in self.shard_start_unix or i in self.lost for i in indices):
            self._started.clear()
            await self._started.wait()  # the pump gives them their start (_release_t0)
        if self.level != 1.0:
            await self._apply_level()
        loss.back = float(max(self.shard_start_unix.get(i, 0) for i in indices) or time.time())
        stages = ", ".join(f"{name} {at:.1f}s" for name, at in loss.stages.items())
        log.warning("%s (after the loss: %s)", loss.line, stages)


__all__ = ["STOP_LOST_S", "ShardLosses"]
