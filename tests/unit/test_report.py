"""report.html from a run directory's files: self-contained, every section, missing files."""

import json
import re

import numpy as np

from agentsession_core.judge.artifacts import windows_jsonl
from agentsession_core.judge.gate import gate_document
from agentsession_core.judge.thresholds import parse_thresholds
from agentsession_core.judge.verdict import judge_window
from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.output.report import latency_series, render_report, write_report
from agentsession_core.output.stats_files import HistoryWriter, render_jsonl

WALL0 = 1_700_000_000.0
MONO0 = 5 * NS_PER_S
MS = 1_000_000


def build_run(run_dir, seconds=20):
    clock = [MONO0]
    rec = Recorder(clock_ns=lambda: clock[0], wall_clock=lambda: WALL0)
    rng = np.random.default_rng(3)
    wake, touch = rec.row("rps", "TimeToWake"), rec.row("http", "WakeFirstTouch")
    gauges = []
    for s in range(seconds):
        for _ in range(4):
            done = MONO0 + s * NS_PER_S + int(rng.integers(1, NS_PER_S - 1))
            lat = int((100 + 20 * s) * MS * rng.uniform(0.8, 1.2))  # wakes slow down
            wake.ok(done - lat, done - lat, done)
            touch.ok(done - lat // 2, done - lat // 2, done)
        for state, n in (("awake", 4), ("parked", 8 - s % 3), ("waking", s % 3)):
            gauges.append(
                {
                    "t": WALL0 + s,
                    "name": "turnover_sessions",
                    "labels": {"state": state},
                    "value": n,
                }
            )
    clock[0] = MONO0 + (seconds + 1) * NS_PER_S
    rec.flush()
    (run_dir / "stats_history.csv").write_text(HistoryWriter().render_closed(rec, 8))
    rules = parse_thresholds(["TimeToWake: p99 < 2s", "TimeToWake: p50 < 300ms"])
    half = seconds // 2
    verdicts = [
        judge_window(
            rec.window(MONO0 + a * NS_PER_S, MONO0 + b * NS_PER_S),
            rules,
            index=i,
            level=1.0,
            target=2.0,
        )
        for i, (a, b) in enumerate(((0, half), (half, seconds)))
    ]
    (run_dir / "windows.jsonl").write_text(windows_jsonl(verdicts))
    (run_dir / "gauges.jsonl").write_text(render_jsonl(gauges))
    doc = gate_document(verdicts, abort_reason=None, run_status="completed")
    (run_dir / "gate.json").write_text(json.dumps(doc))
    (run_dir / "status.json").write_text(json.dumps({"status": "completed", "phase": "hold"}))
    (run_dir / "campaign.json").write_text(
        json.dumps(
            {
                "params": {"name": "demo<x>", "tag": "t", "population": {"kind": "turnover"}},
                "script": "smoke",
                "started_unix": WALL0,
            }
        )
    )
    return verdicts, doc


def test_report_has_every_section_and_no_external_assets(tmp_path):
    verdicts, doc = build_run(tmp_path)
    assert [v.outcome for v in verdicts] == ["pass", "break"]
    page = render_report(tmp_path)
    assert page.startswith("<!DOCTYPE html>")
    assert "FAIL" in page and doc["reason"].split(";")[0] in page
    # latency over time: three charts with p50/p90/p99 lines, windows shaded
    assert page.count("<svg") == 4
    assert page.count("<polyline") == 3 * 3 + 3  # 3 latency charts x 3 lines + 3 gauge states
    assert "turnover gauge" in page and "parked" in page
    # chart titles name the rows as stats.jsonl does
    assert "rps_TimeToWake: latency from the intended time" in page
    assert "http_WakeFirstTouch: latency from the intended time" in page
    # per-window table
    assert re.search(r"<td>0</td><td>1\.00</td><td[^>]*>pass</td>", page)
    assert re.search(r"<td>1</td><td>1\.00</td><td[^>]*>break</td>", page)
    assert "TimeToWake: p50 &lt; 300ms" in page
    assert "drift" in page.lower() and "TimeToWake.p99" in page
    # self-contained and escaped
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)=["']?https?:""", page)
    assert "demo&lt;x&gt;" in page and "demo<x>" not in page
    assert "population turnover" in page


def test_latency_series_skips_empty_seconds():
    text = (
        "Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,"
        "99%,99.9%,99.99%,100%\n"
        "10,1,rps,TimeToWake,1,0,5,5,5,5,6,6,6,7,7,7,7\n"
        "11,1,rps,TimeToWake,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A\n"
        "11,1,http,Step_x,1,0,1,1,1,1,1,1,1,1,1,1,1\n"
    )
    series = latency_series(text)
    assert series == {
        "TimeToWake": {"p50": [(10.0, 5.0)], "p90": [(10.0, 6.0)], "p99": [(10.0, 7.0)]}
    }


def test_missing_and_torn_files_leave_a_readable_page(tmp_path):
    page = render_report(tmp_path)
    assert "VOID" in page and "not judged" in page and "no data" in page
    (tmp_path / "windows.jsonl").write_text('{"index": 0, "outcome": "pass"}\n{"torn')
    (tmp_path / "gate.json").write_text("{not json")
    page = render_report(tmp_path)
    assert "<table>" in page


def test_write_report_writes_the_file(tmp_path):
    build_run(tmp_path)
    path = write_report(tmp_path)
    assert path == tmp_path / "report.html"
    assert path.read_text() == render_report(tmp_path)
    assert not list(tmp_path.glob(".report*"))
