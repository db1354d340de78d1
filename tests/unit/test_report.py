"""report.html from a run's files: every section, thresholds and limits drawn, the rule that
decided each window, "no data" where a chart is empty, self-contained, rebuilt from files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentsession_core.judge.thresholds import parse_thresholds
from agentsession_core.output.run_reader import RunReadError
from agentsession_core.output.stored_files import StoredFiles
from agentsession_core.report.data import load_run_data
from agentsession_core.report.page import render, render_report, write_report
from tests.unit.report_run import CODES, THRESHOLDS, build_run

SECTIONS = (
    "windows",
    "figures",
    "throughput",
    "failures",
    "latency",
    "steps",
    "health",
    "gauge",
    "server",
    "drift",
    "rows",
    "params",
    "files",
)
EXTERNAL = re.compile(r"""https?://|(?:src|href)\s*=\s*["']?\s*//|url\(""", re.IGNORECASE)


def assert_self_contained(page: str) -> None:
    assert "<script" not in page.lower()
    assert not EXTERNAL.search(page), EXTERNAL.search(page)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?[a-z][a-z0-9+.-]*:""", page, re.I)


def test_every_section_is_there_and_the_page_is_self_contained(tmp_path: Path) -> None:
    verdicts, doc = build_run(tmp_path)
    assert [v.outcome for v in verdicts] == ["pass", "break", "void"]
    page = render_report(tmp_path, rules=parse_thresholds(THRESHOLDS))
    assert page.startswith("<!DOCTYPE html>")
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in page and f'href="#{anchor}"' in page
    assert 'id="baseline"' not in page  # no baseline, none stored in gate.json
    assert "FAIL" in page and doc["reason"].split(";")[0] in page
    assert_self_contained(page)
    assert "demo&lt;x&gt;" in page and "demo<x>" not in page


def test_the_headline_figures_show_their_interval_and_what_cannot_be_judged(tmp_path):
    _, doc = build_run(tmp_path)
    page = render_report(tmp_path)
    figures = page.split('<section id="figures">', 1)[1].split("</section>", 1)[0]
    p50, p99 = doc["figures"]["TimeToWake.p50"], doc["figures"]["TimeToWake.p99"]
    assert p50["estimable"] and not p99["estimable"]
    row = figures.split("<td>TimeToWake.p50</td>", 1)[1].split("</tr>", 1)[0]
    assert " … " in row and f"<td>{p50['n']}</td>" in row and "<td>yes</td>" in row
    row = figures.split("<td>TimeToWake.p99</td>", 1)[1].split("</tr>", 1)[0]
    assert "inconclusive: &lt; 10 samples beyond it" in row
    (tmp_path / "gate.json").write_text('{"schema": 1, "verdict": "pass", "windows": []}')
    assert "no data: gate.json schema 1 has no intervals" in render_report(tmp_path)


def test_the_charts_carry_thresholds_limits_levels_and_distinct_percentiles(tmp_path):
    build_run(tmp_path)
    page = render_report(tmp_path, rules=parse_thresholds(THRESHOLDS))
    # thresholds from campaign.json on the charts they judge, the target per level
    assert "TimeToWake: p50 &lt; 300ms" in page and "&lt; 300 ms" in page
    assert "achieved_rps &gt;= 0.5 * target" in page
    assert "&gt;= 2" in page and "&gt;= 3" in page  # 0.5 x 4/s at 1x, 0.5 x 6/s at 1.5x
    assert "target 4/s" in page and "target 6/s" in page
    assert "hold 1×" in page and "1.5×" in page  # the level change is marked
    # generator health with the void limits of measure/health.py, turnover gauge with awake
    assert "void limit: p99 &gt; 50 ms" in page and "void limit: cpu &gt; 90 %" in page
    assert "awake = 4" in page
    # p50 / p90 / p99: three colours, p90 dashed, each in a legend
    p90_path = 'stroke="#ef6c00" stroke-width="2" stroke-linejoin="round" stroke-dasharray'
    assert page.count(p90_path) > 3
    for key in ("p50", "p90", "p99"):
        assert f'class="lg">{key}</text>' in page
    # failures by code, per-step charts, service time and start lag beside latency
    for code in CODES:
        assert f'class="lg">{code}</text>' in page
    assert "http_Step_01_read" in page and "http_Step_02_build" in page
    assert "service time (from send)" in page and "start lag (intended → send)" in page
    assert "no data: this run has no stats_history.jsonl" not in page


def test_a_closed_runs_achieved_rule_is_drawn_at_the_bound_each_window_was_judged_by(
    tmp_path: Path,
) -> None:
    """Outside turnover `* target` is the steps the load model put due (docs/SPEC.md §6), not
    a population field: the report draws the bound windows.jsonl says the judge used."""
    build_run(tmp_path)
    campaign = json.loads((tmp_path / "campaign.json").read_text())
    campaign["params"]["population"] = {"kind": "closed", "sessions": 8}
    (tmp_path / "campaign.json").write_text(json.dumps(campaign))
    windows = [json.loads(line) for line in (tmp_path / "windows.jsonl").read_text().splitlines()]
    for w, due in zip(windows, (7.25, 9.5, 11.75), strict=True):
        for result in w["thresholds"]:
            if result["threshold"].startswith("achieved_rps"):
                result["bound"] = 0.5 * due
    (tmp_path / "windows.jsonl").write_text("".join(json.dumps(w) + "\n" for w in windows))
    page = render_report(tmp_path, rules=parse_thresholds(THRESHOLDS))
    for bound in ("3.62", "4.75", "5.88"):  # three significant digits
        assert f"&gt;= {bound}" in page
    assert "target 4/s" not in page  # no target_rps line: this is no turnover


def test_each_window_says_what_decided_it(tmp_path):
    build_run(tmp_path)
    page = render_report(tmp_path)
    rows = re.findall(r"<tr><td>(\d)</td>.*?</tr>", page)
    assert rows[:3] == ["0", "1", "2"]
    assert "all 3 judged rule(s) held" in page
    assert re.search(r"<b>TimeToWake: p50 &lt; 300ms</b> <span class=dim>missed:", page)
    assert "void: the load generator was saturated in 10 of 10 s" in page
    # the thresholds x windows matrix and the parameters table
    assert "w2 @1.50×" in page and "✗" in page
    assert "<code>Step_*: failure_ratio &lt; 0.5 (min 20)</code>" in page
    assert "abort (sliding window)" in page
    assert "<td>target_rps</td><td>4</td>" in page and "<td>token</td><td>***</td>" in page


def test_an_empty_run_says_no_data_everywhere(tmp_path):
    page = render_report(tmp_path)
    assert "NOT JUDGED" in page
    assert page.count("no data") >= 8
    assert_self_contained(page)
    (tmp_path / "windows.jsonl").write_text('{"index": 0, "outcome": "pass"}\n{"torn')
    (tmp_path / "stats_history.csv").write_text("Timestamp,Type,Name\nnot,a,row\n")
    page = render_report(tmp_path)
    assert "<table" in page and "all 0 judged rule(s) held" in page
    # gate.json is written whole (atomic_write), so a bad one is damage, refused as the
    # gate refuses it, never drawn as "not judged".
    (tmp_path / "gate.json").write_text("{not json")
    with pytest.raises(RunReadError, match=r"gate\.json: not valid JSON"):
        render_report(tmp_path)


def test_a_run_without_the_per_second_jsonl_still_draws_latency(tmp_path):
    build_run(tmp_path)
    (tmp_path / "stats_history.jsonl").unlink()
    page = render_report(tmp_path)
    assert "no data: this run has no stats_history.jsonl" in page
    assert "rps_TimeToWake" in page and "<path d=" in page


def test_artifact_links_are_relative_to_where_the_page_lives(tmp_path):
    run_dir = tmp_path / "runs" / "r"
    build_run(run_dir)
    assert 'href="stats_history.csv"' in render_report(run_dir)
    elsewhere = render_report(run_dir, out_dir=tmp_path / "out")
    assert 'href="../runs/r/stats_history.csv"' in elsewhere
    # an s3 run's files are named, not linked (a link would leave the page)
    data = load_run_data(StoredFiles(str(run_dir)))
    data.local_dir, data.location = None, "s3://bucket/runs/r"
    page = render(data)
    assert "<code>stats_history.csv</code>" in page and 'href="stats' not in page
    assert_self_contained(page)


def test_long_runs_are_reduced_to_bounded_charts(tmp_path):
    build_run(tmp_path, seconds=650)  # just past the 600 points a line may have
    page = render_report(tmp_path)
    assert "2 s buckets" in page  # 650 s in at most 600 points per line
    assert len(page) < 3_000_000


def test_write_report_writes_the_file_atomically(tmp_path):
    build_run(tmp_path)
    path = write_report(tmp_path)
    assert path == tmp_path / "report.html"
    assert path.read_text() == render_report(tmp_path)
    assert not list(tmp_path.glob(".report*"))


def test_urls_in_parameters_and_reasons_are_text_not_links(tmp_path):
    build_run(tmp_path)
    campaign = json.loads((tmp_path / "campaign.json").read_text())
    campaign["params"]["target"]["substrate"] = "http://127.0.0.1:8080"
    (tmp_path / "campaign.json").write_text(json.dumps(campaign))
    status = {"status": "failed", "abort_reason": "substrate https://sub.example stopped"}
    (tmp_path / "status.json").write_text(json.dumps(status))
    page = render_report(tmp_path)
    assert_self_contained(page)
    assert "http:&#47;&#47;127.0.0.1:8080" in page  # shown as http://127.0.0.1:8080
    assert "https:&#47;&#47;sub.example stopped" in page
