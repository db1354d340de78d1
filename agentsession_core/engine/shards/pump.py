"""The pump: a ShardedRun's once-a-second drain of every shard (docs/SPEC.md §5.8; the
coordinator's module docstring tells the story).

Every shard is drained once a second; its deltas merge into the run's one recorder
(stream.py) and its log lines are said as the shard's. A shard that stays silent
LOST_AFTER_MISSES drains in a row, or whose call fails because its worker is gone, is lost
(losses.py). Once every live shard waits at the fill's barrier the common t0 is released (a
carry-on shard gets the next whole second), and stats_history.csv and status.json are written
once per merged second.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from agentsession_core.engine.shards import files

if TYPE_CHECKING:
    from agentsession_core.engine.shards.coordinator import ShardedRun
    from agentsession_core.engine.shards.stream import ShardStream
    from agentsession_core.measure.recorder import Recorder
    from agentsession_core.output.stats_files import HistoryWriter

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
    """A ShardedRun's drains, t0 barrier and once-a-second files. Mixed into ShardedRun,
    whose state it reads (declared below for the types)."""

    if TYPE_CHECKING:  # the ShardedRun's own
        stream: ShardStream | None
        recorder: Recorder
        actors: list[Any]
        futures: list[Any]
        shard_start_unix: dict[int, int]
        t0_ns: int | None
        _started: asyncio.Event
        _misses: dict[int, int]
        _last_report_second: int
        _last_progress: float
        history: HistoryWriter

        @property
        def live_shards(self) -> list[int]: ...
        async def _lose(self, k: int, why: str, *, silent: bool = False) -> None: ...
        async def _save_progress(
            self, history: dict[str, str], status: Callable[[], dict[str, Any]]
        ) -> None: ...

    async def _pump(self) -> None:
        while True:
            await asyncio.sleep(_until_next(DRAIN_AT_S))
            await asyncio.gather(*(self._drain(k) for k in self.live_shards))
            await self._release_t0()
            await self._report()

    async def _drain(self, k: int) -> None:
        assert self.stream is not None
        try:
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                deltas = await self.actors[k].drain()
        except Exception as exc:
            self._misses[k] = self._misses.get(k, 0) + 1
            # Only a shard that did not answer in time may still run; one whose call failed
            # otherwise (Dask: "Worker holding Actor was lost") is gone.
            silent = isinstance(exc, TimeoutError) and not await self._is_lost(k)
            if not silent or self._misses[k] >= LOST_AFTER_MISSES:
                why = f"{type(exc).__name__}: {exc}".rstrip(": ")
                await self._lose(k, why, silent=silent)
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
        """Once every live shard waits at the fill's barrier: t0 for all of them. A shard that
        carries a lost shard's sessions on gets the next whole second once it waits there
        (on whole seconds, as the first t0: the gauges are sampled half a second off)."""
        if self.stream is None:
            return
        live = self.live_shards
        waiting = [
            k
            for k in live
            if k not in self.shard_start_unix and self.stream.status[k].get("waiting_t0")
        ]
        if not waiting or (self.t0_ns is None and len(waiting) < len(live)):
            return
        t0_unix_s = math.ceil(time.time() + T0_LEAD_S)
        t0_unix_ns = t0_unix_s * 1_000_000_000
        at = time.strftime("%H:%M:%S", time.gmtime(t0_unix_s))
        if self.t0_ns is None:
            self.t0_ns = t0_unix_ns - (time.time_ns() - time.monotonic_ns())
            log.info("common t0 for %d shards: %s UTC", len(live), at)
        else:
            log.info("shards %s start at %s UTC", ", ".join(map(str, waiting)), at)
        self.shard_start_unix.update((k, t0_unix_s) for k in waiting)
        self._started.set()
        await asyncio.gather(
            *(self.actors[k].start_at(t0_unix_ns) for k in waiting), return_exceptions=True
        )

    async def _report(self) -> None:
        """stats_history.csv (+ .jsonl) and status.json once per merged second; a progress
        line."""
        second = self.recorder.closed_until
        if second == self._last_report_second:
            return
        self._last_report_second = second
        run = cast("ShardedRun", self)  # files.py reads the whole run
        texts = self.history.render_closed_files(self.recorder, files.sessions(run))
        await self._save_progress(texts, lambda: files.status_document(run, final=False))
        if time.monotonic() - self._last_progress >= 10.0:
            self._last_progress = time.monotonic()
            log.info("progress: %s", files.progress_line(run))

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
