"""`agentsession report RUN [--baseline RUN|auto] [-o FILE]`: rebuild a run's report.html from
its files, optionally beside a baseline run.

RUN and the baseline are run directories or s3:// prefixes. The page goes to RUN/report.html
for a local run (whose manifest is then re-sealed, so the run still verifies) and to
./report.html for an s3 run unless -o says otherwise. With a baseline,
the gate's comparison (judge.gate.with_baseline: each headline metric's change, regressions
beyond --max-regression) is computed here and handed to the report as data; output renders,
it never judges. `--baseline auto` takes the baselines `agentsession gate --baseline auto`
takes (judge/baselines.py: the last --history good, comparable runs of the same campaign
before RUN): the page draws the newest of them beside RUN and shows the comparison against
them all; without one, the page says so.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from agentsession_core.cli.gate import add_baseline_args, method_of, settings
from agentsession_core.errors import AgentsessionError, UsageError
from agentsession_core.judge.acceptance import AcceptanceError, load_named_baseline
from agentsession_core.judge.baselines import AUTO, auto_baselines, spread_history
from agentsession_core.judge.decision import DEFAULT_RULE, Rule
from agentsession_core.judge.false_discovery import DEFAULT_METHOD, Method
from agentsession_core.judge.gate import baseline_refusal, gate_document, with_baseline
from agentsession_core.judge.gate_document import Baseline, GateInputError
from agentsession_core.judge.stored_run import StoredRun, load_run
from agentsession_core.judge.thresholds import Threshold, parse_thresholds
from agentsession_core.judge.verdict import WindowVerdict
from agentsession_core.output.output_file import output_file, write_output
from agentsession_core.output.run_dir import MANIFEST, RunDir
from agentsession_core.output.stored_files import StoredFiles, open_files
from agentsession_core.report.data import RunData, number
from agentsession_core.report.page import REPORT, Comparison, read_run, render

log = logging.getLogger("agentsession")
DEFAULT_MAX_REGRESSION = 0.2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="rebuild a run's report.html from its files (optionally beside a baseline run)",
        description="Rebuild report.html from a run's files (a directory or an s3:// prefix). "
        "With --baseline, the page also shows the two runs side by side and the deltas the "
        "gate judges. Default output: RUN/report.html for a local run, ./report.html for an "
        "s3 run.",
    )
    p.add_argument("run", metavar="RUN", help="run directory or s3://bucket/prefix")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write the page")
    add_baseline_args(p, "default: the run's max_regression parameter, else 0.2")
    p.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=None,
        help="S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)",
    )
    p.set_defaults(handler=report)


def report(args: argparse.Namespace) -> int:
    source = open_files(args.run, endpoint_url=args.endpoint_url)
    data = read_run(source)  # its gate.json validated: a bad one is refused (exit 2)
    comparison = None
    if args.baseline == AUTO:
        comparison = auto_comparison(args, data)
    elif args.baseline:
        baseline, stored, refused = read_baseline(args.baseline, args.endpoint_url)
        max_regression, spread, rule, _ = settings(data.params, args)
        comparison = compare_runs(
            data,
            baseline,
            max_regression,
            refused=refused,
            stored=stored,
            night_spread=spread,
            confidence=args.confidence,
            rule=rule,
            false_discovery=method_of(data.params, args),
            history=args.history,
            endpoint_url=args.endpoint_url,
        )
    out = output_path(source, args.output)
    page = render(data, rules=threshold_rules(data), comparison=comparison, out_dir=out.parent)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_output("--output", out, page)
        local = source.local_dir
        if local is not None and out == (local / REPORT).absolute() and (local / MANIFEST).exists():
            RunDir(local).write_manifest()  # the sealed run still verifies (upload checks it)
    except OSError as exc:
        raise UsageError(f"{out}: cannot write ({exc.strerror or exc})") from None
    print(out)
    return 0


def auto_comparison(args: argparse.Namespace, data: RunData) -> Comparison:
    """`--baseline auto`: the gate's baselines for RUN (auto_baselines over the stored run,
    which must be sealed, as the gate's), the newest drawn beside it, the comparison against
    them all; none found: a comparison that says so."""
    if args.endpoint_url:
        # auto_baselines reads through boto3's usual chain: this process's environment is
        # how the endpoint reaches it (a one-shot command, as `history` does).
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url
    run = load_run(args.run, endpoint_url=args.endpoint_url)
    try:
        found = auto_baselines(run, history=args.history)
    except GateInputError:
        raise
    except AgentsessionError as exc:  # not in the campaign layout: a run this cannot use
        raise GateInputError(str(exc)) from None
    max_regression, spread, rule, _ = settings(run.params, args)
    if not found:
        return Comparison(
            None,
            Baseline(status="none"),
            reason="no earlier comparable run of this campaign: up to --history "
            f"{args.history} good, comparable runs before this one become its baseline",
            source="baseline: auto",
        )
    newest = read_run(open_files(found[-1].location, endpoint_url=args.endpoint_url))
    runs = (
        f"the last {len(found)} good comparable runs"
        if len(found) > 1
        else "the last good comparable run"
    )
    comparison = compare_runs(
        data,
        newest,
        max_regression,
        against=found,
        night_spread=spread,
        confidence=args.confidence,
        rule=rule,
        false_discovery=method_of(run.params, args),
    )
    comparison.source = (
        f"baseline: auto, drawn beside {newest.location}; judged against {runs} of this "
        "campaign before this one"
    )
    return comparison


def read_baseline(
    location: str, endpoint_url: str | None
) -> tuple[RunData, StoredRun | None, str | None]:
    """The baseline as the report draws it, as the gate reads it (with its acceptance; None
    when the gate cannot read it), and the line `gate --baseline` refuses it with (None: the
    gate takes it). One the gate refuses is still drawn when it can be read (a person may
    compare any two runs), with that line on the page; one that cannot be read at all is
    refused here with the gate's own line, so the two commands never disagree."""
    stored: StoredRun | None = None
    try:
        stored = load_named_baseline(location, endpoint_url=endpoint_url)
        refused = baseline_refusal(stored)
    except (GateInputError, AcceptanceError) as exc:
        refused = str(exc)
    try:
        baseline = read_run(open_files(location, endpoint_url=endpoint_url))
    except AgentsessionError as exc:
        raise GateInputError(refused or str(exc)) from None
    return baseline, stored, refused


