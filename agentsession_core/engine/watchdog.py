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
                if getattr(exc, "code", TIMEOUT) not in (TRANSPORT, TIMEOUT):
                    misses = 0  # it answered, even if with an error: it is alive
                    continue
                misses += 1
                if misses >= MISSES:
                    self.failure = f"substrate unreachable for {misses * EVERY_S:.0f}s ({exc})"
                    log.error("%s", self.failure)
