"""A standalone campaign: the flow's phases in plain asyncio, without Prefect.

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
from agentsession_core.campaign.upload import upload_with_retries
from agentsession_core.errors import UsageError
from agentsession_core.judge.gate import EXIT_CODES
from agentsession_core.output.upload import (
    UploadResult,
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


def _read_gate(run_dir: Path) -> dict[str, Any]:
    try:
        gate: dict[str, Any] = json.loads((run_dir / "gate.json").read_bytes())
    except (OSError, ValueError) as exc:
        return {"verdict": "void", "reason": f"no readable gate.json: {exc}"}
    return gate
