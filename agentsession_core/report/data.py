"""What report.html is drawn from: a run's files read back into per-second series.

Sources (every one optional; a missing or torn file leaves its part empty, never an error):
stats_history.csv (per second per request row: rate, failures, latency percentiles from the
intended time), stats_history.jsonl (per second per row: failures by code, service time and
start lag, the generator's own lag), gauges.jsonl (sessions by state, CPU), windows.jsonl,
gate.json, status.json, campaign.json (the parameters), stats.jsonl (whole-run rows) and
server_summary.json (the substrate's own figures per window, docs/SPEC.md §5.9).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentsession_core.judge.gate_document import GateDocument
from agentsession_core.output.run_reader import check_campaign, check_status, where
from agentsession_core.output.stats_files import (
    AGGREGATED,
    CHANGE_RECORD_TYPE,
    HISTORY_CSV,
    HISTORY_JSONL,
    SECOND_PERCENTILES,
    locust_column,
)
from agentsession_core.output.stored_files import StoredFiles

Points = list[tuple[float, float]]
RowKey = tuple[str, str]
AGGREGATED_ROW: RowKey = ("", AGGREGATED)
PERCENTILE_KEYS = tuple(SECOND_PERCENTILES)  # p50, p90, p99
VIEWS = ("latency", "service", "start_lag", "response")
SERVER_SUMMARY = "server_summary.json"


@dataclass
class RowSeries:
    """One row's seconds: {series name: [(unix second, value)]}."""

    rps: Points = field(default_factory=list)
    failures: Points = field(default_factory=list)
    # view ("latency" from the intended time, "service", "start_lag", "response" for the
    # generator rows) -> percentile key -> points (ms)
    views: dict[str, dict[str, Points]] = field(default_factory=dict)
    errors: dict[str, Points] = field(default_factory=dict)

    def view(self, name: str) -> dict[str, Points]:
        return self.views.get(name, {})


@dataclass
class RunData:
    location: str
    local_dir: Path | None = None
    files: list[str] = field(default_factory=list)
    # gate.json as its model (None: no gate.json), and as stored: what a comparison judged
    # here is judged from (judge/gate.py writes the document on from the dict, byte for byte).
    gate: GateDocument | None = None
    gate_json: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
    campaign: dict[str, Any] = field(default_factory=dict)
    windows: list[dict[str, Any]] = field(default_factory=list)
    stats_rows: list[dict[str, Any]] = field(default_factory=list)
    rows: dict[RowKey, RowSeries] = field(default_factory=dict)
    gauges: dict[str, dict[str, Points]] = field(default_factory=dict)
    has_seconds_file: bool = False
    # Changes made by hand (stats_history.jsonl's control records), oldest first.
    changes: list[dict[str, Any]] = field(default_factory=list)
    # server_summary.json as written (None: no such file, or not a JSON object); the server
    # section interprets it, so a summary from a newer schema still shows what it can.
    server: dict[str, Any] | None = None

    # ------------------------------------------------------------ parameters
    @property
    def params(self) -> dict[str, Any]:
        value = self.campaign.get("params")
        return value if isinstance(value, dict) else {}

    @property
    def population(self) -> dict[str, Any]:
        """RunParams.population (older runs stored only the kind)."""
        value = self.params.get("population")
        if isinstance(value, dict):
            return value
        return {"kind": value} if value else {}

    @property
    def population_kind(self) -> str:
        return str(self.population.get("kind", "?"))

    def base_level(self) -> float | None:
        """A turnover's target_rps (its target at level 1); None for other populations, whose
        achieved_rps target is what their load model put due (docs/SPEC.md §6)."""
        if self.population_kind != "turnover":
            return None
        return number(self.population.get("target_rps"))

    @property
    def name(self) -> str:
        run = self.gate.run if self.gate is not None else None
        return str(self.params.get("name") or (run.name if run else None) or "run")

    # ------------------------------------------------------------ time
    def span(self) -> tuple[float, float]:
        """[first, last + 1) unix seconds of anything the run recorded."""
        times = [t for series in self.rows.values() for t, _ in series.rps]
        times += [t for states in self.gauges.values() for pts in states.values() for t, _ in pts]
        for w in self.windows:
            times += [v for v in (number(w.get("start_unix")), number(w.get("end_unix"))) if v]
        if not times:
            started = number(self.campaign.get("started_unix")) or 0.0
            return started, started + 1.0
        return min(times), max(times) + 1.0

    def row(self, kind: str, name: str) -> RowSeries:
        return self.rows.get((kind, name)) or RowSeries()

    def stats_row(self, metric: str) -> dict[str, Any]:
        """The measurements of a stats.jsonl row (the last one of that metric)."""
        found: dict[str, Any] = {}
        for r in self.stats_rows:
            if r.get("metric") == metric and isinstance(r.get("measurements"), dict):
                found = r["measurements"]
        return found


