"""report.html's server-side figures (docs/SPEC.md §5.9, §7): the source and sampling, the
key figures per window and over the hold, `server.` rules drawn at the bound each window was
judged by, "no data" that says why, and the steady window beside a baseline's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.cli.report import compare_runs
from agentsession_core.judge.thresholds import parse_thresholds
from agentsession_core.report.context import ReportContext
from agentsession_core.report.page import read_run, render, render_report
from agentsession_core.report.server import step_points
from agentsession_core.report.server_data import fmt_bytes, fmt_delta, fmt_figure
from tests.unit.report_run import THRESHOLDS, WALL0, build_run
from tests.unit.report_server_run import MIB
from tests.unit.test_report import assert_self_contained

WRITTEN_RULE = "server.snapshot_bytes_written_rate < 2.5Mi"
WAKES_RULE = "server.wakes_rate >= 0.9 * target"
PARKED_RULE = "server.parked_requests_max <= 5"
MISSING_RULE = "server.worker_crashes_increase < 1"
SERVER_RULES = [WRITTEN_RULE, WAKES_RULE, PARKED_RULE, MISSING_RULE]


def server_section(page: str) -> str:
    start = page.index('<section id="server">')
    return page[start : page.index("</section>", start)]


def figure_rows(html: str) -> dict[str, list[str]]:
    """{figure name: the table's cells after the label}, tags stripped."""
    out = {}
    for name, cells in re.findall(
        r"<tr><td>[^<]*<br><code class=dim>server\.(\w+)</code>.*?</td>(.*?)</tr>", html
    ):
        out[name] = [
            re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", cells)
        ]
    return out


@pytest.fixture
def judged_run(tmp_path: Path) -> tuple[Path, str]:
    verdicts, _ = build_run(tmp_path, thresholds=THRESHOLDS + SERVER_RULES)
    assert [v.outcome for v in verdicts] == ["pass", "break", "void"]
    page = render_report(tmp_path, rules=parse_thresholds(THRESHOLDS + SERVER_RULES))
    return tmp_path, page


def test_the_section_shows_the_source_the_sampling_and_the_key_figures(judged_run) -> None:
    run_dir, page = judged_run
    html = server_section(page)
    assert 'href="#server"' in page and "<h2>Server-side figures</h2>" in html
    assert "source <b>scrape</b>" in html and "http:&#47;&#47;127.0.0.1:18080/metrics" in html
    assert "every 2 s" in html and "<code>agentsession_substrate_*</code>" in html
    assert "sampling: <b>16</b> ok, <b>0</b> failed" in html  # 0, 2, ... 30 s
    head = re.findall(r"<th>(.*?)</th>", html)
    assert head == [
        "figure",
        "w0 @1.00× pass",
        "w1 @1.00× break",
        "w2 @1.50× void",
        "steady (the hold)",
    ]
    rows = figure_rows(html)
    # The substrate's behaviour (tests/unit/report_server_run.py), per window and the hold.
    assert rows["workers_rss_bytes_max"] == ["110 MiB", "120 MiB", "130 MiB", "130 MiB"]
    assert rows["snapshot_bytes_written_rate"] == ["2 MiB/s ✓", "3 MiB/s ✗", "4 MiB/s ✗", "3 MiB/s"]
    assert rows["snapshot_bytes_read_rate"] == ["1 MiB/s"] * 4
    assert rows["wakes_rate"] == ["4/s ✓", "4/s ✓", "4/s ✗", "4/s"]  # 5.4/s asked at 1.5x
    assert rows["parked_requests_max"] == ["3 ✓"] * 3 + ["3"]
    assert rows["wake_queue_max"] == ["1"] * 4
    assert rows["actors_running_mean"] == ["4"] * 4
    assert rows["actors_resuming_mean"] == ["0.5"] * 4
    assert "actors_crashed_mean" not in rows  # a state no actor was in is left out
    # A rule's figure the substrate does not have is shown, and so is why it was not judged.
    assert rows["worker_crashes_increase"] == ["– not judged"] * 3 + ["–"]
    assert "judged: <code>server.snapshot_bytes_written_rate &lt; 2.5Mi</code>" in html
    assert re.search(r"<td>samples in the span</td><td>6</td><td>6</td><td>6</td><td>16</td>", html)
    # The window that missed its rule is coloured as the thresholds matrix colours a miss.
    assert '<td style="background:#ffcdd2">3 MiB/s ✗</td>' in html
    assert '<td style="background:#eeeeee">4 MiB/s ✗</td>' in html  # void: decided nothing
    assert_self_contained(page)
    summary = json.loads((run_dir / "server_summary.json").read_text())
    assert summary["steady"]["figures"]["snapshot_bytes_written"]["rate"] == pytest.approx(3 * MIB)


def test_server_rules_are_drawn_at_the_bound_each_window_was_judged_by(judged_run) -> None:
    _, page = judged_run
    html = server_section(page)
    # snapshot traffic in MiB/s, its rule on each window at 2.5 MiB/s
    assert "snapshot traffic<tspan" in html and "MiB/s, window rate" in html
    assert html.count(">&lt; 2.5 MiB/s</text>") == 3
    # `* target`: 0.9 x target_rps x level, as windows.jsonl says the judge used it
    assert html.count(">&gt;= 3.6/s</text>") == 2 and html.count(">&gt;= 5.4/s</text>") == 1
    # a rule on a gauge's max adds that figure, dashed, to the chart of the gauge's mean
    assert 'class="lg">parked_requests max</text>' in html
    assert re.search(
        r'stroke-dasharray="6 3"/><text x="\d+" y="\d+" class="lg">parked_requests max', html
    )
    # a rule on a family's sum joins the chart of its members: `wakes` beside `wakes_router`
    wakes = html[html.index('aria-label="wakes, suspends and pauses"') :]
    wakes = wakes[: wakes.index("</svg>")]
    assert 'class="lg">wakes</text>' in wakes and ">&gt;= 5.4/s</text>" in wakes
    assert 'aria-label="server.wakes_rate"' not in html
    # a rule on a figure the summary lacks gets a chart of its own that says so
    assert "server.worker_crashes_increase" in html
    assert "no data: no such figure in server_summary.json" in html
    # the failures section no longer lists them as rules no chart draws
    failures = page[page.index('<section id="failures">') : page.index('<section id="latency">')]
    assert "server." not in failures


def test_each_window_is_a_step_on_the_shared_time_axis(judged_run) -> None:
    run_dir, _ = judged_run
    data = read_run(run_dir)
    ctx = ReportContext.of(data)
    windows = data.server["windows"] if data.server else []
    points = step_points(ctx, windows, "snapshot_bytes_written", "rate")
    expected = [(WALL0 + s, (2 + s // 10) * MIB) for s in range(30)] + [(WALL0 + 30, 4 * MIB)]
    assert [t for t, _ in points] == [t for t, _ in expected]
    assert [v for _, v in points] == pytest.approx([v for _, v in expected])


def _doc(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "agentsession.server_summary/1",
        "source": {"kind": "scrape", "interval_seconds": 2.0, "url": "http://127.0.0.1:9/metrics"},
        "sampling": {"ok": 3, "failed": 0, "last_error": None},
        "series": {},
        "windows": [],
        "steady": None,
    }
    doc.update(overrides)
    return doc


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "no data: this run wrote no server_summary.json: it had no server-side source"),
        ("{torn", "no data: server_summary.json could not be read"),
        (
            _doc(
                sampling={
                    "ok": 0,
                    "failed": 5,
                    "last_error": "GET http://127.0.0.1:9/metrics: connection refused",
                }
            ),
            "no data: every sample failed; the last error: GET http:&#47;&#47;127.0.0.1:9/metrics: "
            "connection refused",
        ),
        (_doc(), "no data: no window was cut (the run ended before its hold)"),
        (
            _doc(
                windows=[{"index": 0, "start_unix": WALL0, "end_unix": WALL0 + 10, "figures": {}}],
                steady={"start_unix": WALL0, "end_unix": WALL0 + 10, "figures": {}},
            ),
            "no data: no sample fell inside any window",
        ),
    ],
    ids=["no-file", "torn", "sampling-failed", "no-windows", "no-samples"],
)
def test_no_data_says_why(tmp_path: Path, content: Any, says: str) -> None:
    build_run(tmp_path, server=False)
    if content is not None:
        text = content if isinstance(content, str) else json.dumps(content)
        (tmp_path / "server_summary.json").write_text(text)
    page = render_report(tmp_path)
    html = server_section(page)
    assert says in html
    assert "<table" not in html and "<svg" not in html
    assert_self_contained(page)
    if isinstance(content, dict):  # what was sampled is still said
        assert "source <b>scrape</b>" in html


def test_the_summary_is_linked_among_the_artifacts(judged_run) -> None:
    _, page = judged_run
    assert (
        '<a href="server_summary.json">server_summary.json</a> <span class="dim">'
        "the substrate&#x27;s own figures per window and over the hold</span>"
    ) in page


def test_a_baseline_shows_the_steady_windows_figures_side_by_side(tmp_path: Path) -> None:
    current, baseline = tmp_path / "current", tmp_path / "baseline"
    build_run(current, name="current", slow=1.6)  # 60 % more snapshot traffic
    build_run(baseline, name="baseline")
    this, base = read_run(current), read_run(baseline)
    html = render(this, comparison=compare_runs(this, base, None))
    start = html.index("Server-side figures over the steady window")
    rows = figure_rows(html[start : html.index("</table>", start)])
    assert rows["snapshot_bytes_written_rate"] == ["3 MiB/s", "4.8 MiB/s", "+60%"]
    assert rows["snapshot_bytes_read_rate"] == ["1 MiB/s", "1 MiB/s", "+0%"]
    assert rows["workers_rss_bytes_max"] == ["130 MiB", "130 MiB", "+0%"]
    # Only one run with figures: nothing to compare, and the page says which has them.
    (baseline / "server_summary.json").unlink()
    base = read_run(baseline)
    html = render(this, comparison=compare_runs(this, base, None))
    assert "no comparison: only this run has server_summary.json" in html
    (current / "server_summary.json").unlink()
    this = read_run(current)
    html = render(this, comparison=compare_runs(this, base, None))
    assert "Server-side figures over the steady window" not in html


def test_figures_are_written_in_human_units() -> None:
    assert fmt_bytes(512) == "512 B" and fmt_bytes(1536) == "1.5 KiB"
    assert fmt_bytes(3 * 1024**3) == "3 GiB"
    assert fmt_figure("snapshot_bytes_read", "rate", 200 * MIB) == "200 MiB/s"
    assert fmt_figure("wakes", "increase", 1234.0) == "1,234"
    assert fmt_figure("wakes", "samples", 7.0) == "7" and fmt_figure("wakes", "rate", None) == "–"
    assert fmt_delta("wakes", "rate", 4.0, 3.0) == "-25%"
    assert fmt_delta("snapshot_bytes_read", "rate", 0.0, 2 * MIB) == "+2 MiB/s"
    assert fmt_delta("wakes", "rate", None, 3.0) == "–"


def test_a_prometheus_sources_queries_get_rows_and_charts(tmp_path: Path) -> None:
    build_run(tmp_path, server=False)
    figures = {"start": 1.0, "end": 3.0, "min": 1.0, "max": 3.0, "mean": 2.5, "samples": 5}
    span = {"start_unix": WALL0, "end_unix": WALL0 + 30, "samples": 5, "figures": {"cpu": figures}}
    source = {
        "kind": "prometheus",
        "interval_seconds": 2.0,
        "prometheus_url": "http://127.0.0.1:9090",
        "queries": {"cpu": "sum(rate(process_cpu_seconds_total[1m]))"},
    }
    doc = _doc(source=source, windows=[{"index": 0, "level": 1.0, **span}], steady=span)
    (tmp_path / "server_summary.json").write_text(json.dumps(doc))
    html = server_section(render_report(tmp_path))
    assert "Prometheus <code>http:&#47;&#47;127.0.0.1:9090</code>" in html
    assert "<code>cpu = sum(rate(process_cpu_seconds_total[1m]))</code>" in html
    assert figure_rows(html)["cpu_mean"] == ["2.5", "2.5"]
    assert 'aria-label="query cpu"' in html and 'class="lg">cpu</text>' in html
