"""Failure lines for people, at a bounded rate.

A failure storm (a dead substrate, a full pool) can produce thousands of failures a second;
a log line each would block the loop on file writes and bury the story. The first failure
of each code in every interval is logged as it happens; the rest are counted and summed up
in one line per interval. The stats rows keep every failure either way.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

log = logging.getLogger("agentsession")

INTERVAL_S = 10.0


class FailureLog:
    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._since = time.monotonic()
        self._seen: set[str] = set()
        self._held: Counter[str] = Counter()

    def failure(self, code: str, line: str) -> None:
        self.summarise()
        if code in self._seen:
            self._held[code] += 1
        else:
            self._seen.add(code)
            log.warning("%s", line)

    def summarise(self, *, force: bool = False) -> None:
        """Log what was held back once the interval is over (or now, when forced)."""
        if not force and time.monotonic() - self._since < self.interval_s:
            return
        if self._held:
            counts = ", ".join(f"{code} ×{n}" for code, n in self._held.most_common())
            held, seconds = sum(self._held.values()), time.monotonic() - self._since
            log.warning("… and %d more failures in the last %.0fs: %s", held, seconds, counts)
        self._since = time.monotonic()
        self._seen.clear()
        self._held.clear()
