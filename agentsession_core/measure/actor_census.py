"""The substrate's own count of the run's actors by state, for `locust_actors{state}` on the
run's /metrics (docs/SPEC.md §5.7; measure/locust_metrics.py).

Upstream's dashboards chart actors in four states; the substrate's listing (ListActors,
`Substrate.list_actors`) names the control API's statuses (docs/SPEC.md §2.1, the ate wire's
ActorState). The census maps them:

- RUNNING and RESUMING: `running` (a resuming actor is being woken for a request: on its
  way to serving, no longer parked);
- SUSPENDING and PAUSING: `hibernate_pending` (asked to park, not parked yet);
- SUSPENDED and PAUSED: `hibernated`;
- CRASHED: `crashed`.

DELETING, REVERTING and a status newer than the wire notes (UNKNOWN_<n>) are none of the four:
counted in `unmapped`, not shown as one of them.

The listing is a control-plane call of its own, so it is taken at a bounded rate
(`interval_seconds`, 5 s) from a task of its own, off the hot path: a slow or failing listing
delays only the next census (each listing has `interval_seconds` to answer), never a session or
the reporter, and a scrape reads the last census without waiting for one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.interface import ActorInfo

log = logging.getLogger("agentsession")

CENSUS_INTERVAL_S = 5.0
NO_ATESPACE = "NOT_FOUND"  # the listing's answer before the run's atespace exists
HIBERNATED, RUNNING, HIBERNATE_PENDING, CRASHED = (
    "hibernated",
    "running",
    "hibernate_pending",
    "crashed",
)
STATES = (HIBERNATED, RUNNING, HIBERNATE_PENDING, CRASHED)
STATE_OF_STATUS = {
    "RUNNING": RUNNING,
    "RESUMING": RUNNING,
    "SUSPENDING": HIBERNATE_PENDING,
    "PAUSING": HIBERNATE_PENDING,
    "SUSPENDED": HIBERNATED,
    "PAUSED": HIBERNATED,
    "CRASHED": CRASHED,
}


def count_states(actors: list[ActorInfo]) -> tuple[dict[str, int], int]:
    """({state: actors} with every one of the four states, unmapped actors)."""
    counts = dict.fromkeys(STATES, 0)
    unmapped = 0
    for actor in actors:
        state = STATE_OF_STATUS.get(actor.status)
        if state is None:
            unmapped += 1
        else:
            counts[state] += 1
    return counts, unmapped


@dataclass(frozen=True)
class Census:
    """One listing's counts, and when it was taken (wall clock)."""

    counts: dict[str, int]
    unmapped: int
    taken_unix: float


Listing = Callable[[], Awaitable[list[ActorInfo]]]


class ActorCensus:
    """The last census of the run's actors, renewed every `interval_seconds` by `run()`."""

    def __init__(self, listing: Listing, *, interval_seconds: float = CENSUS_INTERVAL_S) -> None:
        if not interval_seconds > 0:
            raise ValueError(f"interval_seconds {interval_seconds}: must be > 0")
        self.listing = listing
        self.interval_seconds = interval_seconds
        self.last: Census | None = None
        self.failures = 0
        self.last_error: str | None = None

    async def take(self) -> Census | None:
        """One census now (None when the listing failed or took longer than an interval;
        the previous census stays the last)."""
        try:
            async with asyncio.timeout(self.interval_seconds):
                actors = await self.listing()
        except SubstrateError as exc:
            if exc.code != NO_ATESPACE:
                self._failed(exc)
                return None
            actors = []  # before preflight makes the atespace: no actor yet
        except Exception as exc:  # a census is a view: a failure is counted, never fatal
            self._failed(exc)
            return None
        counts, unmapped = count_states(actors)
        self.last = Census(counts, unmapped, time.time())
        return self.last

    def _failed(self, exc: Exception) -> None:
        self.failures += 1
        why = str(exc) or f"no answer within {self.interval_seconds:g} s"
        self.last_error = f"{type(exc).__name__}: {why}"
        if self.failures == 1:  # said once: the watchdog speaks for an outage
            log.warning("actor census: the substrate's listing failed: %s", self.last_error)

    async def run(self) -> None:
        """A census every interval, on intended times (a slow listing does not push the
        next one later), until cancelled."""
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            await self.take()
            next_at += self.interval_seconds
            now = loop.time()
            if next_at < now:  # a listing slower than the interval: skip, never catch up
                next_at = now + self.interval_seconds
            await asyncio.sleep(next_at - now)


__all__ = [
    "CENSUS_INTERVAL_S",
    "CRASHED",
    "HIBERNATED",
    "HIBERNATE_PENDING",
    "RUNNING",
    "STATES",
    "STATE_OF_STATUS",
    "ActorCensus",
    "Census",
    "count_states",
]
