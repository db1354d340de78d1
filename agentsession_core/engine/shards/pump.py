"""The pump: a sharded load's once-a-second drain of every shard (docs/SPEC.md §5.8;
load.py's module docstring tells the story).

Every shard is drained once a second; its deltas merge into the run's one recorder
(stream.py) and its log lines are said as the shard's. A shard that stays silent
LOST_AFTER_MISSES drains in a row, or whose call fails because its worker is gone, is lost
(losses.py). Once every live shard waits at the fill's barrier the common t0 is released (a
carry-on shard gets the next whole second), and each merged second is announced: the run
writes its files then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time

from agentsession_core.engine.shards.fleet import Lose, ShardFleet
from agentsession_core.measure.recorder import Recorder

log = logging.getLogger("agentsession")

# Every shard is drained once a second, this far into it: a shard ships its last second just
# after it ends (context.FLUSH_AFTER_NS), so a drain then finds it; drains in between found
# nothing and were three quarters of the coordinator's calls (bench/RESULTS.md).
DRAIN_AT_S = 0.15
DRAIN_TIMEOUT_S = 2.0
LOST_AFTER_MISSES = 3  # failed drains in a row before a shard counts as lost
CATCH_UP_S = 5.0  # how long the end of a hold waits for the shards' last seconds
T0_LEAD_S = 0.5  # the common t0 is the first whole second at least this far ahead


def _until_next(phase_s: float) -> float:
    """Seconds from now to the next wall-clock instant `phase_s` into a second."""
    now = time.time()
    at = math.floor(now) + phase_s
    return (at if at > now else at + 1.0) - now


class ShardPump:
    """The drains of one fleet into one recorder, the t0 barrier, the merged seconds."""

    def __init__(self, fleet: ShardFleet, recorder: Recorder, lose: Lose) -> None:
        self.fleet = fleet
        self.recorder = recorder
        self.lose = lose
        self.misses: dict[int, int] = {}
        self.merged = asyncio.Event()  # set when a new second is merged
        self._last_second = 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(_until_next(DRAIN_AT_S))
            await self.drain_all()
            await self._release_t0()
            if (second := self.recorder.closed_until) != self._last_second:
                self._last_second = second
                self.merged.set()

    async def drain_all(self) -> None:
        await asyncio.gather(*(self.drain(k) for k in self.fleet.live))

    async def next_second(self) -> None:
        """Until the next merged second (or a second: the run's status still updates while
        no shard answers)."""
        self.merged.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await self.merged.wait()

    async def drain(self, k: int) -> None:
        fleet = self.fleet
        try:
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                deltas = await fleet.actors[k].drain()
        except Exception as exc:
            self.misses[k] = self.misses.get(k, 0) + 1
            # Only a shard that did not answer in time may still run; one whose call failed
            # otherwise (Dask: "Worker holding Actor was lost") is gone.
            silent = isinstance(exc, TimeoutError) and not fleet.is_lost(k)
            if not silent or self.misses[k] >= LOST_AFTER_MISSES:
                why = f"{type(exc).__name__}: {exc}".rstrip(": ")
                await self.lose(k, why, silent=silent)
            return
        self.misses[k] = 0
        for delta in deltas:
            fleet.stream.add(k, delta)
            for level, line in delta.logs:
                log.log(level, "shard %d: %s", k, line)

    async def _release_t0(self) -> None:
        """Once every live shard waits at the fill's barrier: t0 for all of them. A shard that
        carries a lost shard's sessions on gets the next whole second once it waits there
        (on whole seconds, as the first t0: the gauges are sampled half a second off)."""
        fleet = self.fleet
        live = fleet.live
        waiting = [
            k
            for k in live
            if k not in fleet.start_unix and fleet.stream.status[k].get("waiting_t0")
        ]
        if not waiting or (fleet.t0_ns is None and len(waiting) < len(live)):
            return
        t0_unix_s = math.ceil(time.time() + T0_LEAD_S)
        t0_unix_ns = t0_unix_s * 1_000_000_000
        at = time.strftime("%H:%M:%S", time.gmtime(t0_unix_s))
        if fleet.t0_ns is None:
            fleet.t0_ns = t0_unix_ns - (time.time_ns() - time.monotonic_ns())
            log.info("common t0 for %d shards: %s UTC", len(live), at)
        else:
            log.info("shards %s start at %s UTC", ", ".join(map(str, waiting)), at)
        fleet.start_unix.update((k, t0_unix_s) for k in waiting)
        fleet.started.set()
        await asyncio.gather(
            *(fleet.actors[k].start_at(t0_unix_ns) for k in waiting), return_exceptions=True
        )

    async def caught_up(self, end_ns: int) -> None:
        """Until the merged stream holds every second before `end_ns` (or CATCH_UP_S)."""
        stream = self.fleet.stream
        wanted = self.recorder.second_of(end_ns)
        give_up = time.monotonic() + CATCH_UP_S
        while stream.merged_until < wanted and stream.live:
            if time.monotonic() > give_up:
                log.warning("shards still behind %ss after the hold ended", CATCH_UP_S)
                return
            await asyncio.sleep(0.05)
