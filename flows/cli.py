"""`agentsession campaign` runs the campaign flow here; `agentsession serve` serves the
deployments (nightly on its cron, adhoc on demand, verdict-report on its trigger,
baseline-accept on demand) from this box.

Without PREFECT_API_URL the flow runs against a temporary local Prefect API (~10-30 s to
start) that this command starts in a session of its own, so a Ctrl-C in the terminal or a
SIGTERM to the process group stops the campaign, not the API it reports to
(flows/api_server.py says why). Prefect's telemetry is off unless the environment says
otherwise. The last line on stdout is the local run directory (also when the destination
is S3: the local copy stays). Exit 0 when the campaign reached its verdict, whatever the
verdict (`agentsession gate` judges it; a campaign refused before any actor existed is
judged `void`); 1 when the campaign itself failed; 2 on bad input; 130/143 when stopped by
SIGINT/SIGTERM (actors deleted, artifacts written, one line on stderr).

The bearer token never becomes a flow parameter, which Prefect would store: the flow takes
it from AGENTSESSION_TOKEN (a token in a --params file or preset is handed over that way)
or from the Prefect Secret block `target.token_secret` names; `--set target.token=…` is
refused, since a command line is readable by any local user (flows/credentials.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsession_core.campaign.campaign import load_baseline
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.preset_files import preset_names, preset_path
from agentsession_core.engine.params import parse
from agentsession_core.engine.params_io import apply_settings, load_values
from agentsession_core.engine.population_params import with_kind_switched
from agentsession_core.errors import UsageError
from agentsession_core.redaction import redact
from agentsession_core.run.run import LEAKED_EXIT
from flows.api_server import temporary_api
from flows.credentials import token_in_environment, without_token

if TYPE_CHECKING:
    from prefect.states import State

    from flows.orchestrator import Orchestrator

PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    # The ephemeral server needs ~20-30 s on two cores; Prefect's default allows 20.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}
# The flow's last log lines and events, sent before the temporary API stops.
DRAIN_TIMEOUT_S = 10.0
# A campaign that finished without its Prefect API gives Prefect this long to tell the API its
# flow run's final state (it retries for minutes against an API that is gone), then exits.
FINAL_STATE_GRACE_S = 10.0


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
        help="serve the deployments of deployments/prefect.yaml from this box (Prefect serve)",
        description="Register the `nightly` (cron, UTC), `adhoc`, `verdict-report` (with its "
        "fail trigger) and `baseline-accept` deployments with the Prefect API in "
        "PREFECT_API_URL and run their flow runs here, one at a time, until stopped.",
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
        given = _token_of(values)
        base = values.get("population")
        values = apply_settings(values, args.settings)
        overrides = apply_settings({}, args.settings).get("population")
        if "population" in values:
            values["population"] = with_kind_switched(values["population"], base, overrides)
        if _token_of(values) not in (None, given):
            # Any local user can read a command line (ps, /proc/PID/cmdline).
            raise UsageError(
                "--set target.token: a token on the command line is visible in the process "
                "list; set AGENTSESSION_TOKEN, or name a Prefect Secret block with "
                "target.token_secret"
            )
        source = f"{source} with --set" if source else None
    return parse(CampaignParams, values, source=source)


def _token_of(values: dict[str, Any]) -> Any:
    target = values.get("target")
    return (target.get("token") or None) if isinstance(target, dict) else None


def prepare_prefect_env() -> None:
    """Before Prefect is imported: no telemetry, and the ephemeral API unless one is set."""
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if not os.environ.get("PREFECT_API_URL"):
        os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_ENABLED", "true")


class Interrupted(BaseException):
    """SIGTERM before the flow took over its signals (like KeyboardInterrupt for SIGINT)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signal = signum


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def _handle(args: argparse.Namespace) -> int:
    params = resolve(args)  # bad input: UsageError, exit 2, nothing started
    if args.print_params:  # credentials redacted, as `agentsession run` prints them
        print(json.dumps(redact(params.model_dump(mode="json")), indent=2))
        return 0
    load_baseline(params)  # an unreadable baseline: one line before Prefect starts
    # A token from a --params file or preset reaches the in-process flow through its
    # environment, never as a flow parameter, which Prefect would store (flows/credentials.py).
    params, token = without_token(params)
    prepare_prefect_env()
    started = time.time()
    # Until the flow installs its own handlers (Prefect's SIGTERM bridge, then the Run's),
    # a SIGTERM ends the command like a Ctrl-C does: one line, no traceback.
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        with contextlib.ExitStack() as stack:
            if _own_api_needed():
                log_path = _api_log()
                print(
                    f"agentsession campaign: starting a temporary Prefect API (10-30 s; its log: "
                    f"{log_path})",
                    file=sys.stderr,
                )
                url = stack.enter_context(temporary_api(log_path, timeout=_startup_timeout()))
                os.environ["PREFECT_API_URL"] = url
                # Runs before the API stops: the flow's last logs and events reach it, rather
                # than retrying against a closed port at exit.
                stack.callback(_drain_prefect)
            # Set only now: the temporary API's process, started above, never gets it.
            with token_in_environment(token):
                return _run_flow(params, started)
    except (KeyboardInterrupt, Interrupted) as exc:
        signum = exc.signal if isinstance(exc, Interrupted) else signal.SIGINT
        run_dir = _newest_run(params, since=started)
        what = "actors cleaned up, artifacts written" if run_dir else "nothing had started"
        print(
            f"agentsession campaign: stopped by {signal.Signals(signum).name}; {what}",
            file=sys.stderr,
        )
        if run_dir is not None:
            print(run_dir)
        return 128 + signum
    finally:
        signal.signal(signal.SIGTERM, previous)


