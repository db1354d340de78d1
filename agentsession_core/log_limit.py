"""One kind of log line at a bounded rate.

Under faults a routine line can come thousands of times a minute (1,018 "replaced by" lines in
one minute were seen): each is a file write on the loop, and together they bury the lines that
tell the story. A LogLimiter lets the first few lines of a burst through as they come, then
holds the rest back and says how many in one summary line per interval. The numbers stay
exact in the stats either way; this only decides what a person reads.

It keeps no timer: it looks at its clock when a line comes and when its owner calls
`summarise` (the run's reporter does once a second, and forces it at the end), so a storm's
tail is summed up even when no further line comes. The clock is injectable for tests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from agentsession_core.logs import LOGGER_NAME

BURST = 5  # lines shown as they come, before holding back starts
INTERVAL_S = 10.0  # at most one summary line per interval


class LogLimiter:
    """Lines of one kind (`what`, plural: "replacements"): the first `burst` are logged as
    they come; past that, they are counted and summed up at most once per `interval_s`
    ("… and 312 more replacements in the last 10s"). Lines show in full again once a whole
    interval has passed with nothing held back."""

    def __init__(
        self,
        what: str,
        *,
        burst: int = BURST,
        interval_s: float = INTERVAL_S,
        level: int = logging.INFO,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.burst = burst
        self.interval_s = interval_s
        self.level = level
        self.logger = logger or logging.getLogger(LOGGER_NAME)
        self.clock = clock
        self._since = clock()  # start of the current interval
        self._shown = 0  # lines shown since the last quiet interval
        self._held = 0  # lines held back in the current interval

    def log(self, msg: str, *args: object) -> None:
        """One line: shown, or counted toward the next summary."""
        self.summarise()
        if self._shown < self.burst:
            self._shown += 1
            self.logger.log(self.level, msg, *args)
        else:
            self._held += 1

    def summarise(self, *, force: bool = False) -> None:
        """Once the interval is over (or now, when forced): one line for what was held back,
        and a new interval."""
        now = self.clock()
        if not force and now - self._since < self.interval_s:
            return
        if self._held:
            self.logger.log(
                self.level,
                "… and %d more %s in the last %.0fs",
                self._held,
                self.what,
                now - self._since,
            )
        else:
            self._shown = 0  # a quiet interval: the next burst shows in full again
        self._since = now
        self._held = 0
