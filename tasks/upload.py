"""Copy the sealed run directory to its destination; retried with growing delays.

The flow sets the retries from CampaignParams.upload. An attempt that fails with retries
left raises, so Prefect retries it (one INFO line each); the last one returns a failed
UploadResult instead: a task that fails for good is logged by Prefect with its whole
traceback, and a failed upload is an expected outcome the flow handles — it records it in
status.json, keeps the local copy and says so in one line (agentsession_core.output.upload).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import task_run

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.upload import upload_once
from agentsession_core.output.upload import UploadError, UploadResult


@task(name="upload", cache_policy=NO_CACHE, persist_result=False)
async def upload(run_dir: Path, params: CampaignParams) -> UploadResult:
    try:
        return await asyncio.to_thread(upload_once, run_dir, params)
    except UploadError as exc:
        attempts = params.upload.attempts
        if task_run.run_count < attempts:
            raise  # Prefect retries it
        return UploadResult(
            False, params.destination, str(run_dir), error=str(exc), attempts=attempts
        )
