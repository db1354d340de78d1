"""Every Run writes report.html from its own files, before the manifest seals the run, and
stats_history.jsonl beside stats_history.csv."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.report.page import render_report
from agentsession_core.run.run import Run
from tests.unit.test_run_seams import ClosingSubstrate, _drive, small_turnover


def test_a_plain_run_writes_its_report_before_the_manifest(tmp_path: Path) -> None:
    params = small_turnover(tmp_path)
    run = Run(params, substrate=ClosingSubstrate(), handle_signals=False)
    asyncio.run(_drive(run))
    assert run.result is not None and run.result.status == "completed"
    run_dir = run.result.run_dir
    manifest = json.loads((run_dir / "manifest.json").read_text())
    listed = {entry["path"] for entry in manifest["files"]}
    assert {"report.html", "stats_history.csv", "stats_history.jsonl"} <= listed
    assert verify_manifest(run_dir) == []
    page = (run_dir / "report.html").read_text()
    assert "NOT JUDGED" in page and 'id="throughput"' in page and "<path d=" in page
    # rebuilt from the files alone, the page is the same
    assert render_report(run_dir) == page
    seconds = [
        json.loads(line) for line in (run_dir / "stats_history.jsonl").read_text().splitlines()
    ]
    assert any(r["name"] == "TimeToWake" and "start_lag" in r for r in seconds)
    assert any(r["type"] == "generator" and "response" in r for r in seconds)
