"""`agentsession history PREFIX [--name NAME] [-o FILE]`: a campaign's nights, their verdicts,
headline figures and change points, as history.json and history.html.

PREFIX is a campaign's `out` directory or its `dest` s3:// prefix. Both files go to the
current directory, or beside FILE (`-o dir/history.html` writes dir/history.json too). The
judging (figures, change points) is judge.history's; output renders the document it makes.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import orjson

from agentsession_core.errors import UsageError
from agentsession_core.judge.history import history_document, load_series
from agentsession_core.output.output_file import output_file, write_output
from agentsession_core.report.history_page import HISTORY_HTML, HISTORY_JSON, render_history


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "history",
        help="every run under a destination: verdicts, figures per night, change points",
        description="Read every run under PREFIX (a campaign's out directory or dest "
        "s3:// prefix, runs/<name>/run_date=…/run_ts=…/run_tag=…/) and write history.json "
        "and history.html: each run's verdict and headline figures, the series per metric "
        "and where each changed. Default output: the current directory.",
    )
    p.add_argument("prefix", metavar="PREFIX", help="directory or s3://bucket/prefix")
    p.add_argument("--name", metavar="NAME", help="only this campaign name (default: all)")
    p.add_argument(
        "-o", "--output", metavar="FILE", help="history.html's path (history.json goes beside)"
    )
    p.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=None,
        help="S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)",
    )
    p.set_defaults(handler=history)


def history(args: argparse.Namespace) -> int:
    if args.endpoint_url:
        # judge.gate.load_run reads through boto3's usual chain: this process's environment
        # is how the endpoint reaches it (a one-shot command, so nothing else shares it).
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url
    records = load_series(args.prefix, args.name, endpoint_url=args.endpoint_url)
    doc = history_document(records, prefix=args.prefix, name=args.name)
    page_path = output_file("--output", args.output) or Path(HISTORY_HTML).absolute()
    json_path = page_path.with_name(HISTORY_JSON)  # checked as it is written, as the page
    page = render_history(doc, out_dir=page_path.parent)
    try:
        page_path.parent.mkdir(parents=True, exist_ok=True)
        # orjson: the same indented document as json.dumps(indent=2), a tenth of the time
        # (a history of 10,000 nights is about 100 MB of it).
        write_output(
            "--output's history.json", json_path, orjson.dumps(doc, option=orjson.OPT_INDENT_2)
        )
        write_output("--output", page_path, page)
    except OSError as exc:
        raise UsageError(f"{page_path.parent}: cannot write ({exc.strerror or exc})") from None
    unreadable = sum(1 for r in records if r.error)
    print(
        f"{len(records)} run(s), {len(doc['change_points'])} change point(s)"
        + (f", {unreadable} with unreadable files" if unreadable else "")
    )
    print(json_path)
    print(page_path)
    return 0


__all__ = ["history", "register"]
