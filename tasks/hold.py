"""One task run per hold window (`hold-{index}`): hold, judge, report progress.

The load keeps running between these tasks; a window only cuts the measurement. The
timeout is cooperative (an awaited async task), set by the flow to the window plus a margin.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from uuid import UUID

from prefect import task
from prefect.artifacts import acreate_table_artifact, aupdate_progress_artifact
from prefect.cache_policies import NO_CACHE

from agentsession_core.campaign.campaign import Campaign
from tasks.publish import best_effort
from tasks.steps import Steps

PROGRESS_EVERY_S = 10.0
log = logging.getLogger("agentsession")


def window_key(index: int) -> str:
    return f"hold-{index}"


def probe_key(number: int) -> str:
    return f"probe-{number}"


@task(name="hold_window", task_run_name="hold-{index}", cache_policy=NO_CACHE, persist_result=False)
async def hold_window(
    campaign: Campaign, index: int, steps: Steps, progress: UUID | None = None
) -> str | None:
    """The window's outcome (pass / break / void / aborted), None when already stopped."""
    ticker = asyncio.create_task(_progress(campaign, index, progress)) if progress else None
    try:
        verdict = await steps.once(window_key(index), lambda: campaign.hold_window(index))
    finally:
        if ticker is not None:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
    if verdict is None:
        return None
    await best_effort(
        lambda: acreate_table_artifact(
            result_rows(verdict.results),
            description=f"window {index} at {verdict.level:g}x: **{verdict.outcome}**",
        )
    )
    if progress is not None:
        done = len(campaign.verdicts)
        await best_effort(
            lambda: aupdate_progress_artifact(
                progress,
                100.0 * done / len(campaign.plan),
                description=f"{done}/{len(campaign.plan)} windows judged",
            )
        )
    return verdict.outcome


@task(
    name="probe_window", task_run_name="probe-{number}", cache_policy=NO_CACHE, persist_result=False
)
async def probe_window(campaign: Campaign, number: int, steps: Steps) -> str | None:
    """One probe of the capacity search (settle, then a judged window; the found level's
    confirmation and its step down are probes too): its outcome (held / broke / void /
    aborted), None when the search is over."""
    record = await steps.once(probe_key(number), lambda: campaign.probe(number))
    if record is None:
        return None
    unit = campaign.search.dimension.unit if campaign.search else ""
    await best_effort(
        lambda: acreate_table_artifact(
            result_rows(record.verdict.results),
            description=(
                f"probe {number}{record.stage_note} at {record.level:.3g}x "
                f"({record.rate:g} {unit}): **{record.outcome}**"
            ),
        )
    )
    return record.outcome


def result_rows(results: Any) -> list[dict[str, Any]]:
    return [
        {
            "threshold": r.threshold,
            "observed": r.observed,
            "samples": r.samples,
            "passed": r.passed,
            "detail": r.detail,
        }
        for r in results
    ]


def held_percent(campaign: Campaign, index: int, into_window_s: float) -> float:
    """How much of the whole hold is behind us, `into_window_s` into window `index`."""
    plan = campaign.plan
    total = sum(w.seconds for w in plan)
    held = sum(w.seconds for w in plan[:index]) + min(into_window_s, plan[index].seconds)
    return 100.0 * held / total if total else 100.0


async def _progress(campaign: Campaign, index: int, progress: UUID) -> None:
    """Moves the progress artifact every PROGRESS_EVERY_S while a (600 s) window holds."""
    started = time.monotonic()
    while True:
        await asyncio.sleep(PROGRESS_EVERY_S)
        percent = held_percent(campaign, index, time.monotonic() - started)
        try:
            await aupdate_progress_artifact(
                progress, percent, description=f"window {index} holding: {percent:.0f}% of the hold"
            )
        except Exception as exc:  # a busy API must not disturb the hold
            log.debug("progress artifact not updated: %s", exc)
