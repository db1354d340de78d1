"""The campaign flow: preflight → register → fill → hold windows → upload → publish → gate.

One async flow drives one long-lived engine (`Run`) through thin async tasks, so the load
keeps running between them and no task ever blocks the loop. Leaving the `async with Run`
always stops the load, deletes the actors and writes every artifact (windows, gate, report,
manifest) — after a failure or a cancellation too. Upload failures do not fail the flow: the
local copy stays, status.json and the flow's result say so. A campaign that reached its
verdict completes whatever the verdict (the gate judges); one that did not (refused,
crashed, cancelled) fails.

Deployments: `nightly` and `adhoc` in deployments/prefect.yaml, both on this flow.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prefect import flow, get_run_logger
from prefect.states import Cancelled, State

from agentsession_core.campaign.campaign import Campaign, CampaignError, load_baseline
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.run import retry_delays
from agentsession_core.engine.run import Run
from agentsession_core.engine.shards import open_run
from agentsession_core.output.upload import UploadError, UploadResult, record_failed_upload
from tasks.gate import gate
from tasks.hold import hold_window
from tasks.phases import fill, preflight, register
from tasks.publish import hold_progress, publish
from tasks.upload import upload

# Beyond the window itself: the stop grace and the judging of the window.
HOLD_TIMEOUT_MARGIN_S = 120.0
DEFAULT_PARAMS = CampaignParams()


@flow(
    name="campaign",
    flow_run_name="{params.name}-{params.tag}",
    log_prints=False,
    persist_result=False,
)
async def campaign(params: CampaignParams = DEFAULT_PARAMS) -> dict[str, Any] | State:
    """Run a benchmark campaign; the result names the verdict, the run directory and where
    the artifacts went (a cancelled campaign ends in a Cancelled state instead)."""
    baseline = await asyncio.to_thread(load_baseline, params)
    # The run takes SIGTERM/SIGINT itself while the load runs (Prefect's cancellation is a
    # SIGTERM to this process): the hold stops, actors are deleted, status says cancelled.
    # generator.shards > 1 splits the load over Dask workers (a ShardedRun, same surface).
    run = open_run(params)
    async with run:
        driver = Campaign(params, run, baseline=baseline)
        await preflight(run)
        await register(run)
        await fill(run)
        progress = await hold_progress(driver)
        hold = hold_window.with_options(
            timeout_seconds=params.window_seconds
            + params.cleanup.stop_grace_seconds
            + HOLD_TIMEOUT_MARGIN_S
        )
        for window in driver.plan:
            if driver.stopped:
                break
            await hold(driver, window.index, progress)
        driver.finish()
    assert run.result is not None
    uploaded = await _upload(run, params)
    await publish(driver, uploaded)
    if run.result.status == "cancelled":
        # SIGTERM/SIGINT (Prefect's cancellation among them): actors are gone, artifacts
        # written; the flow run ends Cancelled, not Failed.
        return Cancelled(message=f"campaign cancelled: {run.result.reason}")
    if not driver.reached_verdict:
        raise CampaignError(
            f"campaign {run.result.status}: {run.result.reason or 'no verdict'}",
            run_dir=run.result.run_dir,
        )
    verdict = await gate(run.result.run_dir, params.name, uploaded.to_dict())
    return {
        "verdict": verdict["verdict"],
        "reason": verdict["reason"],
        "run_status": run.result.status,
        "run_dir": str(run.result.run_dir),
        "location": uploaded.location,
        "upload": uploaded.to_dict(),
    }


async def _upload(run: Run, params: CampaignParams) -> UploadResult:
    assert run.result is not None
    run_dir = run.result.run_dir
    attempts = params.upload.attempts
    task = upload.with_options(retries=attempts - 1, retry_delay_seconds=retry_delays(params) or 0)
    try:
        return await task(run_dir, params)
    except UploadError as exc:
        get_run_logger().error(
            "upload to %s failed after %d attempts: %s; local copy kept at %s",
            params.destination,
            attempts,
            exc,
            run_dir,
        )
        await asyncio.to_thread(
            record_failed_upload, run_dir, params.destination, str(exc), attempts
        )
        return UploadResult(
            False, params.destination, str(run_dir), error=str(exc), attempts=attempts
        )
