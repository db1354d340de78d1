"""`agentsession gate RUN [--baseline RUN|auto [--history N]] [--max-regression F] [--rule R]
[--write] [--junit FILE] [--summary FILE]`: a release gate.

Prints the run's gate document (JSON) on stdout and one summary line on stderr; exits 0 on
pass, 1 on fail, 2 on void or on a run that cannot be read (a baseline that cannot be one
included). An inconclusive comparison never fails. `--baseline auto` compares against the last
N comparable, non-void runs of the same campaign before this one (judge/baselines.py);
`--write` stores the comparison in the run's gate.json (its manifest re-sealed); `--junit FILE`
writes the verdict as JUnit XML for a CI system (judge/junit.py), also when the run cannot be
judged (one `<error>` case with the gate's line). `--summary FILE` writes the verdict as
Markdown (report/gate_summary.py), and when `GITHUB_STEP_SUMMARY` names a file the same
Markdown is appended to it; a failure to append there is a warning on stderr, never the
gate's exit code (docs/SPEC.md §6.1).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import orjson

from agentsession_core.errors import AgentsessionError
from agentsession_core.judge.acceptance import load_named_baseline
from agentsession_core.judge.baselines import AUTO, auto_baselines, spread_history
from agentsession_core.judge.compare import DEFAULT_HISTORY, DEFAULT_NIGHT_SPREAD, MAX_HISTORY
from agentsession_core.judge.decision import DEFAULT_PAIRED_RULE, DEFAULT_RULE, RULES, Rule
from agentsession_core.judge.false_discovery import DEFAULT_METHOD, METHODS, Method
from agentsession_core.judge.gate import (
    DEFAULT_MAX_REGRESSION,
    exit_code,
    rejudge_paired,
    rejudge_regressions,
    summary,
    with_baseline,
    without_baseline,
)
from agentsession_core.judge.gate_document import GateDocument
from agentsession_core.judge.junit import write_junit, write_unreadable
from agentsession_core.judge.stored_run import load_run
from agentsession_core.output.output_file import append_output, output_file, write_output
from agentsession_core.output.upload import rewrite_run_file
from agentsession_core.report.gate_summary import gate_summary, unusable_summary

# GitHub Actions names the job summary's file here; each step appends its Markdown to it.
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction >= 0 (0.2 = 20 %)")
    return value


def confidence(text: str) -> float:
    value = fraction(text)
    if not 0.5 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a confidence in (0.5, 1): 0.99 = 99 %")
    return value


def nights(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_HISTORY:
        raise argparse.ArgumentTypeError(f"{text!r}: between 1 and {MAX_HISTORY} runs")
    return value


def add_baseline_args(p: argparse.ArgumentParser, default: str) -> None:
    """--baseline, --history, --max-regression, --confidence and --night-spread, as `gate`
    and `report` both take them."""
    p.add_argument(
        "--baseline",
        metavar="RUN|auto",
        help="a previous run to compare against, or 'auto': the last comparable runs of the "
        "same campaign before this one",
    )
    p.add_argument(
        "--history",
        type=nights,
        default=DEFAULT_HISTORY,
        metavar="N",
        help=f"with --baseline auto: how many earlier runs (default {DEFAULT_HISTORY})",
    )
    p.add_argument(
        "--max-regression",
        type=fraction,
        metavar="FRACTION",
        default=None,
        help=f"worst allowed change of a headline figure against the baseline ({default})",
    )
    p.add_argument(
        "--confidence",
        type=confidence,
        default=None,
        metavar="C",
        help="of a regression (default: the run's own, else 0.99)",
    )
    p.add_argument(
        "--rule",
        choices=RULES,
        default=None,
        help="when a change is a regression, against the baseline and a paired campaign's "
        f"reference arm alike (default: the run's gate.rule, else {DEFAULT_RULE}, and "
        f"gate.paired_rule, else {DEFAULT_PAIRED_RULE}; docs/SPEC.md §6.3)",
    )
    p.add_argument(
        "--false-discovery",
        choices=METHODS,
        default=None,
        help="how the figures one comparison judges are controlled together: bh "
        "(Benjamini-Hochberg), by (Benjamini-Yekutieli) or none (default: the run's "
        f"gate.false_discovery, else {DEFAULT_METHOD}; docs/SPEC.md §6.3)",
    )
    p.add_argument(
        "--night-spread",
        type=fraction,
        default=None,
        metavar="SD",
        help="run-to-run spread assumed with a single-run baseline that has no history of "
        "at least 3 runs to measure it over (sd of the log figure; "
        f"default: the run's gate.night_spread, else {DEFAULT_NIGHT_SPREAD})",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gate",
        help="judge a finished run: exit 0 pass, 1 fail, 2 void or unusable",
        description="Read a run's gate.json (a directory or an s3:// prefix), optionally "
        "compare its headline figures with a baseline run or the last comparable runs, print "
        "the verdict and exit 0 on pass, 1 on fail, 2 on void or unusable input.",
    )
    p.add_argument("run", metavar="RUN", help="run directory or s3://bucket/prefix")
    add_baseline_args(p, f"default: the run's max_regression, else {DEFAULT_MAX_REGRESSION}")
    p.add_argument(
        "--write",
        action="store_true",
        help="store the comparison in the run's gate.json (its manifest re-sealed)",
    )
    p.add_argument(
        "--junit",
        metavar="FILE",
        help="also write the verdict as JUnit XML: a test case per judged window and per "
        "compared figure (docs/SPEC.md §7)",
    )
    p.add_argument(
        "--summary",
        metavar="FILE",
        help="also write the verdict as Markdown: the verdict line, the judged figures (both "
        "sides, change, interval, status), the windows and where the report is. When "
        f"{STEP_SUMMARY_ENV} is set (GitHub Actions) the same Markdown is appended to that "
        "file, with or without --summary; a failure to append is a warning, and the exit "
        "code stays the verdict's",
    )
    p.set_defaults(handler=gate)


def settings(params: dict[str, Any], args: argparse.Namespace) -> tuple[float, float, Rule, Rule]:
    """max_regression, night_spread and the decision rules (against a baseline, and a paired
    campaign's): the flags, else the run's own parameters (campaign.json's)."""
    max_regression = args.max_regression
    if max_regression is None:
        max_regression = float(params.get("max_regression", DEFAULT_MAX_REGRESSION))
    gate = params.get("gate") or {}
    spread = args.night_spread
    if spread is None:
        spread = float(gate.get("night_spread", DEFAULT_NIGHT_SPREAD))
    rule = args.rule or gate.get("rule")
    paired = args.rule or gate.get("paired_rule")
    return (
        max_regression,
        spread,
        rule if rule in RULES else DEFAULT_RULE,
        paired if paired in RULES else DEFAULT_PAIRED_RULE,
    )


def method_of(params: dict[str, Any], args: argparse.Namespace) -> Method:
    """The false-discovery control: the flag, else the run's own gate.false_discovery."""
    chosen = args.false_discovery or (params.get("gate") or {}).get("false_discovery")
    return chosen if chosen in METHODS else DEFAULT_METHOD


def gate(args: argparse.Namespace) -> int:
    junit = output_file("--junit", args.junit)  # refused before anything is judged
    markdown = output_file("--summary", args.summary)
    try:
        doc = judged(args)
    except AgentsessionError as exc:
        # A CI reading only these files must not take no verdict for a pass.
        if junit is not None:
            write_unreadable(junit, args.run, str(exc))
        show_summary(markdown, unusable_summary(args.run, str(exc)))
        raise
    if junit is not None:
        write_junit(junit, doc)
    show_summary(markdown, gate_summary(GateDocument.read(doc, args.run)))
    print(json.dumps(doc, indent=2, sort_keys=False))
    print(summary(doc), file=sys.stderr)
    return exit_code(doc)


def show_summary(path: Path | None, text: str) -> None:
    """The Markdown at --summary's path (a failure there fails the command, as --junit's
    does), and appended to the job summary GitHub Actions names, where a failure is only a
    warning: the job's summary is a view, the exit code is the verdict."""
    if path is not None:
        write_output("--summary", path, text)
    step_summary = os.environ.get(STEP_SUMMARY_ENV, "")
    if not step_summary.strip():
        return
    try:
        append_output(STEP_SUMMARY_ENV, Path(step_summary).absolute(), text)
    except AgentsessionError as exc:
        print(
            f"agentsession gate: warning: {exc} (the job's summary goes without the verdict; "
            "the exit code is the verdict's)",
            file=sys.stderr,
        )


def judged(args: argparse.Namespace) -> dict:
    """The run's gate document, compared and re-judged as the flags ask (stored with
    --write)."""
    run = load_run(args.run)
    doc = run.gate_json
    max_regression, spread, rule, paired_rule = settings(run.params, args)
    method = method_of(run.params, args)
    again = any(x is not None for x in (args.max_regression, args.rule, args.false_discovery))
    if run.gate.paired and again:
        doc = rejudge_paired(doc, max_regression, paired_rule, method)  # its intervals kept
    if args.baseline:
        found = (
            auto_baselines(run, history=args.history)
            if args.baseline == AUTO
            else [load_named_baseline(args.baseline)]
        )
        # One baseline run: its campaign's history, for the spread one run cannot see.
        history = spread_history(found[0], history=args.history) if len(found) == 1 else []
        if found:
            doc = with_baseline(
                doc,
                found,
                max_regression,
                night_spread=spread,
                confidence=args.confidence,
                rule=rule,
                false_discovery=method,
                spread_runs=history,
            )
        else:
            doc = without_baseline(doc, "no earlier comparable run of this campaign")
    elif again:
        doc = rejudge_regressions(doc, max_regression, args.rule, method)
    if args.write:
        stored = dict(doc)
        stored.pop("location", None)  # where it was read from, not part of the file
        data = orjson.dumps(stored, option=orjson.OPT_INDENT_2) + b"\n"
        rewrite_run_file(run.location, "gate.json", data)
    return doc
