"""The engine's one retry policy for a control call that failed in a way a later attempt may
not (docs/SPEC.md §3.4): wait 0.2 s, then 0.4 s, 0.8 s, … doubling up to every 5 s.

A refused CreateActor (populations/base.py), a preflight call (engine.py) and a cleanup
deletion (ledger.py) all wait by it; each caller bounds it its own way (the registration
deadline, a number of attempts, the cleanup deadline).
"""

from __future__ import annotations

from agentsession_core.substrate.errors import FailureClass, SubstrateError

FIRST_S = 0.2
MAX_S = 5.0


class Backoff:
    """The waits between attempts: `next()` is the wait before the next retry."""

    __slots__ = ("_wait",)

    def __init__(self) -> None:
        self._wait = FIRST_S

    def next(self) -> float:
        wait = self._wait
        self._wait = min(2 * wait, MAX_S)
        return wait

    def next_ns(self) -> int:
        return int(self.next() * 1e9)


def transient(exc: SubstrateError) -> bool:
    """A failure that another attempt may not meet: capacity, an outage, a reset connection,
    a timeout, an INTERNAL (§3.4's retry-later and counted classes). A refused credential, a
    bad request and an answer saying the thing is gone are final."""
    return exc.failure_class in (FailureClass.RETRY_LATER, FailureClass.COUNT)