# --------------------------------------------------------------------------- parsing
def number(value: Any) -> float | None:
    if value is None or value == "" or value == "N/A" or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def parse_json(text: str | None) -> dict[str, Any] | None:
    """A lenient JSON object (None when torn or not an object). orjson, as every reader of a
    run: no NaN, and deep nesting is an error, not a RecursionError."""
    if text is None:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def parse_jsonl(text: str | None) -> list[dict[str, Any]]:
    out = []
    for line in (text or "").splitlines():
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a torn last line from a killed run must not sink the report
        if isinstance(value, dict):
            out.append(value)
    return out


def read_history_csv(text: str, rows: dict[RowKey, RowSeries]) -> None:
    """stats_history.csv: rate, failures and latency percentiles per second per row."""
    columns = [(locust_column(key), key) for key in PERCENTILE_KEYS]
    for line in csv.DictReader(io.StringIO(text)):
        t = number(line.get("Timestamp"))
        name = line.get("Name")
        if t is None or not name:
            continue
        series = rows.setdefault((line.get("Type") or "", name), RowSeries())
        for column, target in (("Requests/s", series.rps), ("Failures/s", series.failures)):
            value = number(line.get(column))
            if value is not None:
                target.append((t, value))
        for column, key in columns:
            value = number(line.get(column))
            if value is not None:
                series.views.setdefault("latency", {}).setdefault(key, []).append((t, value))


def read_history_jsonl(records: list[dict[str, Any]], rows: dict[RowKey, RowSeries]) -> None:
    """stats_history.jsonl: failures by code, service time, start lag, generator lag."""
    for r in records:
        t = number(r.get("t"))
        if t is None or not r.get("name"):
            continue
        key = (str(r.get("type") or ""), str(r["name"]))
        known = key in rows
        series = rows.setdefault(key, RowSeries())
        if not known:  # a row the CSV leaves out (generator rows): its rate from here
            series.rps.append((t, number(r.get("count")) or 0.0))
        for view in ("service", "start_lag", "response"):
            values = r.get(view)
            if not isinstance(values, dict):
                continue
            for pkey in PERCENTILE_KEYS:
                value = number(values.get(pkey))
                if value is not None:
                    series.views.setdefault(view, {}).setdefault(pkey, []).append((t, value))
        errors = r.get("errors")
        if isinstance(errors, dict):
            for code, n in errors.items():
                value = number(n)
                if value:
                    series.errors.setdefault(str(code), []).append((t, value))


def read_gauges(records: list[dict[str, Any]]) -> dict[str, dict[str, Points]]:
    """gauges.jsonl -> {gauge name: {label values ("" when none): points}}."""
    out: dict[str, dict[str, Points]] = {}
    for g in records:
        t, v = number(g.get("t")), number(g.get("value"))
        if t is None or v is None or not g.get("name"):
            continue
        labels = g.get("labels") if isinstance(g.get("labels"), dict) else {}
        label = ",".join(str(value) for _, value in sorted((labels or {}).items()))
        out.setdefault(str(g["name"]), {}).setdefault(label, []).append((t, v))
    return out


def load_run_data(source: StoredFiles) -> RunData:
    """Every file the report draws from, read once (a thread's work for an s3 run)."""
    data = RunData(location=source.location, local_dir=source.local_dir)
    data.files = source.names()
    # Written atomically, so never torn: a bad one is refused (exit 2) as the gate refuses
    # it, rather than drawn as if the run had none.
    data.gate_json = source.json("gate.json")
    if data.gate_json is not None:
        data.gate = GateDocument.read(data.gate_json, where(source.location, "gate.json"))
    data.status = check_status(source.json("status.json"), where(source.location, "status.json"))
    campaign = source.json("campaign.json")
    data.campaign = check_campaign(campaign, where(source.location, "campaign.json")) or {}
    data.windows = [w for w in parse_jsonl(source.text("windows.jsonl")) if "outcome" in w]
    data.stats_rows = parse_jsonl(source.text("stats.jsonl"))
    read_history_csv(source.text(HISTORY_CSV) or "", data.rows)
    seconds = source.text(HISTORY_JSONL)
    data.has_seconds_file = seconds is not None
    records = parse_jsonl(seconds)
    data.changes = [r for r in records if r.get("type") == CHANGE_RECORD_TYPE]
    read_history_jsonl([r for r in records if r.get("type") != CHANGE_RECORD_TYPE], data.rows)
    data.gauges = read_gauges(parse_jsonl(source.text("gauges.jsonl")))
    data.server = parse_json(source.text(SERVER_SUMMARY))
    return data


__all__ = [
    "AGGREGATED_ROW",
    "PERCENTILE_KEYS",
    "SERVER_SUMMARY",
    "Points",
    "RowSeries",
    "RunData",
    "load_run_data",
    "number",
    "parse_json",
    "parse_jsonl",
]
