"""Night-to-night history of a campaign: every run under a destination, its verdict and its
headline figures, and where each figure changed (docs/SPEC.md §6.4).

A destination is a campaign's ``out`` directory or its ``dest`` s3:// prefix; runs live at
``<prefix>/runs/<name>/run_date=YYYY-MM-DD/run_ts=<unix>/run_tag=<tag>/`` (docs/SPEC.md §7).
`find_runs` lists them oldest first; `load_series` reads each (judge/stored_run.py
`load_run`, as history believes a run) into a RunRecord that keeps only what
history shows of it (verdict, reason, figures, regressions: never the whole gate.json, so a
history of 10,000 nights holds 10,000 small records). A run is believed when sealed, the
files read hashed and the others checked by presence and size (docs/SPEC.md §6.4). A run
that cannot be read is kept, with the reason in `error`: a history that silently lost a
bad night would look calmer than it was. Each run also carries the figures its own gate
judged `regressed` (gate.json's `baseline.regressions` and, for a paired campaign,
`paired.regressions`), so a history too short for a change point still shows which nights
failed on which figure. An accepted run (judge/acceptance.py) carries its acceptance, and
a change point at the step it accepted is moved to `accepted_steps`: reported once, when it
was a change nobody had accepted, never again (docs/SPEC.md §6.4).
`history_document` is history.json: the runs, the series per metric and the change points.

Everything is synchronous (boto3 for s3://): async callers use asyncio.to_thread.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentsession_core.errors import AgentsessionError
from agentsession_core.judge import changepoints, run_index
from agentsession_core.judge.acceptance import Acceptance, read_acceptance
from agentsession_core.judge.figures import Figure, figures_of, headline_metrics, is_latency
from agentsession_core.judge.gate_document import GateDocument
from agentsession_core.judge.stored_run import load_run
from agentsession_core.output import upload

HISTORY_SCHEMA = "agentsession.history/1"
# Void runs are drawn but never judged for change points: a saturated generator or a
# refused start says nothing about the substrate (docs/SPEC.md §6).
JUDGED_VERDICTS = ("pass", "fail")


class HistoryError(AgentsessionError):
    """The destination itself cannot be listed (exit 2)."""

    exit_code = 2


@dataclass(slots=True)
class RunRecord:
    """One run of the history: what history.json shows of it, not its files. `error` says
    why it could not be read (then no figures) or what it lacks (campaign.json). `run_ts` is
    the layout's run_ts (unix seconds). `regressions`: the metrics this run's gate judged
    regressed (against its baselines or, paired, its reference arm), sorted. `accepted`:
    its believed acceptance; `acceptance_error`: why a record beside it is not believed."""

    location: str
    name: str
    run_date: str
    run_ts: float
    tag: str
    verdict: str = "void"
    reason: str = ""
    figures: dict[str, Figure] = field(default_factory=dict)
    regressions: list[str] = field(default_factory=list)
    error: str | None = None
    accepted: Acceptance | None = None
    acceptance_error: str | None = None

    @property
    def judged(self) -> bool:
        return self.error is None and self.verdict in JUDGED_VERDICTS

    def to_dict(self, figures: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        """history.json's run; `figures`: its figures as dicts already made (shared)."""
        return {
            "location": self.location,
            "name": self.name,
            "run_date": self.run_date,
            "run_ts": self.run_ts if math.isfinite(self.run_ts) else None,
            "tag": self.tag,
            "verdict": self.verdict,
            "reason": self.reason,
            "error": self.error,
            "regressions": list(self.regressions),
            "accepted": None if self.accepted is None else self.accepted.to_dict(),
            "acceptance_error": self.acceptance_error,
            "figures": _figure_dicts(self) if figures is None else figures,
        }


def _figure_dicts(record: RunRecord) -> dict[str, dict[str, Any]]:
    # A Figure's fields are flat numbers and text: its __dict__ is asdict's result, made
    # without asdict's recursive copy (140,000 figures in a history of 10,000 nights).
    return {m: dict(vars(f)) for m, f in record.figures.items()}


