"""How a run ends: one precedence, decided in one place (docs/SPEC.md §3.4).

Whatever the body says (completed, aborted by a rule), these win, in this order: a refusal
(it happened first: nothing else ran), a signal, the run directory refusing writes, and the
load's own failure (a fatal answer or a dead substrate: failed; the generator's own fault, a
stalled loop or a shard lost with nothing to carry on: void). The same order says why a
hold stops early and whether the window it cut is void (the cause was not the substrate).
"""

from __future__ import annotations

import signal
from collections import Counter
from dataclasses import dataclass

from agentsession_core.engine.load import LoadFailure
from agentsession_core.engine.param_types import WakeProbe
from agentsession_core.measure.stats import CONTROL_KIND, ROUTER_KIND, Window

STEP_ROW_PREFIX = "Step_"  # the rows Session.run_step books


@dataclass(frozen=True)
class Ending:
    status: str  # refused, cancelled, failed, void
    reason: str
    stop_line: str  # what a stopped hold says
    not_the_substrate: bool  # a window it cut is void, not aborted


def ending(
    *,
    refusal: str | None,
    signal: signal.Signals | None,
    write_failure: str | None,
    load: LoadFailure | None,
) -> Ending | None:
    """The first cause that ends the run, or None while nothing does."""
    if refusal is not None:
        return Ending("refused", refusal, f"refused: {refusal}", True)
    if signal is not None:
        line = f"received {signal.name}"
        return Ending("cancelled", line, line, True)
    if write_failure is not None:
        return Ending("failed", write_failure, write_failure, True)
    if load is not None:
        status = "void" if load.generator_side else "failed"
        return Ending(status, load.reason, load.reason, load.generator_side)
    return None


def no_step_succeeded(totals: Window, wake_probe: WakeProbe) -> str | None:
    """One line when not one scripted step succeeded in the whole run (registration's step
    1 included); None otherwise. With wake_probe none no step runs: the same of its wakes,
    the ResumeActor calls."""
    if wake_probe == "none":
        return _no_resume_succeeded(totals)
    steps = [
        stats
        for (kind, name), stats in totals.rows.items()
        if kind == ROUTER_KIND and name.startswith(STEP_ROW_PREFIX)
    ]
    tried = sum(s.count for s in steps)
    if tried > sum(s.failures for s in steps):
        return None
    if not tried:
        return "no step succeeded: no step ran (a hold shorter than the script's think?)"
    errors = sum((s.errors for s in steps), Counter[str]())
    common = errors.most_common(1)[0][0] if errors else "no error recorded"
    return f"no step succeeded: all {tried} steps failed (most often {common})"


def _no_resume_succeeded(totals: Window) -> str | None:
    resumes = totals.rows.get((CONTROL_KIND, "ResumeActor"))
    if resumes is not None and resumes.count > resumes.failures:
        return None
    if resumes is None or not resumes.count:
        return "no wake succeeded: no ResumeActor was sent (wake_probe none)"
    common = resumes.errors.most_common(1)
    most = common[0][0] if common else "no error recorded"
    tried = resumes.count
    return f"no wake succeeded: all {tried} ResumeActor calls failed (most often {most})"


__all__ = ["STEP_ROW_PREFIX", "Ending", "ending", "no_step_succeeded"]
