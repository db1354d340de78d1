"""The substrate watchdog: notices a substrate that stopped answering (killed, network
gone) so the run fails with that reason instead of hammering a corpse until the hold ends.

The failure line says how long the substrate has really been silent: the time since its last
answer on the monotonic clock, not the probe count times the probe interval, since each
unanswered probe also waits out its own timeout (five of them took ~35 s, not 10 s). And it
names why the last probe failed, even when the exception's text is empty (a bare
TimeoutError): an empty pair of parentheses tells the person reading it nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from agentsession_core.engine.params import RunParams
from agentsession_core.substrate.errors import TIMEOUT, TRANSPORT, SubstrateError
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")

EVERY_S = 2.0
PROBE_TIMEOUT_S = 5.0  # one probe's own deadline
MISSES = 5  # consecutive unanswered probes before the substrate counts as gone


class Watchdog:
    def __init__(
        self,
        substrate: Substrate,
        params: RunParams,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.substrate = substrate
        self.params = params
        self.clock = clock
        self.failure: str | None = None

    async def run(self) -> None:
        misses = 0
        # No answer seen yet: the silence is counted from the watchdog's start.
        last_answer = self.clock()
        namespace, name = self.params.target.template_ref
        while self.failure is None:
            await asyncio.sleep(EVERY_S)
            try:
                await asyncio.wait_for(
                    self.substrate.get_template(namespace, name), PROBE_TIMEOUT_S
                )
            except (SubstrateError, TimeoutError) as exc:
                if not _unanswered(exc):
                    # It answered, even if with an error: it is alive.
                    misses, last_answer = 0, self.clock()
                    continue
                misses += 1
                if misses >= MISSES:
                    silent = self.clock() - last_answer
                    self.failure = (
                        f"substrate unreachable for {silent:.0f}s "
                        f"({misses} probes in a row unanswered; last: {_reason(exc)})"
                    )
                    log.error("%s", self.failure)
            else:
                misses, last_answer = 0, self.clock()


def _unanswered(exc: Exception) -> bool:
    """No answer came back. gRPC (the ate wire) reports a dead or unreachable server as
    UNAVAILABLE or DEADLINE_EXCEEDED with no HTTP status, where the JSON wire says TRANSPORT or
    TIMEOUT; an UNAVAILABLE with a status is a server that answered."""
    if not isinstance(exc, SubstrateError):
        return True
    if exc.code in (TRANSPORT, TIMEOUT):
        return True
    return exc.status == 0 and exc.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")


def _reason(exc: Exception) -> str:
    """Why a probe failed, never empty: a SubstrateError's code (and message when it has
    one), the probe's own deadline for a bare timeout, else the exception's type and text."""
    if isinstance(exc, SubstrateError):
        message = exc.message.strip()
        return f"{exc.code}: {message}" if message else exc.code
    text = str(exc).strip()
    if isinstance(exc, TimeoutError) and not text:
        return f"no answer within the probe's {PROBE_TIMEOUT_S:g}s"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
