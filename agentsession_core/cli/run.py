"""`agentsession run`: one engine run from the command line, no Prefect."""

from __future__ import annotations

import argparse
import sys

from agentsession_core.engine.params import parse_params
from agentsession_core.errors import UsageError
from agentsession_core.script.quantity import QuantityError, parse_duration, seconds


def _duration(text: str) -> float:
    try:
        return seconds(parse_duration(text))
    except QuantityError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="replay scripted agent sessions against a substrate and measure them",
        description="Run one benchmark: without --substrate it starts a local substrate, "
        "drives it, and stops it at the end. The last line printed is the run directory.",
    )
    target = p.add_argument_group("target")
    target.add_argument("--substrate", metavar="URL", help="control API URL (default: local)")
    target.add_argument("--router", metavar="URL", help="router URL when it differs")
    target.add_argument("--token", help="bearer token (or AGENTSESSION_TOKEN)")
    target.add_argument("--template", help="actor template NS/NAME")
    target.add_argument("--atespace", help="atespace for the actors (default: one per run)")
    target.add_argument("--local-workers", type=int, help="worker processes of the local substrate")

    load = p.add_argument_group("workload")
    load.add_argument("--script", help="built-in script name or YAML path")
    load.add_argument("--population", choices=["closed", "turnover", "turns"])
    load.add_argument("--sessions", type=int)
    load.add_argument("--spawn-rate", type=float, help="sessions started per second")
    load.add_argument("--awake", type=int, help="turnover: sessions kept resident")
    load.add_argument("--target-rps", type=float, help="turnover: swaps per second")
    load.add_argument("--registration-quiet", type=_duration, metavar="DURATION")
    load.add_argument("--fill-concurrency", type=int)
    load.add_argument("--turns-per-hour", type=float)
    load.add_argument("--turn-mean", type=_duration, metavar="DURATION")
    load.add_argument("--resume-mode", choices=["implicit", "explicit"])
    load.add_argument("--lifecycle-mode", choices=["suspend", "suspend-async", "pause", "none"])
    load.add_argument("--think-scale", type=float)
    load.add_argument("--hold", type=_duration, metavar="DURATION", help="e.g. 60s, 10m")
    load.add_argument("--seed", type=int)

    out = p.add_argument_group("output")
    out.add_argument("--name", help="run name")
    out.add_argument("--tag", help="run tag")
    out.add_argument("--out", metavar="DEST", help="artifact destination (default ./artifacts)")
    out.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on this port")
    out.add_argument(
        "--progress",
        choices=["auto", "live", "plain"],
        default="auto",
        help="live display on a terminal, plain log lines otherwise",
    )
    p.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    import os

    from agentsession_core.engine.run import run_blocking
    from agentsession_core.script import load_script

    values = {
        k: v
        for k, v in vars(args).items()
        if v is not None and k not in ("handler", "command", "progress")
    }
    if "token" not in values and os.environ.get("AGENTSESSION_TOKEN"):
        values["token"] = os.environ["AGENTSESSION_TOKEN"]
    try:
        params = parse_params(values)
    except UsageError as exc:
        print(f"agentsession run: {exc}", file=sys.stderr)
        return 2
    # A broken script is refused before anything exists (no run directory, no actor).
    load_script(params.script)
    live = args.progress == "live" or (args.progress == "auto" and sys.stderr.isatty())
    _log_to_stderr(quiet=live)
    result = run_blocking(params, live=live)
    print(result.run_dir)
    return result.exit_code


def _log_to_stderr(*, quiet: bool) -> None:
    """Log lines on stderr; with the live display only warnings, so the status line stays
    readable (logs.txt always has everything)."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING if quiet else logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    logger = logging.getLogger("agentsession")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
