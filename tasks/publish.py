"""Prefect artifacts for people: the windows table, links to the report and the upload.

Keys are `<campaign name>-…` (lowercase, digits, dashes: Prefect's ^[a-z0-9-]*$), so each
campaign has a versioned history on the Artifacts page.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from prefect import task
from prefect.artifacts import (
    acreate_link_artifact,
    acreate_progress_artifact,
    acreate_table_artifact,
)
from prefect.cache_policies import NO_CACHE

from agentsession_core.campaign.campaign import Campaign
from agentsession_core.output.upload import UploadResult

# An artifact is a view of the verdict, never worth holding the campaign up for: an API that
# is slow or gone (flows/orchestrator.py) gets this long, then the task goes on without it.
ARTIFACT_TIMEOUT_S = 10.0
log = logging.getLogger("agentsession")


async def best_effort(create: Callable[[], Awaitable[Any]]) -> None:
    """Write one artifact, or say in one line why not."""
    try:
        async with asyncio.timeout(ARTIFACT_TIMEOUT_S):
            await create()
    except Exception as exc:  # the verdict stands without its view in the UI
        log.warning("artifact not written: %s", " ".join(str(exc).split())[:200] or exc)


def artifact_key(name: str, what: str) -> str:
    return f"{name}-{what}"


async def hold_progress(campaign: Campaign) -> UUID:
    return await acreate_progress_artifact(
        0.0,
        key=artifact_key(campaign.params.name, "hold-progress"),
        description=f"0/{len(campaign.plan)} windows judged",
    )


def window_rows(campaign: Campaign) -> list[dict]:
    rows = []
    for v in campaign.verdicts:
        wake = v.headline.get("TimeToWake", {})
        steps = v.headline.get("Step_*", {})
        rows.append(
            {
                "window": v.index,
                "level": v.level,
                "outcome": v.outcome,
                "time_to_wake_p99_ms": wake.get("p99"),
                "step_p99_ms": steps.get("p99"),
                "achieved_rps": v.headline.get("requests", {}).get("achieved_rps"),
                "missed": ", ".join(r.threshold for r in v.broken),
                "reason": v.abort_reason or v.void_reason or "",
            }
        )
    return rows


@task(name="publish", cache_policy=NO_CACHE, persist_result=False)
async def publish(campaign: Campaign, uploaded: UploadResult) -> None:
    name = campaign.params.name
    await best_effort(
        lambda: acreate_table_artifact(
            window_rows(campaign),
            key=artifact_key(name, "windows"),
            description=f"{name}/{campaign.params.tag}: one row per judged window",
        )
    )
    report = f"{uploaded.location}/report.html"
    link = report if report.startswith("s3://") else f"file://{report}"
    await best_effort(
        lambda: acreate_link_artifact(
            link,
            link_text="report.html",
            key=artifact_key(name, "report"),
            description=("uploaded to " if uploaded.ok else "upload FAILED; local copy: ")
            + (uploaded.location if uploaded.ok else uploaded.local_dir),
        )
    )