def regressions_of(gate: GateDocument) -> list[str]:
    """The metrics a gate.json judged regressed: `baseline.regressions` and `paired.regressions`
    (either may be absent), together, sorted."""
    found: set[str] = set()
    for part in (gate.baseline, gate.paired):
        if part is not None:
            found.update(part.regressions or [])
    return sorted(found)


# --------------------------------------------------------------------------- finding runs
def find_runs(
    prefix: str, name: str | None = None, *, endpoint_url: str | None = None
) -> list[str]:
    """The location of every run directory under `prefix` (a directory, file:// URL or
    s3://bucket/prefix), for one campaign name or all; oldest first by run_ts, then
    run_date, tag and name (judge/run_index.py)."""
    return [r.location for r in _refs(prefix, name, endpoint_url)]


def _refs(prefix: str, name: str | None, endpoint_url: str | None) -> list[run_index.RunRef]:
    prefix = prefix.removeprefix("file://").rstrip("/")
    if upload.is_s3(prefix):
        try:
            upload.split_s3(prefix)
            return run_index.find_runs(prefix, name, endpoint_url=endpoint_url)
        except upload.UploadError as exc:
            raise HistoryError(f"cannot list {prefix}/runs: {exc}") from None
    if not Path(prefix or ".").is_dir():
        raise HistoryError(f"{prefix}: no such directory")
    return run_index.find_runs(prefix or ".", name)


# --------------------------------------------------------------------------- reading runs
def load_record(
    location: str, *, endpoint_url: str | None = None, accepted: bool | None = None
) -> RunRecord:
    """One run as a RunRecord; never raises for an unreadable run (its `error` says why).
    `accepted`: whether a listing showed an acceptance beside it (None: look)."""
    ref = run_index.parse_location(location)
    record = (
        RunRecord(location, ref.name, ref.run_date, float(ref.run_ts), ref.tag)
        if ref is not None
        else RunRecord(location, "", "", float("inf"), "")
    )
    try:
        # Sealed, the files read hashed, the others by presence and size (SPEC §6.4).
        run = load_run(location, endpoint_url=endpoint_url, verify="files read")
    except Exception as exc:  # a bad night is listed with its reason, never dropped
        record.error = str(exc) or type(exc).__name__
        record.reason = f"unreadable: {record.error}"
        return record
    record.verdict = run.gate.verdict
    record.reason = run.gate.reason or ""
    record.figures = figures_of(run.gate)
    record.regressions = regressions_of(run.gate)
    if accepted is not False:
        try:
            record.accepted = read_acceptance(run.location, endpoint_url=endpoint_url)
        except AgentsessionError as exc:
            record.acceptance_error = str(exc)
    if not run.params:  # the gate is still usable; say what is missing
        record.error = "campaign.json: missing or without parameters"
    return record


def load_series(
    prefix: str, name: str | None = None, *, endpoint_url: str | None = None
) -> list[RunRecord]:
    """Every run under `prefix` (see find_runs), read, oldest first."""
    return [
        load_record(ref.location, endpoint_url=endpoint_url, accepted=ref.accepted)
        for ref in _refs(prefix, name, endpoint_url)
    ]


def judged(records: list[RunRecord]) -> list[RunRecord]:
    """The runs a series is judged on: readable, pass or fail (void runs are left out)."""
    return [r for r in records if r.judged]


