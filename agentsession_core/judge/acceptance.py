"""Accepting a change (docs/SPEC.md §6.3, "Accepting a change"): a sealed record beside a run
that says its level is the one to compare with from now on, who said so, when and why.

After an intended slowdown every later night would fail against the nights before it:
`baseline: auto` takes only nights that passed. `agentsession baseline accept RUN --reason
TEXT` writes acceptance.json beside the run's files; from then on `baseline: auto` compares
only with comparable runs from the accepted one on (judge/baselines.py), the accepted run
itself the first of them although it failed, and history marks it (judge/history.py).

The record is a file of its own, not one of the run's: the run's manifest seals the run's
own files, unchanged, and the record names the sha256 of that manifest's bytes (a run
altered or re-sealed since, or a record copied beside another run, no longer matches) and
carries a sha256 of its own content (`seal`: the record edited by hand no longer matches).
Like the manifest, the seals catch accidents and edits, not a forger who recomputes them.
The reason is a user's text: one line, printable, at most MAX_REASON characters, refused
otherwise (on writing and on reading); every page that shows it escapes it.
"""

from __future__ import annotations

import getpass
import hashlib
import math
import socket
import time
from dataclasses import dataclass, replace
from typing import Any

import orjson

from agentsession_core.errors import AgentsessionError, UsageError, clip
from agentsession_core.judge.run_index import find_runs
from agentsession_core.judge.stored_run import StoredRun, load_run
from agentsession_core.output import upload
from agentsession_core.output.run_dir import ACCEPTANCE, MANIFEST
from agentsession_core.output.run_reader import (
    RunReadError,
    parse_json,
    read_run_file,
    where,
)

ACCEPTANCE_SCHEMA = "agentsession.acceptance/1"
MAX_REASON = 500
MAX_BY = 200
# A run that measured something may be accepted: a failed one (the usual case: its gate
# judged an intended change regressed) or a passing one (to start the comparison there).
ACCEPTABLE_VERDICTS = ("pass", "fail")
_FIELDS = ("schema", "run", "reason", "by", "accepted_unix", "verdict", "regressions", "seal")


class AcceptanceError(UsageError):
    """An acceptance that cannot be written or believed, in one line naming the place."""


def one_line(text: object, flag: str, limit: int) -> str:
    """A user's text as a record holds it: a string, stripped, not empty, one line of
    printable characters (no control character, no line or paragraph separator), at most
    `limit` characters; anything else refused in one line naming `flag`."""
    if not isinstance(text, str):
        raise AcceptanceError(f"{flag}: not a text ({clip(text)})")
    value = text.strip()
    if not value:
        raise AcceptanceError(f"{flag}: empty; say why the change is accepted")
    if len(value) > limit:
        raise AcceptanceError(f"{flag}: {len(value)} characters, at most {limit}")
    bad = next((c for c in value if not c.isprintable()), None)
    if bad is not None:
        raise AcceptanceError(
            f"{flag}: one line of printable text; it holds {bad!a} at character "
            f"{value.index(bad) + 1}"
        )
    return value


def default_by() -> str:
    """Who accepts when `--by` is not given: the user and the machine (`user@host`)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname() or 'localhost'}"


@dataclass(frozen=True)
class Acceptance:
    """A believed record: the accepted run's `location` (where the record was read),
    the reason, who and when (`accepted_unix`), the run's verdict and regressed figures
    when it was accepted, and the manifest digest it is bound to."""

    location: str
    reason: str
    by: str
    accepted_unix: float
    verdict: str
    regressions: tuple[str, ...]
    manifest_sha256: str

    @property
    def record(self) -> str:
        return where(self.location, ACCEPTANCE)

    def to_dict(self) -> dict[str, Any]:
        """What history.json and `baseline list --json` show of it."""
        return {
            "reason": self.reason,
            "by": self.by,
            "accepted_unix": self.accepted_unix,
            "verdict": self.verdict,
            "regressions": list(self.regressions),
            "record": self.record,
        }


def _seal(body: dict[str, Any]) -> str:
    """The sha256 of the record's content without its seal, keys sorted, compact."""
    content = {k: v for k, v in body.items() if k != "seal"}
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _manifest_digest(location: str, endpoint_url: str | None) -> str:
    data = read_run_file(location, MANIFEST, endpoint_url=endpoint_url)
    if data is None:
        raise AcceptanceError(f"{where(location, MANIFEST)}: missing; the run is not sealed")
    return hashlib.sha256(data).hexdigest()


