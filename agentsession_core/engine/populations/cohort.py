"""One cohort's figures (docs/SPEC.md §4.5, §4.6): the k % marks and the all-done figure of
a cohort of N actors started together, booked as the actors finish.

A cohort starts at `start_ns` (spawn: its first intended CreateActor; burst: the instant the
burst's calls go out). Each actor that finishes (is ready, resumed, suspended) is booked on
the per-actor row from its own intended time, and counted: when the count reaches a mark's
rank, the mark is booked at once as one sample from the cohort's start to that actor's done
time. The rank of the k % mark is the nearest rank ceil(k × N / 100) (at least 1), so
`TimeToReady_50pct` of 10 actors is the 5th ready and of 3 actors the 2nd. The all-done row
gets its sample when the N-th actor finishes.

Booking each mark when it is reached, not when the cohort ends, puts every sample in the
second it describes, so a window judged before a slow cohort ended still has the marks that
cohort reached inside it. A cohort that ends (every actor finished or failed, or its
deadline passed) short of a mark books that mark, and the all-done row, as one failed sample
at the end: a rule's `failure_ratio` is then the share of cohorts that never got there, and
its percentiles are over the cohorts that did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentsession_core.measure.stats import RowKey, mark_row

if TYPE_CHECKING:
    from agentsession_core.measure.recorder import Recorder

INCOMPLETE = "COHORT_INCOMPLETE"  # the error a mark the cohort never reached is booked with


def mark_rank(k: int, n: int) -> int:
    """How many of a cohort of `n` must be done for its k % mark: ceil(k·n/100), at least 1."""
    return max(1, (k * n + 99) // 100)


class CohortMarks:
    """The marks one cohort of `n` reaches as its actors finish, in the order they finish
    (pure: the arithmetic the booking below follows)."""

    def __init__(self, n: int, percents: Sequence[int]) -> None:
        if n < 1:
            raise ValueError(f"a cohort has at least one actor, not {n}")
        self.n = n
        self.percents = tuple(sorted(set(percents)))
        self.done = 0
        self.failed = 0

    def finished(self) -> list[int]:
        """One more actor is done: the percentages whose mark it reaches (several at once in
        a small cohort, none for most actors of a large one)."""
        self.done += 1
        return [k for k in self.percents if mark_rank(k, self.n) == self.done]

    def fail(self) -> None:
        self.failed += 1

    @property
    def complete(self) -> bool:
        """Every actor of the cohort is done."""
        return self.done >= self.n

    @property
    def resolved(self) -> bool:
        """Every actor is done or has failed: nothing more can finish."""
        return self.done + self.failed >= self.n

    def missed(self) -> list[int]:
        """The percentages whose mark the cohort has not reached (so far)."""
        return [k for k in self.percents if mark_rank(k, self.n) > self.done]


class CohortBook:
    """One cohort's bookings into the recorder: each actor's own row, the marks' rows
    `<mark>_<k>pct` and the all-done row (docs/SPEC.md §4.5)."""

    def __init__(
        self,
        recorder: Recorder,
        *,
        actor_row: RowKey,
        all_row: RowKey,
        mark: str,
        n: int,
        percents: Sequence[int],
        start_ns: int,
    ) -> None:
        self.marks = CohortMarks(n, percents)
        self.start_ns = start_ns
        self._actor = recorder.row(*actor_row)
        self._all = recorder.row(*all_row)
        self._rows = {k: recorder.row(*mark_row(mark, k)) for k in self.marks.percents}
        self.last_done_ns: int | None = None
        self.closed = False

    def done(self, intended_ns: int, sent_ns: int, done_ns: int) -> None:
        """An actor finished at `done_ns`; its own figure runs from `intended_ns`."""
        if self.closed:  # past the cohort's end: its figures are already booked
            return
        self._actor.ok(intended_ns, sent_ns, done_ns)
        self.last_done_ns = done_ns
        for k in self.marks.finished():
            self._rows[k].ok(self.start_ns, self.start_ns, done_ns)
        if self.marks.complete:
            self._all.ok(self.start_ns, self.start_ns, done_ns)

    def failed(self, intended_ns: int, sent_ns: int, done_ns: int, error: str) -> None:
        """An actor will not finish (it crashed, was refused, or ran out of time)."""
        if self.closed:
            return
        self._actor.fail(intended_ns, sent_ns, done_ns, error)
        self.marks.fail()

    def abandon(self) -> None:
        """The run stopped inside the cohort: its figures are partial, and nothing more of it
        is booked (a stop's cut is no failure of the substrate)."""
        self.closed = True

    def close(self, end_ns: int) -> None:
        """The cohort is over: every mark it did not reach, and the all-done row when it was
        not complete, get one failed sample at `end_ns`."""
        if self.closed:
            return
        self.closed = True
        for k in self.marks.missed():
            self._rows[k].fail(self.start_ns, self.start_ns, end_ns, INCOMPLETE)
        if not self.marks.complete:
            self._all.fail(self.start_ns, self.start_ns, end_ns, INCOMPLETE)


__all__ = ["INCOMPLETE", "CohortBook", "CohortMarks", "mark_rank"]