# --------------------------------------------------------------------------- history.json
def _series(
    nights: list[int],
    records: list[RunRecord],
    figures: list[dict[str, dict[str, Any]]],
    metric: str,
) -> dict[str, Any]:
    """One campaign's series of `metric`: `records` are its runs, `nights` their indexes in
    the whole history's runs, `figures` their figures as dicts."""
    points = [
        {
            "location": r.location,
            "run_ts": r.run_ts,
            "tag": r.tag,
            "verdict": r.verdict,
            "regressed": metric in r.regressions,
            **f[metric],
        }
        for r, f in zip(records, figures, strict=True)
        if metric in f
    ]
    usable = [i for i, r in enumerate(records) if r.judged and metric in r.figures]
    values = [records[i].figures[metric].value for i in usable]
    found = changepoints.change_points(values, log=is_latency(metric))
    unit = next((p["unit"] for p in points if p.get("unit")), "")
    spans = accepted_spans(records)
    cps: list[dict[str, Any]] = []
    accepted_steps: list[dict[str, Any]] = []
    for c in found:
        at = usable[c.index]
        run = records[at]
        cp = {
            "metric": metric,
            "location": run.location,
            "run_ts": run.run_ts if math.isfinite(run.run_ts) else None,
            "tag": run.tag,
            **{k: v for k, v in c.to_dict().items() if k != "index"},
            "night": nights[at],
        }
        by = next((a for lo, a in spans if lo < at <= a), None)
        if by is None:
            cps.append(cp)
            continue
        acceptance = records[by].accepted
        assert acceptance is not None  # accepted_spans holds accepted runs only
        accepted_steps.append(dict(cp, accepted_by=records[by].location, reason=acceptance.reason))
    return {
        "metric": metric,
        "unit": unit,
        "points": points,
        "judged_points": len(values),
        "change_points": cps,
        "accepted_steps": accepted_steps,
    }


def accepted_spans(records: list[RunRecord]) -> list[tuple[int, int]]:
    """Per accepted run of one campaign's records (oldest first), the nights whose step it
    accepted, as (lo, a): after lo, the last night before it that passed (-1: none), up to
    a, the accepted run itself. The nights between failed against the level before them,
    so a step into the accepted level lies there (docs/SPEC.md §6.4)."""
    spans = []
    last_pass = -1
    for i, record in enumerate(records):
        if record.accepted is not None:
            spans.append((last_pass, i))
        if record.judged and record.verdict == "pass":
            last_pass = i
    return spans


def history_document(
    records: list[RunRecord], *, prefix: str, name: str | None = None
) -> dict[str, Any]:
    """history.json: the runs in order, per campaign name and metric the series and its
    change points, and every change point in one list. Each figure's dict is made once and
    shared by the run and its series point's source."""
    figures = [_figure_dicts(r) for r in records]
    by_name: dict[str, list[int]] = {}
    for night, record in enumerate(records):
        by_name.setdefault(record.name, []).append(night)
    known = headline_metrics()
    campaigns: list[dict[str, Any]] = []
    for campaign, nights in by_name.items():
        mine = [records[i] for i in nights]
        theirs = [figures[i] for i in nights]
        present = {m for r in mine for m in r.figures}
        metrics = known + sorted(present - set(known))
        campaigns.append(
            {"name": campaign, "series": [_series(nights, mine, theirs, m) for m in metrics]}
        )
    everything = [
        dict(cp, name=c["name"])
        for c in campaigns
        for s in c["series"]
        for cp in s["change_points"]
    ]
    accepted = [
        dict(cp, name=c["name"])
        for c in campaigns
        for s in c["series"]
        for cp in s["accepted_steps"]
    ]
    return {
        "schema": HISTORY_SCHEMA,
        "prefix": prefix,
        "name": name,
        "generated_unix": time.time(),
        "rule": changepoints.rule(),
        "runs": [r.to_dict(f) for r, f in zip(records, figures, strict=True)],
        "campaigns": campaigns,
        "change_points": sorted(everything, key=lambda cp: (cp["night"], cp["metric"])),
        "accepted_steps": sorted(accepted, key=lambda cp: (cp["night"], cp["metric"])),
    }


__all__ = [
    "HISTORY_SCHEMA",
    "HistoryError",
    "RunRecord",
    "accepted_spans",
    "find_runs",
    "history_document",
    "judged",
    "load_record",
    "load_series",
    "regressions_of",
]
