"""The substrate watchdog: notices a substrate that stopped answering (killed, network
gone) so the run fails with that reason instead of hammering a corpse until the hold ends."""

from __future__ import annotations

import asyncio
import logging

from agentsession_core.engine.params import RunParams
from agentsession_core.substrate.errors import TIMEOUT, TRANSPORT, SubstrateError
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")

EVERY_S = 2.0
MISSES = 5  # consecutive unanswered probes before the substrate counts as gone


class Watchdog:
    def __init__(self, substrate: Substrate, params: RunParams) -> None:
        self.substrate = substrate
        self.params = params
        self.failure: str | None = None

    async def run(self) -> None:
        misses = 0
        namespace, name = self.params.target.template_ref
        while self.failure is None:
            await asyncio.sleep(EVERY_S)
            try:
                await asyncio.wait_for(self.substrate.get_template(namespace, name), 5.0)
                misses = 0
            except (SubstrateError, TimeoutError) as exc:
                if not _unanswered(exc):
                    misses = 0  # it answered, even if with an error: it is alive
                    continue
                misses += 1
                if misses >= MISSES:
                    self.failure = f"substrate unreachable for {misses * EVERY_S:.0f}s ({exc})"
                    log.error("%s", self.failure)


def _unanswered(exc: Exception) -> bool:
    """No answer came back. gRPC (the ate wire) reports a dead or unreachable server as
    UNAVAILABLE or DEADLINE_EXCEEDED with no HTTP status, where the JSON wire says TRANSPORT or
    TIMEOUT; an UNAVAILABLE with a status is a server that answered."""
    if not isinstance(exc, SubstrateError):
        return True
    if exc.code in (TRANSPORT, TIMEOUT):
        return True
    return exc.status == 0 and exc.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
