"""report.html of real campaigns, opened in a real browser, and `agentsession report` on local
and S3 runs.

Two short campaigns run once for the module against the embedded local substrate (a small
turnover population, two levels, a window each): the demo, and one with a break (an
unmeetable threshold) and a void window (the generator's saturation is forced for the second
window, so the test does not depend on how busy the box is). Headless Chromium screenshots
the demo's report, the break/void report and a baseline comparison; each page is checked for
its sections and for being self-contained, the demo's for the substrate's own figures
(server_summary.json). The command runs on a local run and on S3 runs (moto's server). A
third campaign's capacity search draws the knee: its local substrate (a process of its own)
refuses every wake above 2x, so where the knee lies does not depend on the machine. The
generator's void rule is off in these runs (generator.void_when_saturated): the pages are
drawn from judged windows however busy the box.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import CampaignResult, run_campaign_blocking
from agentsession_core.measure.health import GeneratorHealth
from agentsession_core.output.upload import s3_client, upload_run
from agentsession_core.report.svg_chart import esc
from agentsession_core.run.run import run_on_fresh_loop
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import ate_target
from tests.integration.test_capacity_search import refuse_above, tolerant
from tests.unit.test_report import SECTIONS, assert_self_contained
from tests.unit.test_report_server import figure_rows, server_section

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# One worker for the module (.ci/run: --dist loadfile): its fixtures run whole campaigns, once.
pytestmark = pytest.mark.timeout(300)
FORCED_VOID = "forced by the test: the load generator was saturated"
BUCKET = "report-runs"


def params(out: Path, name: str, **overrides: Any) -> CampaignParams:
    values: dict[str, Any] = {
        "name": name,
        "tag": "test",
        "seed": 7,
        "script": "smoke",
        "think_scale": 0.05,
        "hold_minutes": 5 / 60,
        "window_seconds": 5,
        "levels": [1.0, 2.0],
        "ramp_minutes": 5 / 60,
        "thresholds": ["TimeToWake: p99 < 2s", "Step_*: failure_ratio < 0.01"],
        "abort": {"rules": [], "sliding_seconds": 10, "delay_seconds": 10},
        "population": {
            "kind": "turnover",
            "sessions": 10,
            "awake": 3,
            "target_rps": 2,
            "registration_quiet_seconds": 1,
        },
        "target": {"local_workers": 5},
        "generator": {"void_when_saturated": False},
        "cleanup": {"stop_grace_seconds": 1},
        "out": str(out),
    }
    values.update(overrides)
    return CampaignParams(**values)


def campaign(out: Path, name: str, **overrides: Any) -> CampaignResult:
    return run_campaign_blocking(params(out, name, **overrides))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> CampaignResult:
    return campaign(tmp_path_factory.mktemp("demo"), "demo")


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CampaignResult]:
    judged = []

    def void_the_second(self: GeneratorHealth, window: Any) -> str | None:
        judged.append(window)
        return FORCED_VOID if len(judged) == 2 else None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GeneratorHealth, "void_reason", void_the_second)
        yield campaign(
            tmp_path_factory.mktemp("broken"),
            "broken",
            hold_minutes=4 / 60,
            window_seconds=4,
            ramp_minutes=4 / 60,
            levels=[1.0, 1.5],
            thresholds=["TimeToWake: p99 < 0.001ms", "achieved_rps >= 0.5 * target"],
        )


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        timeout=90,
    )


def screenshot(page: Path, tmp_path: Path, name: str, expect: tuple[str, ...] = ()) -> bytes:
    """Chromium renders the page to a PNG (kept in $AGENTSESSION_SCREENSHOTS when set); the
    DOM it parsed holds the section headings and `expect`."""
    assert Path(CHROMIUM).exists(), f"chromium is not installed ({CHROMIUM}): install it"
    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / f"{name}-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = dom.stdout.decode()
    assert "Throughput over time" in parsed  # parsed, not shown as text
    for text in expect:
        assert text in parsed, text
    shot = tmp_path / f"{name}.png"
    done = chromium(
        f"--screenshot={shot}",
        "--window-size=1600,5200",
        page.as_uri(),
        profile=tmp_path / f"{name}-shot",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 150_000  # charts and tables at full width, not a blank page
    keep = os.environ.get("AGENTSESSION_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    return data


def report_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "agentsession_core", "report", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


# --------------------------------------------------------------------------- pages
def test_the_demo_report_shows_every_section_in_chromium(demo, tmp_path):
    run_dir = demo.run_dir
    page = (run_dir / "report.html").read_text()
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in page, anchor
    assert_self_contained(page)
    # the run's own thresholds and levels on its charts, the void limits, awake
    assert "TimeToWake: p99 &lt; 2s" in page and "hold 1×" in page and "2×" in page
    assert "target 2/s" in page and "target 4/s" in page
    assert "void limit: p99 &gt; 50 ms" in page and "awake = 3" in page
    assert "http_Step_01_start" in page and "service time (from send)" in page
    assert "no data: this run has no stats_history.jsonl" not in page
    assert page.count("<path d=") > 20
    check_server_section(run_dir, page)
    expect = ("Server-side figures", "Key figures per window", "worker RSS, all workers (max)")
    screenshot(run_dir / "report.html", tmp_path, "demo", expect)


def check_server_section(run_dir: Path, page: str) -> None:
    """The embedded substrate's figures: the table says what server_summary.json says, and
    the charts are drawn."""
    summary = json.loads((run_dir / "server_summary.json").read_text())
    html = server_section(page)
    assert "source <b>scrape</b>" in html and "<code>agentsession_substrate_*</code>" in html
    assert re.search(r"sampling: <b>[1-9]\d*</b> ok", html)
    head = re.findall(r"<th>(.*?)</th>", html)
    assert [h.split()[0] for h in head[1:-1]] == [f"w{w['index']}" for w in summary["windows"]]
    assert "@1.00×" in head[1] and "@2.00×" in head[-2] and head[-1] == "steady (the hold)"
    rows = figure_rows(html)
    spans = [*summary["windows"], summary["steady"]]
    for name, series, figure, unit in (
        ("workers_rss_bytes_max", "workers_rss_bytes", "max", "B"),
        ("snapshot_bytes_written_rate", "snapshot_bytes_written", "rate", "B/s"),
        ("wakes_rate", "wakes", "rate", "/s"),
        ("parked_requests_max", "parked_requests", "max", ""),
    ):
        values = [s["figures"][series][figure] for s in spans]
        assert [read_back(cell, unit) for cell in rows[name]] == [
            None if v is None else pytest.approx(v, rel=0.005, abs=0.0005) for v in values
        ], (name, rows[name], values)
    assert rows["workers_rss_bytes_max"][-1].endswith(" MiB")  # worker processes hold MiBs
    assert summary["steady"]["figures"]["wakes"]["rate"] > 0  # the load woke actors
    for title in ("actors by state", "snapshot traffic", "memory"):
        assert f'aria-label="{title}"' in html
    assert '<a href="server_summary.json">server_summary.json</a>' in page


BYTES = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def read_back(cell: str, unit: str) -> float | None:
    """The figure a table cell shows, read back in its unit: "1,234", "3.4 MiB", "0.5/s",
    "12 KiB/s" (3 significant digits, whole numbers from 100), "–" for none. "B" and "B/s":
    a byte unit."""
    if cell == "–":
        return None
    rate = unit.endswith("/s")
    if rate:
        assert cell.endswith("/s"), cell
        cell = cell[:-2]
    factor = 1
    if unit.startswith("B"):
        cell, _, name = cell.rpartition(" ")
        factor = BYTES[name]
    return float(cell.replace(",", "")) * factor


def test_a_break_and_a_void_window_say_what_decided_them(broken, tmp_path):
    assert [w["outcome"] for w in broken.gate["windows"]] == ["break", "void"]
    page = (broken.run_dir / "report.html").read_text()
    assert "<b>TimeToWake: p99 &lt; 0.001ms</b>" in page  # the missed rule decided w0
    assert f"void: {FORCED_VOID}" in page
    assert ">break</td>" in page and ">void</td>" in page
    assert "FAIL" in page
    assert_self_contained(page)
    screenshot(broken.run_dir / "report.html", tmp_path, "break-void")


def test_a_baseline_comparison_renders_side_by_side(demo, broken, tmp_path):
    out = tmp_path / "compare" / "report.html"
    written = report_cli(
        str(demo.run_dir), "--baseline", str(broken.run_dir), "-o", str(out), cwd=tmp_path
    )
    assert Path(written) == out
    page = out.read_text()
    assert '<section id="baseline">' in page and "The two runs" in page
    assert "Per window, side by side" in page and "What the gate judged" in page
    # another window length and ramp: the gate compares nothing and says why
    assert "not comparable" in page and "<code>window_seconds: 4 → 5</code>" in page
    assert esc(broken.run_dir) in page
    assert_self_contained(page)
    screenshot(out, tmp_path, "baseline")


# --------------------------------------------------------------------------- the command
def test_report_rebuilds_a_local_run_in_place(demo, tmp_path):
    page = demo.run_dir / "report.html"
    before = page.read_text()
    page.unlink()
    assert Path(report_cli(str(demo.run_dir), cwd=tmp_path)) == page
    assert page.read_text() == before  # from the files alone, the same page


@pytest.fixture(scope="module")
def s3_runs(s3_server: str, demo, broken) -> dict[str, str]:
    s3_client(s3_server).create_bucket(Bucket=BUCKET)
    out = {}
    for name, result in (("demo", demo), ("broken", broken)):
        uploaded = upload_run(
            result.run_dir,
            f"s3://{BUCKET}/nightly",
            local_root=result.run_dir.parents[4],
            endpoint_url=s3_server,
        )
        out[name] = uploaded.location
    return out


def test_report_reads_an_s3_run_into_the_current_directory(s3_server, s3_runs, tmp_path):
    env = {"AWS_ENDPOINT_URL": s3_server}
    written = report_cli(s3_runs["demo"], cwd=tmp_path, env=env)
    assert Path(written) == tmp_path / "report.html"
    page = Path(written).read_text()
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in page, anchor
    assert esc(s3_runs["demo"]) in page and "<code>stats_history.csv</code>" in page
    assert "TimeToWake: p99 &lt; 2s" in page and 'id="baseline"' not in page
    assert_self_contained(page)


def test_report_compares_two_s3_runs(s3_server, s3_runs, tmp_path):
    out = tmp_path / "s3-compare.html"
    report_cli(
        s3_runs["demo"],
        "--baseline",
        s3_runs["broken"],
        "--endpoint-url",
        s3_server,
        "-o",
        str(out),
        cwd=tmp_path,
    )
    page = out.read_text()
    assert '<section id="baseline">' in page and esc(s3_runs["broken"]) in page
    assert "What the gate judged" in page
    assert_self_contained(page)


# --------------------------------------------------------------------------- the knee
@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A capacity search against a local substrate that refuses every wake above 2x
    (test_capacity_search.py `refuse_above`): 2x holds, 4x breaks, and at the resolution
    (1.0) the search ends there: capacity 2x, broke 4x."""
    with LocalSubstrateProcess(workers=5) as proc:
        p = params(
            tmp_path_factory.mktemp("searched"),
            "searched",
            hold_minutes=3 / 60,
            window_seconds=3,
            levels=[1.0],
            ramp_minutes=None,
            thresholds=["TimeToWake: failure_ratio < 0.02"],
            target=ate_target(proc),
            population={
                "kind": "turnover",
                "sessions": 10,
                "awake": 3,
                "target_rps": 1,
                "registration_quiet_seconds": 1,
            },
            search={
                "threshold": "TimeToWake: p99 < 2s",
                "start": 2,
                "factor": 2,
                "max_level": 4,
                "resolution": 1.0,
                "settle_seconds": 1,
                "window_seconds": 3,
            },
        )
        campaign, gate = run_on_fresh_loop(tolerant(p, before_probe=refuse_above(proc, 2)))
    assert campaign.run.result is not None
    return {"run_dir": campaign.run.result.run_dir, "gate": gate}


def test_the_knee_curve_of_a_capacity_search_in_chromium(searched, tmp_path):
    capacity = searched["gate"]["capacity"]
    probes = [(p["level"], p["outcome"], p.get("stage", "search")) for p in capacity["probes"]]
    # The search's two probes, then the found level held once more (its confirmation).
    assert probes == [(2, "held", "search"), (4, "broke", "search"), (2, "held", "confirm")]
    assert capacity["confirmed"] is True
    page = (searched["run_dir"] / "report.html").read_text()
    assert '<section id="capacity">' in page and '<a href="#capacity">' in page
    assert 'aria-label="knee: TimeToWake: p99 &lt; 2s"' in page
    # One dot per probe that measured the figure, coloured by its outcome; the SLO's rule.
    measured = [p for p in capacity["probes"] if p["figure"] is not None]
    assert page.count('r="5" fill="#') == len(measured) and measured
    assert "SLO 2000ms" in page
    assert "capacity 2x" in page and "broke 4x" in page
    assert_self_contained(page)
    screenshot(
        searched["run_dir"] / "report.html",
        tmp_path,
        "knee",
        expect=("Capacity", "knee: TimeToWake"),
    )
