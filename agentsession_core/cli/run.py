"""`agentsession run`: one engine run from the command line, no Prefect.

The parameter flags are generated from RunParams (cli/model_flags.py): `--sessions`,
`--awake`, `--registration-quiet-seconds`, ... Values come from `--params FILE` first, then
the flags, then `--set key.path=value`; the token comes from AGENTSESSION_TOKEN or a --params
file, never the command line (`--token` and `--set target.token=…` are refused). `--hold` is
the run's own: how long the load is held after start-up.

A run that did not complete ends with one line on stderr saying so and why
(`agentsession run: failed: turnover: the resident set averaged …`), unless a log line
already said exactly that (a refusal's `refused: …`); the last line on stdout is always the
run directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from agentsession_core.cli.model_flags import Leaf, add_model_flags, flag_values
from agentsession_core.engine.params import RunParams, parse
from agentsession_core.engine.params_io import apply_settings, load_values, merge
from agentsession_core.engine.population_params import with_kind_switched
from agentsession_core.errors import UsageError, clip
from agentsession_core.redaction import redact
from agentsession_core.script.quantity import QuantityError, parse_duration, seconds

DEFAULT_HOLD = "60s"
MAX_HOLD_S = 7 * 86_400.0
# The ends of a run that must be said in their own line (a signal's stop says itself:
# `received SIGINT: stopping …`, exit 130/143).
UNFINISHED = ("failed", "refused", "aborted", "void")
_LEAVES: list[Leaf] = []


def _duration(text: str) -> float:
    try:
        value = seconds(parse_duration(text))
    except QuantityError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{clip(text)}: must not be negative")
    if value > MAX_HOLD_S:  # issue #11: an absurd hold is a typo, refused before anything starts
        raise argparse.ArgumentTypeError(f"{clip(text)}: at most 7 days ({MAX_HOLD_S:g} s)")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="replay scripted agent sessions against a substrate and measure them",
        description="Run one benchmark: without --substrate it starts a local substrate, "
        "drives it, and stops it at the end. The last line printed is the run directory. "
        "Parameters come from --params FILE, then the flags, then --set KEY=VALUE.",
    )
    p.add_argument(
        "--hold",
        type=_duration,
        default=_duration(DEFAULT_HOLD),
        metavar="DURATION",
        help=f"load held after start-up / fill, e.g. 60s, 10m (default: {DEFAULT_HOLD})",
    )
    p.add_argument("--params", metavar="FILE", help="a YAML/JSON file of RunParams")
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a parameter by its path, e.g. population.awake=4, "
        "population.registration_quiet_seconds=2s (repeatable)",
    )
    p.add_argument(
        "--progress",
        choices=["auto", "live", "plain"],
        default="auto",
        help="live display on a terminal, plain log lines otherwise",
    )
    p.add_argument(
        "--print-params",
        action="store_true",
        help="print the resolved parameters as JSON (token redacted) and exit",
    )
    _LEAVES[:] = add_model_flags(p, RunParams)
    p.set_defaults(handler=_handle)


def resolve(args: argparse.Namespace) -> RunParams:
    """RunParams from --params FILE, the flags and --set (later wins); bad input: UsageError."""
    values: dict[str, Any] = load_values(args.params) if args.params else {}
    given = flag_values(args, _LEAVES)
    if _token_of(given) is not None:
        raise UsageError(_on_command_line("--token"))
    from_file = _token_of(values)
    base = values.get("population")
    values = apply_settings(merge(values, given), args.settings)
    overrides = apply_settings(given, args.settings).get("population")
    if "population" in values:
        values["population"] = with_kind_switched(values["population"], base, overrides)
    if _token_of(values) not in (None, from_file):
        raise UsageError(_on_command_line("--set target.token"))
    target = values.get("target")
    if not (isinstance(target, dict) and target.get("token")) and os.environ.get(
        "AGENTSESSION_TOKEN"
    ):
        values["target"] = {**(target or {}), "token": os.environ["AGENTSESSION_TOKEN"]}
    only_file = args.params and not given and not args.settings
    return parse(RunParams, values, source=args.params if only_file else None)


def _on_command_line(flag: str) -> str:
    # Any local user can read a command line (ps, /proc/PID/cmdline): refused rather than
    # used, as `agentsession campaign` does, so the token is seen to be in the wrong place.
    return (
        f"{flag}: a token on the command line is visible in the process list; set "
        "AGENTSESSION_TOKEN, or put target.token in a --params file (ate: --token-file FILE)"
    )


def _token_of(values: dict[str, Any]) -> Any:
    target = values.get("target")
    return (target.get("token") or None) if isinstance(target, dict) else None


def _handle(args: argparse.Namespace) -> int:
    from agentsession_core.run.single import run_blocking
    from agentsession_core.script.mix import load_mix

    try:
        params = resolve(args)
    except UsageError as exc:
        print(f"agentsession run: {exc}", file=sys.stderr)
        return 2
    if args.print_params:  # the token redacted
        print(json.dumps(redact(params.model_dump(mode="json")), indent=2))
        return 0
    # A broken script is refused before anything exists (no run directory, no actor).
    load_mix(params.script)
    live = args.progress == "live" or (args.progress == "auto" and sys.stderr.isatty())
    said = _log_to_stderr(quiet=live)
    result = run_blocking(params, hold_seconds=args.hold, live=live)
    if (line := ending_line(result.status, result.reason)) is not None and line not in said:
        print(f"agentsession run: {line}", file=sys.stderr)
    print(result.run_dir)
    return result.exit_code


def ending_line(status: str, reason: str | None) -> str | None:
    """`failed: <reason>`: how a run that did not complete ended, in one line (None for a
    completed run, or one a signal stopped)."""
    if status not in UNFINISHED:
        return None
    return f"{status}: {' '.join(reason.split())}" if reason else status


class _Said(logging.Filter):
    """The error lines shown on stderr, so the run's last line does not repeat one."""

    MAX_KEPT = 1000

    def __init__(self) -> None:
        super().__init__()
        self.lines: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and len(self.lines) < self.MAX_KEPT:
            self.lines.add(" ".join(record.getMessage().split()))
        return True

    def __contains__(self, line: object) -> bool:
        return line in self.lines


def _log_to_stderr(*, quiet: bool) -> _Said:
    """Log lines on stderr; with the live display only warnings, so the status line stays
    readable (logs.txt always has everything). Returns what the stderr lines said."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING if quiet else logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    said = _Said()
    handler.addFilter(said)
    logger = logging.getLogger("agentsession")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return said