def record_of(
    run: StoredRun, manifest_sha256: str, *, reason: str, by: str, now: float
) -> dict[str, Any]:
    """acceptance.json's document for `run` (sealed)."""
    body: dict[str, Any] = {
        "schema": ACCEPTANCE_SCHEMA,
        "run": {"location": run.location, "manifest_sha256": manifest_sha256},
        "reason": reason,
        "by": by,
        "accepted_unix": round(now, 3),
        "verdict": run.gate.verdict,
        "regressions": sorted(_regressions(run)),
    }
    body["seal"] = _seal(body)
    return body


def _regressions(run: StoredRun) -> set[str]:
    found: set[str] = set()
    for part in (run.gate.baseline, run.gate.paired):
        if part is not None:
            found.update(part.regressions or [])
    return found


def accept_run(
    location: str,
    reason: str,
    *,
    by: str | None = None,
    endpoint_url: str | None = None,
    now: float | None = None,
) -> tuple[Acceptance, Acceptance | None]:
    """Write the acceptance of the run at `location` (a directory or an s3:// prefix):
    the run must be sealed and unaltered (every file hashed, as a gate believes it) and
    must have measured something (pass or fail); refused in one line otherwise. Returns the
    new acceptance and the one it replaced (None: the run had none, or an unbelievable one)."""
    reason = one_line(reason, "--reason", MAX_REASON)
    by = one_line(default_by() if by is None else by, "--by", MAX_BY)
    try:
        run = load_run(location, endpoint_url=endpoint_url)
    except AgentsessionError as exc:
        raise AcceptanceError(f"cannot accept: {exc}") from None
    if run.gate.verdict not in ACCEPTABLE_VERDICTS or run.gate.run_status == "refused":
        raise AcceptanceError(
            f"{run.location}: cannot accept a {run.gate.verdict} run "
            f"({clip(run.gate.reason or 'no reason', 160)}): it measured nothing to compare with"
        )
    digest = _manifest_digest(run.location, endpoint_url)
    try:
        previous = read_acceptance(run.location, endpoint_url=endpoint_url)
    except AcceptanceError:
        previous = None  # an unbelievable record is replaced, not kept
    stamp = time.time() if now is None else now
    body = record_of(run, digest, reason=reason, by=by, now=stamp)
    data = orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n"
    try:
        upload.put_file(run.location, ACCEPTANCE, data, endpoint_url=endpoint_url)
    except upload.UploadError as exc:
        raise AcceptanceError(f"cannot write the acceptance: {exc}") from None
    accepted = _believed(run.location, body, digest)
    return accepted, previous


def _believed(location: str, body: dict[str, Any], manifest_sha256: str) -> Acceptance:
    regressions = body.get("regressions")
    return Acceptance(
        location=location,
        reason=str(body["reason"]),
        by=str(body["by"]),
        accepted_unix=float(body["accepted_unix"]),
        verdict=str(body["verdict"]),
        regressions=tuple(str(r) for r in regressions) if isinstance(regressions, list) else (),
        manifest_sha256=manifest_sha256,
    )


