"""Where a window's wakes spent their time (docs/SPEC.md §5.9), from the `agent-substrate`
preset's answers (measure/agent_substrate.py): per phase a count, a mean and percentiles
computed here from the window's bucket increases, beside the client's own TimeToWake, and the
reconciliation of the server's resume records with the client's successful wakes, and the
part of the client's wakes the phases leave unexplained (measure/wake_unattributed.py).

The guide's rule for histograms with a last finite bucket: a percentile whose rank lands past
that bound (in the `+Inf` bucket) is **saturated**: the true value is somewhere above the
buckets, and interpolating says nothing. Such a percentile is given as the phase's mean and
named in `saturated`, so neither a person nor a rule reads an invented number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentsession_core.measure.agent_substrate import COUNTS, PHASES, RECORDS_PHASE, Phase
from agentsession_core.measure.server_metrics import PHASE_FIGURES, Series, series_name
from agentsession_core.measure.stats import TIME_TO_WAKE_ROW, Window
from agentsession_core.measure.wake_unattributed import unattributed, unattributed_figures

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
Buckets = list[tuple[float, float]]  # (upper bound in seconds, cumulative count), +Inf last


def _bound(text: str) -> float | None:
    try:
        return float(text)  # "+Inf" too
    except ValueError:
        return None


def bucket_quantile(buckets: Buckets, q: float) -> tuple[float, bool] | None:
    """The q-quantile of cumulative `buckets` by linear interpolation inside the bucket it
    lands in (as PromQL's histogram_quantile), and whether it is saturated (lands past the
    last finite bound); None without observations."""
    if not buckets or not math.isinf(buckets[-1][0]):
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower, True
            if count == below:
                return bound, False
            return lower + (bound - lower) * (rank - below) / (count - below), False
        lower, below = bound, count
    return lower, True


def phase_figures(buckets: Buckets, seconds: float | None) -> dict[str, Any] | None:
    """A phase's figures in one span: count, mean, p50/p90/p99 (seconds), the percentiles
    read as the mean because they were saturated, and the last finite bound."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    count = buckets[-1][1]
    mean = seconds / count if seconds is not None else None
    out: dict[str, Any] = {"count": count, "mean": mean, "saturated": []}
    for name, q in QUANTILES.items():
        found = bucket_quantile(buckets, q)
        if found is None:
            continue
        value, saturated = found
        if saturated:
            out["saturated"].append(name)
            value = mean if mean is not None else value  # the mean says more than a bound
        out[name] = value
    finite = [b for b, _ in buckets if not math.isinf(b)]
    out["last_bound"] = finite[-1] if finite else None
    out["buckets"] = [[_le(b), c] for b, c in buckets]
    return out


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


def _cumulative(points: Iterable[tuple[float, float]]) -> Buckets:
    """Sorted by bound; never decreasing (Prometheus' increase() extrapolates each bucket on
    its own, so a wider bucket can come out a hair below a narrower one)."""
    out: Buckets = []
    for bound, count in sorted(points):
        out.append((bound, max(count, out[-1][1] if out else 0.0)))
    return out


@dataclass(frozen=True)
class Asked:
    """The store's series and the queries the run asked by name (the preset's, or a user's
    query of the same name in its place)."""

    series: Mapping[str, Series]
    queries: Mapping[str, str]

    def answers(self, name: str, start: float, end: float) -> list[tuple[dict[str, str], float]]:
        query = self.queries.get(name)
        return _answers(self.series, query, start, end) if query else []


def _answers(
    series: Mapping[str, Series], query: str, start: float, end: float
) -> list[tuple[dict[str, str], float]]:
    """Each series of `query` (not their sum) with its answer for the window."""
    out = []
    for s in series.values():
        if s.metric == query and not s.aggregate and (found := s.answer(start, end)) is not None:
            out.append((s.labels, float(found)))
    return out


def _phase_rows(phase: Phase, asked: Asked, start: float, end: float) -> dict[str, dict[str, Any]]:
    """{row name: (its `by` label value, buckets, seconds)} for one phase in one window."""
    rows: dict[str, dict[str, Any]] = {}
    for labels, value in asked.answers(phase.bucket_key, start, end):
        bound = _bound(labels.get("le", ""))
        if bound is None:
            continue
        key = {phase.by: labels.get(phase.by, "")} if phase.by else {}
        row = rows.setdefault(series_name(phase.name, key), {"labels": key, "points": []})
        row["points"].append((bound, value))
    for labels, value in asked.answers(phase.sum_key, start, end):
        key = {phase.by: labels.get(phase.by, "")} if phase.by else {}
        if (name := series_name(phase.name, key)) in rows:
            rows[name]["seconds"] = value
    return rows


def time_to_wake(window: Window) -> dict[str, float] | None:
    """The client's TimeToWake over a window (seconds, from the intended time): successful
    wakes, failed ones, and the successful ones' p50/p90/p99 and mean."""
    stats = window.rows.get(TIME_TO_WAKE_ROW)
    if stats is None or not stats.count:
        return None
    ok = stats.response.subtract(stats.failed_response)
    out: dict[str, float] = {"wakes": stats.count - stats.failures, "failed": stats.failures}
    if ok.count:
        out.update({k: ok.quantile(q) / 1000.0 for k, q in QUANTILES.items()})
        out["mean"] = ok.mean() / 1000.0
    return out


