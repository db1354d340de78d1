"""The substrate watchdog: notices a substrate that stopped answering (killed, network
gone) so the run fails with that reason instead of hammering a corpse until the hold ends;
and one that answers again after missed probes (restarted), so the population can check
what it believes of its actors against the substrate (`on_back`: Engine.substrate_back).
Once a probe went unanswered it probes every RETRY_S, so that return is seen promptly; an
outage shorter than the probe period can fall between two probes and go unseen, and what it
cost is then found as each actor is next touched.

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
# Gone: MISSES probes in a row unanswered, and silent for as long as MISSES probes EVERY_S
# apart take (probes come faster once one was missed).
MISSES = 5
# After a miss it is probed this often (at most EVERY_S), so its return is seen within half a
# second: until then the population cannot check what the outage cost it.
RETRY_S = 0.5


class Watchdog:
    def __init__(
        self,
        substrate: Substrate,
        params: RunParams,
        *,
        on_back: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.substrate = substrate
        self.params = params
        self.on_back = on_back
        self.clock = clock
        self.failure: str | None = None
        self.outages = 0  # times it stopped answering, then answered again
        self.stopped = False

    def stop(self) -> None:
        """Watch no more and say nothing more (the run was refused)."""
        self.stopped = True

    async def run(self) -> None:
        misses = 0
        # No answer seen yet: the silence is counted from the watchdog's start.
        last_answer = self.clock()
        namespace, name = self.params.target.template_ref
        while self.failure is None and not self.stopped:
            await asyncio.sleep(min(RETRY_S, EVERY_S) if misses else EVERY_S)
            if self.stopped:
                return
            try:
                async with asyncio.timeout(PROBE_TIMEOUT_S):
                    await self.substrate.get_template(namespace, name)
            except (SubstrateError, TimeoutError) as exc:
                if self.stopped:
                    return
                if _unanswered(exc):
                    misses += 1
                    silent = self.clock() - last_answer
                    if misses >= MISSES and silent >= MISSES * EVERY_S:
                        self.failure = (
                            f"substrate unreachable for {silent:.0f}s "
                            f"({misses} probes in a row unanswered; last: {_reason(exc)})"
                        )
                        log.error("%s", self.failure)
                    continue
                # It answered, even if with an error: it is alive.
            if misses:
                self.outages += 1
                silent = self.clock() - last_answer
                log.warning("substrate answers again after %.1f s without an answer", silent)
                if self.on_back is not None:
                    self.on_back()
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
