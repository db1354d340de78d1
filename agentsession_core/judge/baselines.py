"""`baseline: auto`: the last good nights of the same campaign as the baseline (docs/SPEC.md
§6.3).

The runs of a campaign live under its `out` directory or `dest` prefix in the upstream layout
(``<prefix>/runs/<name>/run_date=…/run_ts=…/run_tag=…/``). Going back from the newest run
before the one being judged, a run is taken when it can be read, passed (a void night measured
the generator, a failed one a regression nobody accepted yet) and shares the judged run's
conditions (judge/conditions.py), until N are found. A run that cannot be read is skipped with
a warning naming it, never silently.

An accepted run (judge/acceptance.py, docs/SPEC.md §6.3) is a floor: going back, the first
comparable run with a believable acceptance is taken although it failed (its failure was the
change someone accepted) and nothing older is: the comparison is only with runs from the
accepted one on, so the newest acceptance wins. A record that cannot be believed (altered, or
not this run's) is said in a warning and the run is judged as if it had none.
"""

from __future__ import annotations

import logging
from typing import Any

from agentsession_core.errors import AgentsessionError
from agentsession_core.judge.acceptance import AcceptanceError, accepted
from agentsession_core.judge.conditions import differences
from agentsession_core.judge.gate import refusal
from agentsession_core.judge.run_index import RunRef, find_runs, parse_location
from agentsession_core.judge.stored_run import StoredRun, load_run

log = logging.getLogger("agentsession")
AUTO = "auto"


def last_good_runs(
    prefix: str,
    name: str,
    *,
    conditions: dict[str, Any] | None,
    history: int,
    before_ts: int | None = None,
    endpoint_url: str | None = None,
) -> list[StoredRun]:
    """Up to `history` good, comparable runs, oldest first, none older than the newest
    comparable accepted run (which is the first of them, `acceptance` set)."""
    found: list[StoredRun] = []
    candidates: list[RunRef] = [
        r
        for r in find_runs(prefix, name, endpoint_url=endpoint_url)
        if before_ts is None or r.run_ts < before_ts
    ]
    for ref in reversed(candidates):
        if len(found) == history:
            break
        try:
            run = load_run(ref.location, endpoint_url=endpoint_url)
        except AgentsessionError as exc:
            log.warning("baseline auto: %s skipped: %s", ref.location, exc)
            continue
        if differences(conditions, run.conditions):
            continue
        if ref.accepted is not False:
            try:
                run = accepted(run, endpoint_url=endpoint_url)
            except AcceptanceError as exc:
                log.warning("baseline auto: %s: its acceptance is ignored: %s", ref.location, exc)
        if run.acceptance is not None and refusal(run) is None:
            log.info(
                "baseline auto: from %s on, accepted by %s: %s",
                run.location,
                run.acceptance.by,
                run.acceptance.reason,
            )
            found.append(run)
            break
        if refusal(run) is not None:
            continue
        found.append(run)
    return list(reversed(found))


def auto_baselines(run: StoredRun, *, history: int) -> list[StoredRun]:
    """The baselines of a stored run: the good runs before it in its own campaign's tree."""
    ref = parse_location(run.location)
    if ref is None:
        raise AgentsessionError(
            f"{run.location}: --baseline auto needs a run in the campaign layout "
            "(…/runs/NAME/run_date=…/run_ts=…/run_tag=…)"
        )
    return last_good_runs(
        ref.prefix,
        ref.name,
        conditions=run.conditions,
        history=history,
        before_ts=ref.run_ts,
    )


def spread_history(
    baseline: StoredRun, *, history: int, endpoint_url: str | None = None
) -> list[StoredRun]:
    """The good comparable runs of a single baseline's own campaign, up to it (itself
    included), from which the run-to-run spread it cannot see alone is measured
    (docs/SPEC.md §6.3). [] when the baseline is not in the campaign layout or its tree
    cannot be listed: the comparison then assumes `gate.night_spread`, and says so."""
    ref = parse_location(baseline.location)
    if ref is None:
        return []
    try:
        return last_good_runs(
            ref.prefix,
            ref.name,
            conditions=baseline.conditions,
            history=history,
            before_ts=ref.run_ts + 1,
            endpoint_url=endpoint_url,
        )
    except AgentsessionError as exc:
        log.warning("the baseline's history could not be read (%s): the spread is assumed", exc)
        return []


__all__ = ["AUTO", "auto_baselines", "last_good_runs", "spread_history"]