def reconcile(server_records: float | None, client_wakes: float | None) -> dict[str, Any] | None:
    """The server's successful resume records against the client's successful wakes: fewer
    records than wakes means the server's telemetry lost some (the upstream runner's check)."""
    if server_records is None or client_wakes is None:
        return None
    records, wakes = round(server_records), round(client_wakes)
    missing = wakes - records
    out: dict[str, Any] = {"server_resumes": records, "client_wakes": wakes, "missing": missing}
    if missing > 0:
        out["missing_share"] = missing / wakes
        out["said"] = (
            f"server saw {records} resumes, client {wakes} wakes: "
            f"{missing / wakes:.0%} of wakes missing from the server's telemetry"
        )
    elif missing < 0:
        out["said"] = (
            f"server saw {records} resumes, client {wakes} wakes: {-missing} more resumes "
            "than wakes the client waited for (retries, other clients, explicit resumes)"
        )
    else:
        out["said"] = f"server saw {records} resumes, client {wakes} wakes: every wake recorded"
    return out


def _counts(asked: Asked, start: float, end: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in COUNTS:
        found = asked.answers(name, start, end)
        if found:
            parts = {series_name(name, labels): v for labels, v in found}
            out[name] = {"total": sum(parts.values()), "by": parts}
    return out


def window_split(
    asked: Asked, start: float, end: float, client: dict[str, float] | None
) -> dict[str, Any] | None:
    """The wake split of one window (None when the preset's queries answered nothing)."""
    phases: list[dict[str, Any]] = []
    for phase in PHASES:
        for name, row in sorted(_phase_rows(phase, asked, start, end).items()):
            figures = phase_figures(_cumulative(row["points"]), row.get("seconds"))
            if figures is not None:
                phases.append(_phase_entry(phase, name, row["labels"], figures))
    counts = _counts(asked, start, end)
    if not phases and not counts:
        return None
    return _split(phases, counts, client)


def _phase_entry(
    phase: Phase, name: str, labels: dict[str, str], figures: dict[str, Any]
) -> dict[str, Any]:
    return {"row": name, "phase": phase.name, "within": phase.within, "labels": labels, **figures}


def _split(
    phases: list[dict[str, Any]], counts: dict[str, Any], client: dict[str, float] | None
) -> dict[str, Any]:
    records = next((p["count"] for p in phases if p["row"] == RECORDS_PHASE), None)
    if records is None and counts:
        records = 0.0  # the platform answered but recorded no successful resume
    out: dict[str, Any] = {"phases": phases, "counts": counts, "client": client}
    checkpoint = next((p for p in phases if p["row"] == "checkpoint"), None)
    written = counts.get("snapshot_bytes", {}).get("total")
    if checkpoint and checkpoint.get("mean") and written is not None:
        # Δ size sum / Δ checkpoint seconds: the guide's checkpoint throughput.
        out["checkpoint_bytes_per_second"] = written / (checkpoint["mean"] * checkpoint["count"])
    out["reconciliation"] = reconcile(records, (client or {}).get("wakes"))
    # What the phases leave unexplained (measure/wake_unattributed.py); absent without the
    # client's wakes or a wake phase.
    if (rest := unattributed(phases, client, bucket_quantile)) is not None:
        out["unattributed"] = rest
    return out


def merged_split(
    splits: Sequence[dict[str, Any] | None], client: dict[str, float] | None
) -> dict[str, Any] | None:
    """The split over several windows that tile a span (the steady window): bucket counts,
    seconds and counts add up, percentiles are computed afresh; `client` is the client's
    TimeToWake over the same span."""
    found = [s for s in splits if s]
    if not found:
        return None
    rows: dict[str, dict[str, Any]] = {}
    for split in found:
        for p in split["phases"]:
            row = rows.setdefault(p["row"], {"entry": p, "points": {}, "seconds": 0.0})
            for le, count in p["buckets"]:
                bound = float(le)
                row["points"][bound] = row["points"].get(bound, 0.0) + count
            if row["seconds"] is not None and p.get("mean") is not None:
                row["seconds"] += p["mean"] * p["count"]
            else:
                row["seconds"] = None
    phases = []
    for row in rows.values():
        figures = phase_figures(_cumulative(row["points"].items()), row["seconds"])
        if figures is not None:
            entry = row["entry"]
            phases.append({k: entry[k] for k in ("row", "phase", "within", "labels")} | figures)
    order = {p.name: i for i, p in enumerate(PHASES)}
    phases.sort(key=lambda p: (order.get(p["phase"], len(order)), p["row"]))
    counts: dict[str, Any] = {}
    for split in found:
        for name, c in split["counts"].items():
            into = counts.setdefault(name, {"total": 0.0, "by": {}})
            into["total"] += c["total"]
            for k, v in c["by"].items():
                into["by"][k] = into["by"].get(k, 0.0) + v
    return _split(phases, counts, client)


def phase_rows_figures(split: dict[str, Any] | None) -> dict[str, dict[str, float]]:
    """The split's phases as server figures (`server.resume_p99`, docs/SPEC.md §6), and
    the unattributed part (`server.unattributed_mean`)."""
    out: dict[str, dict[str, float]] = {}
    for p in (split or {}).get("phases", []):
        found = {k: float(p[k]) for k in PHASE_FIGURES if p.get(k) is not None}
        out[p["row"]] = found | {"samples": 1.0}  # one answer: the window's increase
    return out | unattributed_figures((split or {}).get("unattributed"))


__all__ = [
    "QUANTILES",
    "Asked",
    "bucket_quantile",
    "merged_split",
    "phase_figures",
    "phase_rows_figures",
    "reconcile",
    "time_to_wake",
    "window_split",
]
