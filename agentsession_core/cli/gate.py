"""`agentsession gate RUN [--baseline RUN] [--max-regression FRACTION]`: a release gate.

Prints the run's gate document (JSON) on stdout and one summary line on stderr; exits 0 on
pass, 1 on fail, 2 on void or on a run that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from agentsession_core.judge.gate import (
    exit_code,
    load_run,
    rejudge_regressions,
    summary,
    with_baseline,
)


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction >= 0 (0.2 = 20 %)")
    return value


def add_baseline_args(p: argparse.ArgumentParser, default: str) -> None:
    """--baseline and --max-regression, as `gate` and `report` both take them."""
    p.add_argument("--baseline", metavar="RUN", help="a previous run to compare against")
    p.add_argument(
        "--max-regression",
        type=fraction,
        metavar="FRACTION",
        default=None,
        help=f"worst allowed change of a headline metric against the baseline ({default})",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gate",
        help="judge a finished run: exit 0 pass, 1 fail, 2 void or unusable",
        description="Read a run's gate.json (a directory or an s3:// prefix), optionally "
        "compare its headline metrics with a baseline run, print the verdict and exit "
        "0 on pass, 1 on fail, 2 on void or unusable input.",
    )
    p.add_argument("run", metavar="RUN", help="run directory or s3://bucket/prefix")
    add_baseline_args(p, "default 0.2")
    p.set_defaults(handler=gate)


def gate(args: argparse.Namespace) -> int:
    doc = load_run(args.run)["gate"]
    if args.baseline:
        baseline = load_run(args.baseline)
        max_regression = 0.2 if args.max_regression is None else args.max_regression
        doc = with_baseline(doc, baseline, max_regression)
    elif args.max_regression is not None:
        doc = rejudge_regressions(doc, args.max_regression)
    print(json.dumps(doc, indent=2, sort_keys=False))
    print(summary(doc), file=sys.stderr)
    return exit_code(doc)