def _own_api_needed() -> bool:
    """Our own temporary API (flows/api_server.py) unless an API is configured. Prefect reads
    PREFECT_API_URL once, when it is first imported: in a process that imported it already
    (a library user, a test) Prefect's own ephemeral server stays the fallback."""
    return not os.environ.get("PREFECT_API_URL") and "prefect" not in sys.modules


def _drain_prefect() -> None:
    if "prefect" not in sys.modules:  # interrupted before the flow was imported
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    from flows.orchestrator import left_behind

    if left_behind() is not None:  # nothing of it would reach an API that is gone
        return
    APILogWorker.drain_all(timeout=DRAIN_TIMEOUT_S)
    EventsWorker.drain_all(timeout=DRAIN_TIMEOUT_S)


def _api_log() -> Path:
    home = os.environ.get("PREFECT_HOME") or "~/.prefect"
    return Path(home).expanduser() / "agentsession-temporary-api.log"


def _startup_timeout() -> float:
    raw = os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "")
    try:
        value = float(raw)
    except ValueError:
        return float(PREFECT_DEFAULTS["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"])
    return value if math.isfinite(value) and value > 0 else 120.0


def _run_flow(params: CampaignParams, started: float) -> int:
    from prefect.exceptions import TerminationSignal

    from flows.campaign import campaign  # Prefect's console handler shows the run's log
    from flows.orchestrator import left_behind, orchestration_error

    async def run_campaign() -> State[Any] | None:
        # Prefect types a flow call as Awaitable; asyncio.run wants a coroutine. A completed
        # state's result is the flow's dict (a State the flow returns is the final state).
        # None: the flow ended without its Prefect API (flows/orchestrator.py), and Prefect's
        # retries of the flow run's final state were not waited out.
        call = asyncio.ensure_future(campaign(params=params, return_state=True))
        while True:
            finished, _ = await asyncio.wait({call}, timeout=1.0)
            if finished:
                break
            gone = left_behind()
            if gone is not None and gone.left_behind is not None:
                finished, _ = await asyncio.wait({call}, timeout=FINAL_STATE_GRACE_S)
                if finished:
                    break
                # Prefect retries the flow run's final state for minutes, in this loop, in
                # its own threads and again at exit, against an API that is gone. The
                # campaign is over (actors deleted, files sealed, the target's slot let go):
                # say how it ended and leave without them. A temporary API of ours stops
                # with its pipe from this process (flows/api_server.py).
                code = _ended_without_api(gone, _newest_run(params, since=started))
                _leave(code)
        try:
            return call.result()
        except Exception as exc:
            if left_behind() is None or not orchestration_error(exc):
                raise
            return None  # the final state could not be told: the campaign had ended

    try:
        state = asyncio.run(run_campaign())
    except TerminationSignal as exc:  # Prefect's SIGTERM bridge, outside the Run
        raise Interrupted(exc.signal) from None
    run_dir = _newest_run(params, since=started)
    gone = left_behind()
    if gone is not None:
        return _ended_without_api(gone, run_dir)
    assert state is not None
    if state.is_cancelled():
        # The Run took the signal: the load stopped, actors were deleted, files written.
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
        if result["run_status"] == "refused":
            # The Run logged the reason once (the one line); gate.json holds it too.
            print("verdict: void (the campaign could not start; reason above)", file=sys.stderr)
        else:
            print(f"verdict: {result['verdict']} ({result['reason']})", file=sys.stderr)
        print(result["run_dir"])
        # A verdict was reached, but actors left on the substrate must show in the exit code
        # (docs/SPEC.md §3.5), whatever the verdict.
        return LEAKED_EXIT if _status(Path(result["run_dir"])).get("leaked_actors") else 0
    # Failed: the reason was logged once above (and is in status.json and the flow's state).
    error = state.result(raise_on_failure=False)
    print(
        f"agentsession campaign: {(state.name or 'failed').lower()} (reason above)", file=sys.stderr
    )
    run_dir = getattr(error, "run_dir", None) or run_dir
    if run_dir is None:
        return 1
    print(run_dir)
    return 1


