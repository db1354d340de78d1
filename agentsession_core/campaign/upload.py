"""A campaign's upload of its sealed run directory, with retries: the standalone campaign
(standalone.py) and the flow (flows/campaign.py, tasks/upload.py) send it the same way."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.pacing import stream
from agentsession_core.output.upload import (
    UploadError,
    UploadResult,
    record_failed_upload,
    upload_run,
)

log = logging.getLogger("agentsession")


def upload_once(run_dir: Path, params: CampaignParams) -> UploadResult:
    """One attempt to put the sealed run directory at the campaign's destination."""
    return upload_run(
        run_dir,
        params.destination,
        local_root=params.out,
        endpoint_url=params.upload.endpoint_url,
        region=params.upload.region,
    )


def retry_delays(params: CampaignParams) -> list[float]:
    """The waits between upload attempts: the first delay, doubling."""
    first = params.upload.retry_delay_seconds
    return [first * 2**i for i in range(params.upload.attempts - 1)]


async def upload_with_retries(run_dir: Path, params: CampaignParams) -> UploadResult:
    """Every attempt `upload.attempts` allows; a failure keeps the local copy and is
    recorded in status.json, as the flow does. An attempt the store refused for throttling (a
    fresh bucket refusing a burst: S3 503 SlowDown, a 429) waits its planned delay stretched
    by a seeded jitter in [1, 2), so runs that share a cold bucket do not retry in step
    (docs/SPEC.md §7)."""
    attempts = params.upload.attempts
    error = ""
    throttled = 0
    jitter = stream(params.seed, "upload-throttle", run_dir.name)
    for attempt, delay in enumerate([*retry_delays(params), None], start=1):
        try:
            result = await asyncio.to_thread(upload_once, run_dir, params)
            result.attempts, result.throttled = attempt, throttled
            return result
        except UploadError as exc:
            error = str(exc)
            if not exc.throttled:
                log.warning("upload attempt %d of %d failed: %s", attempt, attempts, exc)
            else:
                throttled += 1
                if delay is not None:
                    delay *= 1.0 + jitter.random()
                then = (
                    f"retrying in {delay:.2f} s (backoff with jitter)" if delay else "no retry left"
                )
                log.warning(
                    "upload attempt %d of %d throttled by the store (a cold bucket refuses "
                    "write bursts): %s; %s",
                    attempt,
                    attempts,
                    exc,
                    then,
                )
            if delay is not None:
                await asyncio.sleep(delay)
    if throttled:
        error = f"throttled by the store on {throttled} of {attempts} attempts; last: {error}"
    await asyncio.to_thread(record_failed_upload, run_dir, params.destination, error, attempts)
    return UploadResult(
        False,
        params.destination,
        str(run_dir),
        error=error,
        attempts=attempts,
        throttled=throttled,
    )
