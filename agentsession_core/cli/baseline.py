"""`agentsession baseline accept RUN --reason TEXT [--by NAME]` and `agentsession baseline list
PREFIX [--name NAME] [--json]`: accepting an intended change, and what is accepted.

`accept` writes a sealed acceptance record beside a sealed, unaltered run (a directory or an
s3:// prefix): from then on `baseline: auto` compares only with comparable runs from that
one on, and history marks it (judge/acceptance.py, docs/SPEC.md §6.3). `list` shows every
accepted run under a campaign's `out` directory or `dest` prefix, oldest first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os

from agentsession_core.judge.acceptance import (
    MAX_REASON,
    Acceptance,
    accept_run,
    list_acceptances,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "baseline",
        help="accept an intended change as the new baseline level; list what is accepted",
        description="Accept a run's level as the one `baseline: auto` compares with from now "
        "on (an intended change its gate judged regressed), or list the accepted runs.",
    )
    groups = p.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    accept = groups.add_parser(
        "accept",
        help="accept a run: later nights compare only with runs from it on",
        description="Write a sealed acceptance record (acceptance.json) beside RUN, a sealed "
        "and unaltered run (a directory or an s3:// prefix) that passed or failed. From then "
        "on `baseline: auto` compares only with comparable runs from RUN on, RUN itself the "
        "first of them; history marks it with the reason. The Prefect deployment "
        "`baseline-accept` does the same.",
    )
    accept.add_argument("run", metavar="RUN", help="the run's directory or s3:// prefix")
    accept.add_argument(
        "--reason",
        metavar="TEXT",
        required=True,
        help=f"why the change is accepted: one line, at most {MAX_REASON} characters",
    )
    accept.add_argument(
        "--by", metavar="NAME", default=None, help="who accepts (default: user@host)"
    )
    _endpoint(accept)
    accept.set_defaults(handler=accept_command)
    listing = groups.add_parser(
        "list",
        help="the accepted runs under a destination",
        description="Every accepted run under PREFIX (a campaign's out directory or dest "
        "s3:// prefix), oldest first: when, by whom, why, and the run's verdict then; a "
        "record that cannot be believed is listed with why.",
    )
    listing.add_argument("prefix", metavar="PREFIX", help="directory or s3://bucket/prefix")
    listing.add_argument("--name", metavar="NAME", help="only this campaign name (default: all)")
    listing.add_argument("--json", action="store_true", help="one JSON document on stdout")
    _endpoint(listing)
    listing.set_defaults(handler=list_command)


def _endpoint(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=None,
        help="S3-compatible endpoint (default: AWS_ENDPOINT_URL or AWS)",
    )


def _use_endpoint(args: argparse.Namespace) -> None:
    if args.endpoint_url:
        # Readers go through boto3's usual chain: this one-shot process's environment is how
        # the endpoint reaches every one of them (as `history` does).
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url


def when(unix: float) -> str:
    return dt.datetime.fromtimestamp(unix, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def accept_lines(done: Acceptance, previous: Acceptance | None) -> list[str]:
    """What `accept` says of an acceptance it wrote: whose it replaced, what it accepted,
    where the record is. The `baseline-accept` flow logs the same lines."""
    lines = []
    if previous is not None:
        lines.append(
            f"replaces the acceptance of {when(previous.accepted_unix)} by {previous.by}: "
            f"{previous.reason}"
        )
    regressed = f"; regressed: {', '.join(done.regressions)}" if done.regressions else ""
    said = f"accepted {done.location} ({done.verdict}{regressed}) by {done.by}: {done.reason}"
    return [*lines, said, done.record]


def accept_command(args: argparse.Namespace) -> int:
    _use_endpoint(args)
    done, previous = accept_run(args.run, args.reason, by=args.by, endpoint_url=args.endpoint_url)
    for line in accept_lines(done, previous):
        print(line)
    return 0


def list_command(args: argparse.Namespace) -> int:
    _use_endpoint(args)
    found = list_acceptances(args.prefix, args.name, endpoint_url=args.endpoint_url)
    if args.json:
        doc = {
            "prefix": args.prefix,
            "name": args.name,
            "accepted": [
                {"location": loc, **(a.to_dict() if a else {}), "error": error}
                for loc, a, error in found
            ],
        }
        print(json.dumps(doc, indent=2))
        return 0
    if not found:
        print(f"no accepted run under {args.prefix}")
        return 0
    for location, acceptance, error in found:
        if acceptance is None:
            print(f"{location}  NOT BELIEVED: {error}")
            continue
        print(
            f"{location}  accepted {when(acceptance.accepted_unix)} by {acceptance.by} "
            f"({acceptance.verdict}): {acceptance.reason}"
        )
    return 0


__all__ = ["accept_command", "accept_lines", "list_command", "register", "when"]
