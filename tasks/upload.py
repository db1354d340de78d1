"""Copy the sealed run directory to its destination; retried with growing delays.

The flow sets the retries from CampaignParams.upload. When the last attempt fails the flow
records it in status.json and keeps the local copy (agentsession_core.output.upload).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.run import upload_once
from agentsession_core.output.upload import UploadResult


@task(name="upload", cache_policy=NO_CACHE, persist_result=False)
async def upload(run_dir: Path, params: CampaignParams) -> UploadResult:
    return await asyncio.to_thread(upload_once, run_dir, params)
