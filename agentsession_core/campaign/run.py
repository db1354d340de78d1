"""A whole campaign without Prefect: the flow's phases in plain asyncio.

For Python users, scripts and tests: the same Run, Campaign, judging, files and upload as
flows/campaign.py, in the same order, with no orchestrator around them. The flow adds
scheduling, the UI, retries as Prefect tasks and Prefect artifacts; the artifacts on disk
(and so the gate) are the same.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentsession_core.campaign.campaign import Campaign, load_baseline
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.pacing import stream
from agentsession_core.errors import UsageError
from agentsession_core.judge.gate import EXIT_CODES
from agentsession_core.output.upload import (
    UploadError,
    UploadResult,
    record_failed_upload,
    upload_run,
)
from agentsession_core.run.run import Run, RunResult, run_on_fresh_loop
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")


@dataclass
class CampaignResult:
    """How a campaign ended: the gate's verdict, the run behind it and where its files are."""

    verdict: str  # pass / fail / void (gate.json)
    reason: str
    gate: dict[str, Any]
    run: RunResult
    upload: UploadResult

    @property
    def run_dir(self) -> Path:
        return self.run.run_dir

    @property
    def exit_code(self) -> int:
        """`agentsession gate`'s exit code for this verdict: 0 pass, 1 fail, 2 void."""
        return EXIT_CODES.get(self.verdict, 2)


async def run_campaign(
    params: CampaignParams,
    *,
    substrate: Substrate | None = None,
    handle_signals: bool = True,
) -> CampaignResult:
    """Preflight, register, fill, every judged window, cleanup, files, upload; the verdict.

    `substrate` is driven instead of the one `params.target` names (the caller closes it).
    A campaign that cannot start (a bad baseline, an unreachable substrate, a template too
    small) still writes its run directory and ends with a `void` verdict and the reason.
    """
    if params.target.token_secret and not params.target.token and substrate is None:
        # A Secret block lives in Prefect, which this package's core never imports: only the
        # flow (flows/credentials.py) reads it. Said before anything starts, not found later
        # as a credential the substrate refused.
        raise UsageError(
            "target.token_secret: a Prefect Secret block is read by the campaign flow only; "
            "without Prefect give target.token or target.token_file"
        )
    baseline = await asyncio.to_thread(load_baseline, params)
    run = Run(params, substrate=substrate, handle_signals=handle_signals)
    async with run:
        campaign = Campaign(params, run, baseline=baseline)
        await run.preflight()
        await run.register()
        await run.fill()
        for window in campaign.plan:
            if campaign.stopped:
                break
            await campaign.hold_window(window.index)
        probe = 0
        while campaign.searching:  # the capacity search, after the first level held
            await campaign.probe(probe)
            probe += 1
        campaign.finish()
    assert run.result is not None
    if run.write_failure is not None:  # the local copy is incomplete: nothing to send
        run_dir = str(run.result.run_dir)
        uploaded = UploadResult(False, params.destination, run_dir, error=run.write_failure)
    else:
        uploaded = await upload_with_retries(run.result.run_dir, params)
    gate = await asyncio.to_thread(_read_gate, run.result.run_dir)
    return CampaignResult(
        verdict=gate.get("verdict", "void"),
        reason=gate.get("reason", run.result.reason or ""),
        gate=gate,
        run=run.result,
        upload=uploaded,
    )


def run_campaign_blocking(
    params: CampaignParams, *, substrate: Substrate | None = None
) -> CampaignResult:
    """run_campaign on a fresh event loop (uvloop when available)."""
    return run_on_fresh_loop(run_campaign(params, substrate=substrate))


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


def _read_gate(run_dir: Path) -> dict[str, Any]:
    try:
        gate: dict[str, Any] = json.loads((run_dir / "gate.json").read_bytes())
    except (OSError, ValueError) as exc:
        return {"verdict": "void", "reason": f"no readable gate.json: {exc}"}
    return gate