def output_path(source: StoredFiles, output: str | None) -> Path:
    chosen = output_file("--output", output)
    if chosen is not None:
        return chosen
    if source.local_dir is not None:
        return (source.local_dir / REPORT).absolute()
    return Path(REPORT).absolute()


def threshold_rules(data: RunData) -> list[Threshold]:
    """The run's thresholds, parsed from campaign.json (none for an unjudged run)."""
    texts = data.params.get("thresholds") or []
    try:
        return parse_thresholds([str(t) for t in texts])
    except UsageError as exc:  # an older run's rule this version no longer reads
        log.warning("thresholds not drawn: %s", exc)
        return []


def gate_of(data: RunData) -> dict[str, Any] | None:
    """The run's gate document: gate.json, else rebuilt from windows.jsonl."""
    if data.gate_json is not None:
        return data.gate_json
    if not data.windows:
        return None
    try:
        verdicts = [WindowVerdict.from_dict(w) for w in data.windows]
    except (ValueError, KeyError, TypeError):
        return None
    status = data.status or {}
    return gate_document(
        verdicts,
        abort_reason=status.get("abort_reason"),
        run_status=status.get("status", "completed"),
    )


def compare_runs(
    data: RunData,
    baseline: RunData,
    max_regression: float | None,
    *,
    refused: str | None = None,
    stored: StoredRun | None = None,
    against: list[StoredRun] | None = None,
    night_spread: float | None = None,
    confidence: float | None = None,
    rule: Rule = DEFAULT_RULE,
    false_discovery: Method = DEFAULT_METHOD,
    history: int | None = None,
    endpoint_url: str | None = None,
) -> Comparison:
    """What the gate judges of `data` against `baseline`, as data for the report.
    `refused`: the line the gate refuses this baseline with (read_baseline); without it, the
    refusal a readable baseline's own verdict earns. `stored`: the baseline as the gate read
    it (read_baseline: with its acceptance). `against`: the runs judged against
    (oldest first; `--baseline auto`'s), when they are more than the one drawn. `history`:
    one baseline run's history read (up to that many runs) for the spread it cannot see
    alone, as the gate reads it."""
    if max_regression is None:
        max_regression = number(data.params.get("max_regression"))
        if max_regression is None:
            max_regression = DEFAULT_MAX_REGRESSION
    doc, base_doc = gate_of(data), gate_of(baseline)
    if doc is None or base_doc is None:
        which = "this run" if doc is None else "the baseline"
        return Comparison(
            baseline,
            reason=f"not judged: {which} has no judged windows",
            refused=refused,
        )
    base = stored or StoredRun.of(baseline.location, base_doc)
    if refused is None:
        refused = baseline_refusal(base)
    options: dict[str, Any] = {
        "confidence": confidence,
        "rule": rule,
        "false_discovery": false_discovery,
    }
    if against is None and history:
        options["spread_runs"] = spread_history(base, history=history, endpoint_url=endpoint_url)
    if night_spread is not None:
        options["night_spread"] = night_spread
    # A person may look at any two runs side by side; only the gate refuses a baseline, and
    # then the page says so instead of a verdict the gate would never give.
    judged = with_baseline(doc, against or base, max_regression, refuse=False, **options)
    section = Baseline.model_validate(judged["baseline"]) if judged.get("baseline") else None
    if refused is not None:
        return Comparison(baseline, section, None, None, refused=refused)
    return Comparison(baseline, section, judged["verdict"], judged["reason"])


__all__ = [
    "auto_comparison",
    "compare_runs",
    "gate_of",
    "output_path",
    "read_baseline",
    "register",
    "report",
    "threshold_rules",
]
