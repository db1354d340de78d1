"""The substrate watchdog: notices a substrate that stopped answering (killed, network
gone) so the run fails with that reason instead of hammering a corpse until the hold ends;
and one that answers again after missed probes (restarted), so the population can check
what it believes of its actors against the substrate (`on_back`: Engine.substrate_back).

An outage shorter than the probe period can fall between two probes and go unseen; what it
cost is then found as each actor is next touched."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from agentsession_core.engine.params import RunParams
from agentsession_core.substrate.errors import TIMEOUT, TRANSPORT, SubstrateError
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")

EVERY_S = 2.0
MISSES = 5  # unanswered for (MISSES - 1) × EVERY_S after a first miss: the substrate is gone
# After a miss it is probed this often (at most EVERY_S), so its return is seen within half a
# second: until then the population cannot check what the outage cost it.
RETRY_S = 0.5


class Watchdog:
    def __init__(
        self,
        substrate: Substrate,
        params: RunParams,
        on_back: Callable[[], None] | None = None,
    ) -> None:
        self.substrate = substrate
        self.params = params
        self.on_back = on_back
        self.failure: str | None = None
        self.outages = 0  # times it stopped answering, then answered again

    async def run(self) -> None:
        misses = 0
        first_miss = 0.0
        namespace, name = self.params.target.template_ref
        loop = asyncio.get_running_loop()
        while self.failure is None:
            await asyncio.sleep(min(RETRY_S, EVERY_S) if misses else EVERY_S)
            try:
                await asyncio.wait_for(self.substrate.get_template(namespace, name), 5.0)
            except (SubstrateError, TimeoutError) as exc:
                if _unanswered(exc):
                    misses += 1
                    if misses == 1:
                        first_miss = loop.time()
                    gone_s = loop.time() - first_miss
                    if misses >= MISSES and gone_s >= (MISSES - 1) * EVERY_S:
                        self.failure = f"substrate unreachable for {gone_s:.0f}s ({exc})"
                        log.error("%s", self.failure)
                    continue
                # It answered, even if with an error: it is alive.
            if misses:
                self.outages += 1
                gone_s = loop.time() - first_miss
                log.warning("substrate answers again after %.1f s without an answer", gone_s)
                if self.on_back is not None:
                    self.on_back()
            misses = 0


def _unanswered(exc: Exception) -> bool:
    """No answer came back. gRPC (the ate wire) reports a dead or unreachable server as
    UNAVAILABLE or DEADLINE_EXCEEDED with no HTTP status, where the JSON wire says TRANSPORT or
    TIMEOUT; an UNAVAILABLE with a status is a server that answered."""
    if not isinstance(exc, SubstrateError):
        return True
    if exc.code in (TRANSPORT, TIMEOUT):
        return True
    return exc.status == 0 and exc.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
