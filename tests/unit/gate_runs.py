"""Synthetic runs for the gate's unit tests: per-second histograms drawn from a seeded stream,
turned into figures by the gate's own code (judge/uncertainty.py) and laid out as a campaign
lays out a run (gate.json, hold_seconds.jsonl, campaign.json, status.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from agentsession_core.judge.conditions import conditions
from agentsession_core.judge.gate import gate_document
from agentsession_core.judge.hold_seconds import HOLD_SECONDS_FILE, HoldSeconds, render
from agentsession_core.judge.uncertainty import figures
from agentsession_core.judge.verdict import WindowVerdict
from agentsession_core.measure.histogram import LogHistogram
from agentsession_core.output.run_dir import RunDir

PARAMS: dict[str, Any] = {
    "name": "nightly",
    "script": "smoke",
    "think_scale": 0.05,
    "levels": [1.0],
    "window_seconds": 30,
    "max_regression": 0.2,
    "population": {
        "kind": "turnover",
        "sessions": 12,
        "awake": 4,
        "target_rps": 2,
        "resume_mode": "implicit",
        "lifecycle_mode": "suspend",
    },
    "target": {"protocol": "ate", "template": "benchmark-workloads/glutton"},
}


def seconds(
    *,
    p50_ms: float,
    seconds: int = 300,
    per_second: int = 4,
    seed: int = 1,
    sigma: float = 0.4,
    failures: float = 0.0,
) -> list[dict[str, Any]]:
    """hold_seconds.jsonl records: lognormal wakes around p50_ms, `per_second` a second."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(seconds):
        hist = LogHistogram()
        hist.add_many(rng.lognormal(np.log(p50_ms), sigma, size=per_second))
        failed = int(rng.random() < failures)
        out.append(
            {
                "t": 1_000 + t,
                "window": t // 30,
                "sections": {"TimeToWake": {**hist.to_dict(), "failures": 0}},
                "requests": per_second,
                "request_failures": failed,
                "achieved": per_second,
            }
        )
    return out


def window(index: int, outcome: str = "pass") -> WindowVerdict:
    return WindowVerdict(
        index=index,
        level=1.0,
        start_unix=1_000.0 + 30 * index,
        end_unix=1_030.0 + 30 * index,
        outcome=outcome,
        results=[],
        headline={},
        void_reason="generator saturated 2 s" if outcome == "void" else None,
    )


def gate_of(
    records: list[dict[str, Any]], *, outcomes: tuple[str, ...] = ("pass",), **params: Any
) -> dict[str, Any]:
    merged = {**PARAMS, **params}
    return gate_document(
        [window(i, o) for i, o in enumerate(outcomes)],
        abort_reason=None,
        run_status="completed",
        run={"name": merged["name"]},
        figures=figures(HoldSeconds.of_records(records), seed=7),
        conditions=conditions(merged),
    )


def write_run(
    root: Path,
    run_ts: int,
    records: list[dict[str, Any]],
    *,
    outcomes: tuple[str, ...] = ("pass",),
    tag: str = "night",
    **params: Any,
) -> Path:
    """A run directory in the campaign layout under `root`."""
    merged = {**PARAMS, **params}
    path = root / "runs" / merged["name"] / "run_date=2026-12-01" / f"run_ts={run_ts}"
    path = path / f"run_tag={tag}"
    path.mkdir(parents=True)
    gate = gate_of(records, outcomes=outcomes, **params)
    (path / "gate.json").write_text(json.dumps(gate))
    (path / HOLD_SECONDS_FILE).write_text(render(records))
    (path / "campaign.json").write_text(json.dumps({"params": merged}))
    (path / "status.json").write_text(json.dumps({"status": "completed"}))
    RunDir(path).write_manifest()  # sealed, as a finished run is (a gate believes no other)
    return path