def _ended_without_api(gone: Orchestrator, run_dir: Path | None) -> int:
    """The campaign went on after its Prefect API went away: its verdict and run directory
    as it ended, said beside the orchestrator's loss (never blamed on the substrate)."""
    when = time.strftime("%H:%M:%S", time.localtime(gone.lost_at or time.time()))
    _flush()
    print(
        f"agentsession campaign: {gone.lost} at {when}; the campaign finished without it "
        "(this flow run's state, logs and artifacts since then are not in Prefect)",
        file=sys.stderr,
    )
    result = gone.left_behind
    if result is None:  # it failed or was cancelled after the loss: its own line said why
        if run_dir is None:
            return 1
        print(run_dir)
        return _signal_exit(run_dir) or 1
    print(f"verdict: {result['verdict']} ({result['reason']})", file=sys.stderr)
    print(result["run_dir"])
    return LEAKED_EXIT if _status(Path(result["run_dir"])).get("leaked_actors") else 0


def _leave(code: int) -> None:
    """Exit now, without Python's exit handlers (Prefect's would retry a gone API): every
    logging handler and stream flushed first, so no line still in a buffer is lost."""
    logging.shutdown()
    _flush()
    os._exit(code)


def _flush() -> None:
    """Every log line and print written so far, out: Prefect's console handler keeps a
    buffer of its own, and the command's last lines must come after the run's."""
    for ref in list(getattr(logging, "_handlerList", [])):
        handler = ref()
        if handler is not None:
            with contextlib.suppress(Exception):
                handler.flush()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()


def _status(run_dir: Path) -> dict[str, Any]:
    """The run's status.json ({} when unreadable)."""
    try:
        status = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


def _signal_exit(run_dir: Path) -> int | None:
    """Stopped by SIGINT/SIGTERM: the run recorded 130/143 in its status."""
    code = _status(run_dir).get("exit_code")
    return code if code in (130, 143) else None


def _newest_run(params: CampaignParams, *, since: float) -> Path | None:
    """This command's run directory when the flow could not report it: the newest one of
    this name/tag started since the command began (never an older run's)."""
    root = Path(params.out.removeprefix("file://")) / "runs" / params.name
    found = []
    for path in root.glob(f"run_date=*/run_ts=*/run_tag={params.tag}"):
        try:
            ts = int(path.parent.name.removeprefix("run_ts="))
        except ValueError:
            continue
        if ts >= int(since):
            found.append((ts, path))
    return max(found)[1] if found else None


def _serve(args: argparse.Namespace) -> int:
    prepare_prefect_env()
    from flows.serve import serve_deployments

    serve_deployments(cron=args.cron)
    return 0
