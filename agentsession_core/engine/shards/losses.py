"""Losing a shard and carrying its sessions on: the part of a sharded load that deals with a
shard gone mid-run (docs/SPEC.md §5.8; load.py's module docstring tells the story).

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
from typing import Protocol

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.shards.cluster import ShardCluster
from agentsession_core.engine.shards.fleet import ShardFleet
from agentsession_core.engine.shards.reference import ShardedReference
from agentsession_core.engine.shards.split import replan
from agentsession_core.engine.shards.stream import Loss
from agentsession_core.engine.shards.sweep import Swept, sweep
from agentsession_core.errors import AgentsessionError
from agentsession_core.script.mix import ScriptMix
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")
STOP_LOST_S = 10.0  # how long a shard lost by its silence gets to stop and clean up itself


class Carrier(Protocol):
    """What a carry-on needs of its load (load.py `ShardedLoad`)."""

    @property
    def phase(self) -> str: ...
    @property
    def level(self) -> float: ...
    def stopping(self) -> bool: ...
    async def apply_level(self) -> None: ...


class ShardLosses:
    """A sharded load's lost shards: the sweep of their actors and the carry-on of their
    sessions."""

    def __init__(
        self,
        fleet: ShardFleet,
        params: RunParams,
        atespace: str,
        client: Substrate,
        cluster: ShardCluster,
        reference: ShardedReference | None,
        script: ScriptMix,
        load: Carrier,
    ) -> None:
        self.fleet = fleet
        self.params = params
        self.atespace = atespace
        self.client = client
        self.cluster = cluster
        self.reference = reference
        self.script = script
        self.load = load
        self.ended: str | None = None  # the loss the run could not go on after: it ends void
        self.swept: dict[int, Swept] = {}
        self.sweeps: dict[int, asyncio.Task[None]] = {}
        self.carry_ons: dict[int, asyncio.Task[None]] = {}
        self._replanning = asyncio.Lock()

    async def lose(self, k: int, why: str, *, silent: bool = False) -> None:
        """Shard `k` is lost (`silent`: it stopped answering, its worker may still run)."""
        fleet = self.fleet
        if k in fleet.lost:
            return
        worker = fleet.workers[k] if k < len(fleet.workers) else "?"
        at = time.time()
        clock = time.strftime("%H:%M:%S", time.gmtime(at))
        reason = fleet.lost[k] = f"shard {k} lost at {clock} UTC (worker {worker}): {why}"
        log.error("%s", reason)
        fleet.stream.drop(k)
        fleet.started.set()  # a carry-on waiting for this shard's start waits no more
        sweeping = self._stop_and_sweep(k) if silent else self.sweep(k)
        self.sweeps[k] = asyncio.create_task(sweeping, name=f"sweep-shard-{k}")
        needed = self.params.generator.shards_needed(len(fleet.first_split))
        if self.load.phase != "hold" or not fleet.live:
            self.ended = self.ended or reason  # before the hold nothing is carried on
        elif len(fleet.live_workers) < needed:
            self.ended = self.ended or (
                f"{reason}; {len(fleet.live_workers)} of {needed} shards needed "
                "(generator.min_shards) remain"
            )
        else:
            loss = Loss(k, at, reason)
            fleet.stream.losses.append(loss)
            self.carry_ons[k] = asyncio.create_task(self._carry_on(loss), name=f"carry-on-{k}")

    async def _stop_and_sweep(self, k: int) -> None:
        """A shard counted lost by its silence may still run (a starved worker, not a dead
        one): it is told to stop its load and delete its own actors first (bounded; a dead
        worker fails at once), so it creates nothing under the names its sessions will have
        elsewhere; then the load deletes what is left."""
        cleanup = self.params.cleanup
        with contextlib.suppress(Exception):
            async with asyncio.timeout(cleanup.stop_grace_seconds + STOP_LOST_S):
                await self.fleet.actors[k].finish()
        await self.sweep(k)

    async def sweep(self, k: int) -> None:
        """Delete lost shard `k`'s actors (sweep.py), a paired run's on both arms."""
        stream, plan = self.fleet.stream, self.fleet.plans[k]
        stream.names[k] = await sweep(
            self.client,
            self.atespace,
            plan.owns,
            f"shard {k} ({plan.actor_prefix}-*)",
            stream.names[k],
            self.params.cleanup,
            self.swept.setdefault(k, Swept()),
        )
        if self.reference is not None:
            names = stream.reference_names
            names[k] = await self.reference.sweep(k, plan, names[k])

    async def settle(self) -> None:
        """On the way out: no carry-on goes on; every sweep ends, and each lost shard is
        swept once more (a dying shard may have created more)."""
        for carrying in self.carry_ons.values():
            carrying.cancel()
        await asyncio.gather(*self.carry_ons.values(), return_exceptions=True)

    async def sweep_again(self) -> None:
        await asyncio.gather(*self.sweeps.values(), return_exceptions=True)
        for k in list(self.fleet.lost):
            await self.sweep(k)

    def leaks(self) -> list[dict[str, str]]:
        return [leak for s in self.swept.values() for leak in s.leaks]

    def deleted(self, k: int) -> int:
        swept = self.swept.get(k)
        return swept.deleted if swept else 0

    async def _carry_on(self, loss: Loss) -> None:
        """Lost shard `loss.shard`'s sessions, once its actors are deleted, re-created on the
        surviving workers: one new shard per survivor with its part (replan), through
        preflight, registration and fill to the next whole second's start."""
        k = loss.shard
        try:
            async with self._replanning:  # one re-plan at a time: the shard lists grow
                await asyncio.gather(self.sweeps[k], return_exceptions=True)
                loss.stages["swept"] = time.time() - loss.at
                await self._start_parts(loss)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            line = f"{loss.reason}; its sessions could not be carried on: {exc}"
            log.error("%s", line)
            self.ended = self.ended or line

    async def _start_parts(self, loss: Loss) -> None:
        fleet = self.fleet
        if self.load.stopping() or self.load.phase != "hold":
            return
        survivors = fleet.live_workers
        # One part per surviving shard, placed first on a spare: a worker that was up when the
        # run started and runs no shard (its process is warm); then beside a survivor (two
        # engines in one process share its GIL); last on a worker that came up since (the
        # lost one restarted by its nanny: still importing, seconds away from an actor).
        alive = set(await self.cluster.workers())
        busy = {fleet.workers[k] for k in fleet.live}
        spare = sorted((alive & fleet.known_workers) - busy)
        late = sorted(alive - fleet.known_workers - busy)
        places = spare + [w for w in survivors if w in alive] + late
        if not places:
            raise AgentsessionError("no live worker left in the cluster")
        count = min(len(survivors), len(places))
        parts = replan(fleet.plans[loss.shard], count, len(fleet.plans))
        for plan, worker in zip(parts, places, strict=False):
            index = fleet.stream.grow()
            assert index == plan.index == len(fleet.plans)
            fleet.plans.append(plan)
            fleet.workers.append(worker)
        indices = [plan.index for plan in parts]
        started = await asyncio.gather(
            *(self.cluster.start_actor(i, fleet.workers[i]) for i in indices)
        )
        fleet.futures.extend(f for f, _ in started)
        fleet.actors.extend(a for _, a in started)
        texts = self.script.encode()
        opened = (fleet.actors[i].open(fleet.plans[i], texts) for i in indices)
        fleet.info.extend(await asyncio.gather(*opened))
        loss.carried_by = indices
        loss.stages["opened"] = time.time() - loss.at
        for phase in ("preflight", "register", "fill"):
            await fleet.each(self.lose, "phase", phase, shards=indices)
            loss.stages[phase] = time.time() - loss.at
        while not all(i in fleet.start_unix or i in fleet.lost for i in indices):
            fleet.started.clear()
            await fleet.started.wait()  # the pump gives them their start (_release_t0)
        if self.load.level != 1.0:
            await self.load.apply_level()
        loss.back = float(max(fleet.start_unix.get(i, 0) for i in indices) or time.time())
        stages = ", ".join(f"{name} {at:.1f}s" for name, at in loss.stages.items())
        log.warning("%s (after the loss: %s)", loss.line, stages)


__all__ = ["STOP_LOST_S", "Carrier", "ShardLosses"]
