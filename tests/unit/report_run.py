"""A synthetic judged run directory for the report's tests: every file a campaign writes,
from a recorder fed on a fake clock, with a pass, a break and a void window, a level change,
failures with codes, generator rows above their limits in the void window and the gauges;
and server_summary.json from a real ServerMetricsStore fed the local substrate's /metrics
text every 2 s (tests/unit/report_server_run.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentsession_core.judge.artifacts import windows_jsonl
from agentsession_core.judge.conditions import conditions
from agentsession_core.judge.gate import gate_document
from agentsession_core.judge.hold_seconds import (
    HOLD_SECONDS_FILE,
    HoldSeconds,
    render,
    second_records,
)
from agentsession_core.judge.thresholds import parse_thresholds
from agentsession_core.judge.uncertainty import figures
from agentsession_core.judge.verdict import WindowVerdict, judge_window
from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.output.stats_files import HistoryWriter, render_jsonl, render_stats_jsonl
from tests.unit.report_server_run import server_metrics

WALL0 = 1_700_000_000.0
MONO0 = 5 * NS_PER_S
MS = 1_000_000
THRESHOLDS = ["TimeToWake: p99 < 2s", "TimeToWake: p50 < 300ms", "achieved_rps >= 0.5 * target"]
CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED")


def _params(name: str, thresholds: Sequence[str]) -> dict[str, Any]:
    return {
        "name": name,
        "tag": "t",
        "script": "smoke",
        "seed": 7,
        "population": {"kind": "turnover", "sessions": 8, "awake": 4, "target_rps": 4.0},
        "levels": [1.0, 1.5],
        "thresholds": list(thresholds),
        "abort": {"rules": ["Step_*: failure_ratio < 0.5 (min 20)"], "sliding_seconds": 10},
        "max_regression": 0.2,
        "target": {"token": "***", "local_workers": 4},
    }


def _book(rec: Recorder, rng: np.random.Generator, s: int, slow: float) -> None:
    wake, touch = rec.row("rps", "TimeToWake"), rec.row("http", "WakeFirstTouch")
    steps = [rec.row("http", "Step_01_read"), rec.row("http", "Step_02_build")]
    base = MONO0 + s * NS_PER_S
    for i in range(4):
        done = base + int(rng.integers(1, NS_PER_S - 1))
        lat = int((100 + 20 * s) * slow * MS * rng.uniform(0.8, 1.2))  # wakes slow down
        wake.ok(done - lat, done - lat + 2 * MS, done)
        touch.ok(done - lat // 2, done - lat // 2, done)
        step = steps[i % 2]
        if s % 5 == 4 and i < 2:
            step.fail(done - 30 * MS, done - 29 * MS, done, CODES[s % 2])
        else:
            step.ok(done - (20 + 10 * i) * MS, done - (19 + 10 * i) * MS, done)
    rec.row("grpc", "SuspendActor").ok(base, base + MS, base + 9 * MS)
    lag = 80 if slow > 1 else 2  # the generator saturates in the last window
    for k in range(20):
        t = base + k * 40 * MS
        rec.row("generator", "LoopLag").ok(t, t + lag * MS, t + lag * MS)
    rec.row("generator", "DispatchLag").ok(base, base + MS, base + MS)
    if s % 7 == 6:
        rec.row("turnover", "Backlog").event(base + MS)


def build_run(
    run_dir: Path,
    seconds: int = 30,
    *,
    name: str = "demo<x>",
    slow: float = 1.0,
    thresholds: Sequence[str] = THRESHOLDS,
    server: bool = True,
) -> tuple[list[WindowVerdict], dict[str, Any]]:
    """Write a judged run into `run_dir`: windows pass, break, void (at 1.5x); `slow` also
    scales the substrate's snapshot traffic; `server=False` writes no server_summary.json."""
    run_dir.mkdir(parents=True, exist_ok=True)
    clock = [MONO0]
    rec = Recorder(clock_ns=lambda: clock[0], wall_clock=lambda: WALL0)
    rng = np.random.default_rng(3)
    gauges = []
    third = seconds // 3
    for s in range(seconds):
        _book(rec, rng, s, slow * (3.0 if s >= 2 * third else 1.0))
        for state, n in (("awake", 4), ("parked", 4 - s % 2), ("waking", s % 2)):
            gauge = {"name": "turnover_sessions", "labels": {"state": state}, "value": n}
            gauges.append({"t": WALL0 + s, **gauge})
        gauges.append({"t": WALL0 + s, "name": "cpu_percent", "labels": {}, "value": 20 + s})
        gauges.append({"t": WALL0 + s, "name": "sessions", "labels": {"state": "idle"}, "value": 8})
    clock[0] = MONO0 + (seconds + 1) * NS_PER_S
    rec.flush()
    for file, text in HistoryWriter().render_closed_files(rec, 8).items():
        (run_dir / file).write_text(text)
    rules = parse_thresholds(thresholds)
    spans = ((0, third, 1.0, None), (third, 2 * third, 1.0, None))
    spans += ((2 * third, seconds, 1.5, "the load generator was saturated in 10 of 10 s"),)
    metrics = server_metrics(WALL0, seconds, [(a, b, level) for a, b, level, _ in spans], slow)
    verdicts = [
        judge_window(
            rec.window(MONO0 + a * NS_PER_S, MONO0 + b * NS_PER_S),
            rules,
            index=i,
            level=level,
            target=4.0 * level,
            void_reason=void,
            server=metrics.windows[i],
        )
        for i, (a, b, level, void) in enumerate(spans)
    ]
    if server:
        (run_dir / "server_summary.json").write_text(json.dumps(metrics.document()))
    whole = rec.window(MONO0, MONO0 + seconds * NS_PER_S)
    (run_dir / "stats.jsonl").write_text(render_stats_jsonl(whole, tag="t", test_name=name))
    (run_dir / "windows.jsonl").write_text(windows_jsonl(verdicts))
    (run_dir / "gauges.jsonl").write_text(render_jsonl(gauges))
    judged = [
        (i, MONO0 + a * NS_PER_S, MONO0 + b * NS_PER_S)
        for i, (a, b, level, void) in enumerate(spans)
        if level == 1.0 and void is None
    ]
    held = second_records(rec, judged)
    (run_dir / HOLD_SECONDS_FILE).write_text(render(held))
    doc = gate_document(
        verdicts,
        abort_reason=None,
        run_status="completed",
        run={"name": name},
        figures=figures(HoldSeconds.of_records(held), seed=7),
        conditions=conditions(_params(name, thresholds)),
    )
    (run_dir / "gate.json").write_text(json.dumps(doc))
    (run_dir / "status.json").write_text(
        json.dumps({"status": "completed", "phase": "done", "started_unix": WALL0})
    )
    campaign = {"params": _params(name, thresholds), "script": "smoke", "started_unix": WALL0}
    campaign["versions"] = {"agentsession": "test"}
    (run_dir / "campaign.json").write_text(json.dumps(campaign))
    (run_dir / "logs.txt").write_text("a log line\n")
    return verdicts, doc


__all__ = ["CODES", "THRESHOLDS", "WALL0", "build_run"]
