"""Live control of a running run (docs/SPEC.md §5.10): what a person changed by hand — the
level, a pause, a stop — and when.

`LiveControl` holds the state and the list of changes; run/control_api.py, its HTTP front,
applies a change to the run's load.
Every change is logged once, booked in stats_history.jsonl as a `control` record (the report
marks it on its charts from there) and voids the campaign window it falls in.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from agentsession_core.engine.context import now_ns
from agentsession_core.output.stats_files import CHANGE_RECORD_TYPE

log = logging.getLogger("agentsession")

MAX_LEVEL = 1000.0  # a load multiplier: the most a campaign level or a live change may ask
MANUAL = "manual"  # their source: a person through the control API

What = Literal["level", "pause", "resume", "stop"]


def clock(unix: float) -> str:
    """HH:MM:SS (UTC) of a unix time: how a change is named in a void reason."""
    return time.strftime("%H:%M:%S", time.gmtime(unix))


@dataclass(frozen=True)
class Change:
    what: What
    at_ns: int  # monotonic (the recorder's clock)
    at_unix: float
    level_before: float
    level_after: float

    @property
    def label(self) -> str:
        """`level 1 → 2.5`, `paused`, `resumed`, `stopped`: the chart mark's text."""
        if self.what == "level":
            return f"level {self.level_before:g} → {self.level_after:g}"
        return {"pause": "paused", "resume": "resumed", "stop": "stopped"}[self.what]

    @property
    def line(self) -> str:
        """`manual change at 20:01:02 (level 1 → 2.5)`: the log line and a void reason."""
        return f"manual change at {clock(self.at_unix)} ({self.label})"

    def record(self) -> dict[str, Any]:
        """The stats_history.jsonl record of this change."""
        return {
            "t": int(self.at_unix),
            "type": CHANGE_RECORD_TYPE,
            "name": self.what,
            "source": MANUAL,
            "at_unix": round(self.at_unix, 3),
            "level_before": self.level_before,
            "level": self.level_after,
            "label": self.label,
        }


class LiveControl:
    """The run's hand-made changes. Lives on the run's event loop; `take_records` may be
    called from the thread that writes the run's files (a deque pops atomically)."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.paused = False
        self.stop: Change | None = None
        self._paused_since_ns: int | None = None
        self._paused_spans: list[tuple[int, int]] = []  # closed (start, end), monotonic ns
        self._unbooked: deque[Change] = deque()

    def note(self, what: What, level_before: float, level_after: float) -> Change:
        """Record a change (already applied by the caller), say it in one line."""
        change = Change(what, now_ns(), time.time(), level_before, level_after)
        self.changes.append(change)
        self._unbooked.append(change)
        if what == "pause":
            self.paused, self._paused_since_ns = True, change.at_ns
        elif what == "resume" and self._paused_since_ns is not None:
            self._paused_spans.append((self._paused_since_ns, change.at_ns))
            self.paused, self._paused_since_ns = False, None
        elif what == "stop" and self.stop is None:
            self.stop = change
        log.warning("%s (control API)", change.line)
        return change

    @property
    def stop_line(self) -> str | None:
        """Why the hold ended early, when it was stopped by hand."""
        return None if self.stop is None else f"{self.stop.line} (control API)"

    def take_records(self) -> list[dict[str, Any]]:
        """The changes not yet booked in stats_history.jsonl."""
        out = []
        while self._unbooked:
            out.append(self._unbooked.popleft().record())
        return out

    def in_span(self, start_ns: int, end_ns: int) -> list[Change]:
        """The changes made while [start_ns, end_ns] ran."""
        return [c for c in self.changes if start_ns <= c.at_ns <= end_ns]

    def void_reason(self, start_ns: int, end_ns: int) -> str | None:
        """Why a judged window over [start_ns, end_ns] cannot be judged: a hand-made change
        inside it, or a pause that covered part of it (docs/SPEC.md §5.10)."""
        inside = self.in_span(start_ns, end_ns)
        if inside:
            return inside[0].line
        if self.paused_ns(start_ns, end_ns):
            pauses = [c for c in self.changes if c.what == "pause" and c.at_ns < start_ns]
            return f"paused by hand since {clock(pauses[-1].at_unix)}"
        return None

    def paused_ns(self, start_ns: int, end_ns: int) -> int:
        """How long the load was paused within [start_ns, end_ns]."""
        spans = list(self._paused_spans)
        if self._paused_since_ns is not None:
            spans.append((self._paused_since_ns, max(end_ns, self._paused_since_ns)))
        return sum(max(0, min(b, end_ns) - max(a, start_ns)) for a, b in spans)

    def summary(self) -> dict[str, Any]:
        """status.json's `control`: the state and what was changed."""
        return {
            "paused": self.paused,
            "stopped": self.stop_line,
            "changes": [c.record() for c in self.changes],
        }


__all__ = ["MANUAL", "MAX_LEVEL", "Change", "LiveControl", "clock"]
