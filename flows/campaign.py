"""The campaign flow: preflight → register → fill → hold windows → capacity probes → upload →
publish → gate.

One async flow drives one long-lived engine (`Run`) through thin async tasks, so the load
keeps running between them and no task ever blocks the loop. Leaving the `async with Run`
always stops the load, deletes the actors and writes every artifact (windows, gate, report,
manifest) — after a failure or a cancellation too. Upload failures do not fail the flow: the
local copy stays, status.json and the flow's result say so. A campaign that reached its
verdict completes whatever the verdict (the gate judges). A refusal before any actor
existed (unreachable substrate, bad credentials, a template too small) is such a verdict:
`void` with the reason, said once, no traceback (docs/SPEC.md §6). One that crashed fails;
a cancelled one ends Cancelled.

Around the whole run the flow holds its target's global concurrency limit (one campaign per
substrate, flows/target_limit.py); every campaign that wrote gate.json ends by emitting the
`agentsession.campaign.verdict` event (flows/verdict_event.py); the engine's log lines reach
the flow run's logs (flows/run_logs.py).

Deployments: `nightly` and `adhoc` in deployments/prefect.yaml, both on this flow.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

from prefect import flow, get_run_logger
from prefect.states import Cancelled, Failed, State

from agentsession_core.campaign.campaign import Campaign, CampaignError, load_baseline
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.upload import retry_delays, upload_with_retries
from agentsession_core.errors import AgentsessionError
from agentsession_core.output.upload import UploadResult, record_failed_upload
from agentsession_core.run.run import Run
from flows.credentials import with_token
from flows.orchestrator import Orchestrator
from flows.run_logs import current_flow_run_id, engine_logs_to_flow_run
from flows.target_limit import hold_target
from flows.verdict_event import announce_verdict
from tasks.gate import gate, read_gate
from tasks.hold import hold_window, probe_key, probe_window, window_key
from tasks.phases import fill, preflight, register
from tasks.publish import ARTIFACT_TIMEOUT_S, hold_progress, publish
from tasks.upload import upload

# Beyond the window itself: the stop grace and the judging of the window.
HOLD_TIMEOUT_MARGIN_S = 120.0
# Beyond the engine's own registration and fill deadlines (docs/SPEC.md §4.2), which end those
# phases first with their one line: the task timeout is the backstop for a phase that hangs.
PHASE_TIMEOUT_MARGIN_S = 120.0
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
    with engine_logs_to_flow_run():
        return await _campaign(params)


async def _campaign(params: CampaignParams) -> dict[str, Any] | State:
    try:
        # The token is never a flow parameter (Prefect stores those): it comes from a Secret
        # block or the environment into the Run's parameters only, in memory
        # (flows/credentials.py); the campaign driver and the upload task get the flow's own.
        run_params = await with_token(params)
        baseline = await asyncio.to_thread(load_baseline, params)
    except AgentsessionError as exc:
        # A token given as a parameter, a Secret block that cannot be loaded, a bad baseline.
        get_run_logger().error("%s", exc)
        return Failed(message=f"campaign not started: {exc}")
    # Each step a task while Prefect's API answers, directly once it went away (its load
    # never needed it): flows/orchestrator.py.
    api = Orchestrator.current()
    # Before the Run exists, so waiting for another campaign on this target counts against
    # no phase's timeout and the run's clock starts once the target is ours.
    async with hold_target(params.target, current_flow_run_id(), api) as target:
        try:
            # The run takes SIGTERM/SIGINT itself while the load runs (Prefect's cancellation
            # is a SIGTERM to this process): the hold stops, actors are deleted, status:
            # cancelled. generator.shards > 1 splits the load over Dask workers (a sharded
            # load, the same Run).
            run = Run(run_params)
        except AgentsessionError as exc:  # an output directory we cannot make
            get_run_logger().error("%s", exc)
            return Failed(message=f"campaign not started: {exc}")
        async with run:
            driver = Campaign(params, run, baseline=baseline)
            # Refused: said once, recorded; straight to the files.
            if await api.step("preflight", lambda: preflight(run, api.steps), run.preflight):
                await _load(run, driver, params, api)
            driver.finish()
    assert run.result is not None
    run_dir = run.result.run_dir
    uploaded = await _upload(run, params, api)
    await api.best_effort("the windows and report artifacts", lambda: publish(driver, uploaded))
    await api.best_effort(
        "the verdict event",
        lambda: announce_verdict(
            run_dir, name=params.name, tag=params.tag, target=target, upload=uploaded
        ),
    )
    if run.result.status == "cancelled":
        # SIGTERM/SIGINT (Prefect's cancellation among them): actors are gone, artifacts
        # written; the flow run ends Cancelled, not Failed.
        return Cancelled(message=f"campaign cancelled: {run.result.reason}")
    if not driver.reached_verdict:
        # Crashed, or its run directory stopped taking writes: the Run said why once (and
        # status.json has it); a Failed state with that reason, not a second traceback.
        return Failed(
            message=f"campaign {run.result.status}: {run.result.reason or 'no verdict'}",
            data=CampaignError(run.result.reason or "no verdict", run_dir=run.result.run_dir),
        )
    verdict = await api.step(
        "gate",
        lambda: gate(run_dir, params.name, uploaded.to_dict(), api.steps),
        lambda: read_gate(run_dir),
    )
    result = {
        "verdict": verdict["verdict"],
        "reason": verdict["reason"],
        "run_status": run.result.status,
        "run_dir": str(run_dir),
        "location": uploaded.location,
        "upload": uploaded.to_dict(),
    }
    api.left_behind = result  # `agentsession campaign` prints it when the API is gone
    return result


async def _load(run: Run, driver: Campaign, params: CampaignParams, api: Orchestrator) -> None:
    """Register, fill, every judged window (ending early when one ends the campaign) and
    the capacity search's probes, one task each while the API answers."""
    population = params.population
    steps = api.steps
    register_task = register.with_options(
        timeout_seconds=population.registration_deadline()
        + population.registration_quiet_seconds
        + PHASE_TIMEOUT_MARGIN_S
    )
    await api.step("register", lambda: register_task(run, steps), run.register)
    fill_task = fill.with_options(
        timeout_seconds=population.fill_deadline() + PHASE_TIMEOUT_MARGIN_S
    )
    await api.step("fill", lambda: fill_task(run, steps), run.fill)
    progress = None
    if api.lost is None:
        with contextlib.suppress(Exception):  # a view of the hold, never worth holding it up
            async with asyncio.timeout(ARTIFACT_TIMEOUT_S):
                progress = await hold_progress(driver)
    hold = hold_window.with_options(
        timeout_seconds=params.window_seconds
        + params.cleanup.stop_grace_seconds
        + HOLD_TIMEOUT_MARGIN_S
    )
    for window in driver.plan:
        if driver.stopped:
            break
        index = window.index
        await api.step(
            window_key(index),
            functools.partial(hold, driver, index, steps, progress),
            functools.partial(driver.hold_window, index),
        )
    probe = probe_window.with_options(
        timeout_seconds=params.search.settle_seconds
        + params.search_window_seconds
        + params.cleanup.stop_grace_seconds
        + HOLD_TIMEOUT_MARGIN_S
    )
    number = 0
    while driver.searching:  # the capacity search, once the first level held
        await api.step(
            probe_key(number),
            functools.partial(probe, driver, number, steps),
            functools.partial(driver.probe, number),
        )
        number += 1


async def _upload(run: Run, params: CampaignParams, api: Orchestrator) -> UploadResult:
    assert run.result is not None
    run_dir = run.result.run_dir
    if run.write_failure is not None:  # the local copy is incomplete: nothing to send
        return UploadResult(False, params.destination, str(run_dir), error=run.write_failure)
    attempts = params.upload.attempts
    task = upload.with_options(retries=attempts - 1, retry_delay_seconds=retry_delays(params) or 0)
    # The task's last attempt returns the failure rather than raising it (tasks/upload.py):
    # Prefect would log a task that fails for good with its traceback. Without the API, the
    # engine's own attempts (the same count and delays) record a failure themselves.
    result = await api.task_or_direct(
        "upload", lambda: task(run_dir, params), lambda: upload_with_retries(run_dir, params)
    )
    if not result.ok and api.lost is None:
        error = result.error or "upload failed"
        get_run_logger().error(
            "upload to %s failed after %d attempts: %s; local copy kept at %s",
            params.destination,
            attempts,
            error,
            run_dir,
        )
        await asyncio.to_thread(record_failed_upload, run_dir, params.destination, error, attempts)
    return result
