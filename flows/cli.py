"""`agentsession campaign` runs the campaign flow here; `agentsession serve` serves its
deployments (nightly on its cron, adhoc on demand) from this box.

Without PREFECT_API_URL the flow runs against Prefect's ephemeral API (a temporary local
server, ~20-30 s to start). Prefect's telemetry is off unless the environment says
otherwise. The last line on stdout is the local run directory (also when the destination
is S3: the local copy stays). Exit 0 when the campaign reached its verdict, whatever the
verdict (`agentsession gate` judges it); 1 when the campaign itself failed; 2 on bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.preset_files import preset_names, preset_path
from agentsession_core.engine.params import parse
from agentsession_core.engine.params_io import apply_settings, load_values

if TYPE_CHECKING:
    from prefect.states import State

PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    # The ephemeral server needs ~20-30 s on two cores; Prefect's default allows 20.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "campaign",
        help="run a judged benchmark campaign (the Prefect flow) here",
        description="Run the campaign flow locally: preflight, register, fill, judged hold "
        "windows, upload, publish, gate. The last line printed is the local run directory.",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--preset",
        metavar="NAME",
        help=f"a preset from deployments/presets ({', '.join(preset_names())})",
    )
    source.add_argument("--params", metavar="FILE", help="a YAML/JSON file of CampaignParams")
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter by field path, e.g. hold_minutes=0.5, "
        "population.awake=4, dest=s3://bucket/prefix (repeatable)",
    )
    p.add_argument(
        "--print-params", action="store_true", help="print the resolved parameters as JSON and exit"
    )
    p.set_defaults(handler=_handle)

    s = sub.add_parser(
        "serve",
        help="serve the nightly and adhoc deployments from this box (Prefect serve)",
        description="Register the `nightly` (cron, UTC) and `adhoc` deployments with the "
        "Prefect API in PREFECT_API_URL and run their flow runs here until stopped.",
    )
    s.add_argument("--cron", help="nightly schedule (default from deployments/prefect.yaml)")
    s.set_defaults(handler=_serve)


def resolve(args: argparse.Namespace) -> CampaignParams:
    values: dict[str, Any] = {}
    source: str | None = None
    if args.preset:
        path = preset_path(args.preset)
        values, source = load_values(path), str(path)
    elif args.params:
        values, source = load_values(args.params), args.params
    if args.settings:
        values = apply_settings(values, args.settings)
        source = f"{source} with --set" if source else None
    return parse(CampaignParams, values, source=source)


def prepare_prefect_env() -> None:
    """Before Prefect is imported: no telemetry, and the ephemeral API unless one is set."""
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if not os.environ.get("PREFECT_API_URL"):
        os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_ENABLED", "true")


def _handle(args: argparse.Namespace) -> int:
    params = resolve(args)  # bad input: UsageError, exit 2, nothing started
    if args.print_params:
        print(params.model_dump_json(indent=2))
        return 0
    prepare_prefect_env()
    from prefect.exceptions import TerminationSignal

    from flows.campaign import campaign  # Prefect's console handler shows the run's log

    async def run_campaign() -> State[Any]:
        # Prefect types a flow call as Awaitable; asyncio.run wants a coroutine. A completed
        # state's result is the flow's dict (a State the flow returns is the final state).
        return await campaign(params=params, return_state=True)

    try:
        state = asyncio.run(run_campaign())
    except (TerminationSignal, KeyboardInterrupt) as exc:
        # The flow's `async with Run` already stopped the load, deleted the actors and wrote
        # the artifacts (status "cancelled"); say so in one line, not a traceback.
        name = "SIGINT" if isinstance(exc, KeyboardInterrupt) else signal.Signals(exc.signal).name
        print(
            f"agentsession campaign: cancelled by {name}; actors cleaned up, artifacts written",
            file=sys.stderr,
        )
        run_dir = _newest_run(params)
        if run_dir is not None:
            print(run_dir)
        return 130 if isinstance(exc, KeyboardInterrupt) else 128 + exc.signal
    if state.is_cancelled():
        run_dir = _newest_run(params)
        print(
            f"agentsession campaign: {state.message}; actors cleaned up, artifacts written",
            file=sys.stderr,
        )
        if run_dir is None:
            return 1
        print(run_dir)
        return _signal_exit(run_dir) or 1
    if state.is_completed():
        result = state.result()
        upload = result["upload"]
        if not upload["ok"]:
            print(
                f"agentsession campaign: upload to {params.destination} failed "
                f"({upload['error']}); the local copy stays",
                file=sys.stderr,
            )
        print(f"verdict: {result['verdict']} ({result['reason']})", file=sys.stderr)
        print(result["run_dir"])
        return 0
    error = state.result(raise_on_failure=False)
    print(f"agentsession campaign: {state.name}: {error}", file=sys.stderr)
    run_dir = getattr(error, "run_dir", None) or _newest_run(params)
    if run_dir is None:
        return 1
    print(run_dir)
    return 1


def _signal_exit(run_dir: Path) -> int | None:
    """Stopped by SIGINT/SIGTERM: the run recorded 130/143 in its status."""
    try:
        code = json.loads((run_dir / "status.json").read_text()).get("exit_code")
    except (OSError, ValueError):
        return None
    return code if code in (130, 143) else None


def _newest_run(params: CampaignParams) -> Path | None:
    """The campaign failed before reporting its directory: the newest one of this name/tag."""
    root = Path(params.out.removeprefix("file://")) / "runs" / params.name
    found = sorted(
        root.glob(f"run_date=*/run_ts=*/run_tag={params.tag}"), key=lambda p: p.parent.name
    )
    return found[-1] if found else None


def _serve(args: argparse.Namespace) -> int:
    prepare_prefect_env()
    from flows.serve import serve_deployments

    serve_deployments(cron=args.cron)
    return 0
