"""One task run per hold window (`hold-{index}`): hold, judge, report progress.

The load keeps running between these tasks; a window only cuts the measurement. The
timeout is cooperative (an awaited async task), set by the flow to the window plus a margin.
"""

from __future__ import annotations

from uuid import UUID

from prefect import task
from prefect.artifacts import acreate_table_artifact, aupdate_progress_artifact
from prefect.cache_policies import NO_CACHE

from agentsession_core.campaign import Campaign


@task(name="hold_window", task_run_name="hold-{index}", cache_policy=NO_CACHE,
      persist_result=False)
async def hold_window(campaign: Campaign, index: int, progress: UUID | None = None) -> str | None:
    """The window's outcome (pass / break / void / aborted), None when already stopped."""
    verdict = await campaign.hold_window(index)
    if verdict is None:
        return None
    await acreate_table_artifact(
        [{"threshold": r.threshold, "observed": r.observed, "samples": r.samples,
          "passed": r.passed, "detail": r.detail} for r in verdict.results],
        description=f"window {index} at {verdict.level:g}x: **{verdict.outcome}**",
    )  # fmt: skip
    if progress is not None:
        done = len(campaign.verdicts)
        await aupdate_progress_artifact(
            progress, 100.0 * done / len(campaign.plan),
            description=f"{done}/{len(campaign.plan)} windows judged",
        )  # fmt: skip
    return verdict.outcome