def read_acceptance(location: str, *, endpoint_url: str | None = None) -> Acceptance | None:
    """The acceptance beside the run at `location` (None: there is none), believed only when
    its own seal holds, its fields are as written and the run's manifest.json is the one it
    was accepted with; otherwise AcceptanceError, one line naming acceptance.json. The run's
    own files are not checked here: a reader that believes the run has done that."""
    place = where(location, ACCEPTANCE)
    try:
        data = read_run_file(location, ACCEPTANCE, endpoint_url=endpoint_url)
        if data is None:
            return None
        body = parse_json(data, place)
    except RunReadError as exc:
        raise AcceptanceError(str(exc)) from None
    if not isinstance(body, dict) or body.get("schema") != ACCEPTANCE_SCHEMA:
        raise AcceptanceError(f"{place}: not an acceptance record ({ACCEPTANCE_SCHEMA})")
    unknown = sorted(set(body) - set(_FIELDS))
    if unknown:
        raise AcceptanceError(f"{place}: unknown field {clip(unknown[0])}")
    if body.get("seal") != _seal(body):
        raise AcceptanceError(f"{place}: altered: its seal differs from its content")
    run = body.get("run")
    wanted = run.get("manifest_sha256") if isinstance(run, dict) else None
    stamp = body.get("accepted_unix")
    if (
        not isinstance(wanted, str)
        or not isinstance(stamp, int | float)
        or isinstance(stamp, bool)
        or not math.isfinite(stamp)
        or body.get("verdict") not in ACCEPTABLE_VERDICTS
    ):
        raise AcceptanceError(f"{place}: not an acceptance record (run, accepted_unix, verdict)")
    for name, limit in (("reason", MAX_REASON), ("by", MAX_BY)):
        try:
            one_line(body.get(name), name, limit)
        except AcceptanceError as exc:
            raise AcceptanceError(f"{place}: {exc}") from None
    try:
        digest = _manifest_digest(location, endpoint_url)
    except RunReadError as exc:
        raise AcceptanceError(str(exc)) from None
    if digest != wanted:
        raise AcceptanceError(
            f"{place}: not this run's: the run's {MANIFEST} is not the one it was accepted "
            "with (the run was altered or re-sealed since, or the record was copied from "
            "another run); accept the run again"
        )
    return _believed(location, body, wanted)


def accepted(run: StoredRun, *, endpoint_url: str | None = None) -> StoredRun:
    """`run` with its acceptance (`run.acceptance`) when it has a believable one; a record
    that cannot be believed raises AcceptanceError (its one line)."""
    found = read_acceptance(run.location, endpoint_url=endpoint_url)
    return run if found is None else replace(run, acceptance=found)


def load_named_baseline(location: str, *, endpoint_url: str | None = None) -> StoredRun:
    """A run named as a baseline (`gate --baseline RUN`, a campaign's `baseline: RUN`, the
    report's), read with its acceptance: a failed run that was accepted is a baseline, as
    it is to `baseline: auto`. Named explicitly, an acceptance that cannot be believed is
    refused in its one line (auto skips it with a warning: there it only picks a start)."""
    return accepted(load_run(location, endpoint_url=endpoint_url), endpoint_url=endpoint_url)


def list_acceptances(
    prefix: str, name: str | None = None, *, endpoint_url: str | None = None
) -> list[tuple[str, Acceptance | None, str | None]]:
    """Every run under a destination that has an acceptance record, oldest first:
    (location, the acceptance or None, why it cannot be believed or None). The record and
    its binding to the run's manifest are checked; the run's files are when a gate reads
    the run."""
    out: list[tuple[str, Acceptance | None, str | None]] = []
    for ref in find_runs(prefix, name, endpoint_url=endpoint_url):
        if ref.accepted is False:
            continue
        try:
            found = read_acceptance(ref.location, endpoint_url=endpoint_url)
        except AgentsessionError as exc:
            out.append((ref.location, None, str(exc)))
            continue
        if found is not None:
            out.append((ref.location, found, None))
    return out


__all__ = [
    "ACCEPTANCE",
    "ACCEPTANCE_SCHEMA",
    "MAX_REASON",
    "Acceptance",
    "AcceptanceError",
    "accept_run",
    "accepted",
    "default_by",
    "list_acceptances",
    "load_named_baseline",
    "one_line",
    "read_acceptance",
]
