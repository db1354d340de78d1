"""Where a wake's time goes (docs/SPEC.md §5.9, server.preset: agent-substrate), end to end
over real sockets: a campaign against a FakeSubstrate whose wakes feed a stand-in of the
platform's Prometheus series (tests/integration/agent_substrate_standin.py), read through
target.prometheus_url, alone (the stand-in speaks the HTTP API) and through a real Prometheus
server scraping the stand-in (Debian's `prometheus`, which CI installs: without it the test
fails, it does not skip)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import run_campaign
from agentsession_core.measure.agent_substrate import preset_queries
from tests.integration.agent_substrate_standin import (
    ObservedSubstrate,
    platform_histograms,
    serving,
)
from tests.integration.ports import fixed_port

pytestmark = pytest.mark.timeout(120)
QUICK = {"think_scale": 0.05, "seed": 5, "tag": "test", "script": "smoke"}
TURNOVER = {
    "kind": "turnover",
    "sessions": 6,
    "awake": 2,
    "target_rps": 4,
    "registration_quiet_seconds": 0.5,
}
CLEANUP = {"timeout_seconds": 20.0, "stop_grace_seconds": 2.0}


def _run_dir(out: Path, name: str) -> Path:
    (found,) = [p for p in (out / "runs" / name).glob("*/*/*") if p.is_dir()]
    return found


def _params(
    out: Path, name: str, prometheus_url: str, window: int = 3, windows: int = 2, **extra: Any
) -> CampaignParams:
    return CampaignParams(
        **QUICK,
        name=name,
        out=str(out),
        hold_minutes=windows * window / 60,
        window_seconds=window,
        population=TURNOVER,
        target={"prometheus_url": prometheus_url},
        cleanup=CLEANUP,
        **extra,
    )


def _phases(split: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["row"]: p for p in split["phases"]}


async def up(http: httpx.AsyncClient, url: str) -> list[str] | None:
    """Prometheus's answer to `up` (None while it does not answer yet)."""
    try:
        answer = await http.get(f"{url}/api/v1/query", params={"query": "up"})
        return [r["value"][1] for r in answer.json()["data"]["result"]]
    except (httpx.HTTPError, ValueError, KeyError):
        return None


async def test_the_wake_split_per_window_from_the_platforms_series(tmp_path: Path) -> None:
    series = platform_histograms()
    fake = ObservedSubstrate(series, lose_every=3, slow_every=4, fail_wakes=0.05)
    user = {
        "resume_seconds": "sum(increase(" + "ate_actor_lifecycle_operation_duration_seconds"
        '_sum{ate_actor_operation_name="resume", error_type=""}[$window]))',
        "up": "1",
    }
    async with serving(series) as standin:
        params = _params(
            tmp_path,
            "split",
            standin.url,
            server={"preset": "agent-substrate", "queries": user, "interval_seconds": 0.5},
            thresholds=["server.resume_p99 < 2", "server.restore_count >= 1"],
        )
        await run_campaign(params, substrate=fake, handle_signals=False)
    run_dir = _run_dir(tmp_path, "split")
    doc = json.loads((run_dir / "server_summary.json").read_text())
    preset = doc["source"]["preset"]
    assert preset["name"] == "agent-substrate" and preset["overridden"] == ["resume_seconds"]
    assert doc["source"]["queries"]["resume_seconds"] == user["resume_seconds"]  # user wins
    assert set(preset_queries("agent-substrate")) <= set(doc["source"]["queries"])
    assert doc["sampling"]["failed"] == 0, doc["sampling"]["last_error"]
    windows = doc["windows"]
    assert [w["index"] for w in windows] == [0, 1]
    resumes = 0.0
    for window in windows:
        split = window["wake_split"]
        phases = _phases(split)
        assert {"wake_router", "parking_resumed", "resume", "scheduling", "restore"} <= set(phases)
        for row, p in phases.items():
            assert p["count"] > 0 and p["mean"] > 0, row
        # Failures left out: the failed resumes and restores took 9 s each, the successes < 1 s.
        assert phases["resume"]["p99"] < 1.0 and phases["resume"]["mean"] < 1.0
        # Nested, never added: each says where it lies and no total is written.
        assert phases["restore"]["within"] == "resume" and phases["resume"]["within"] == "parking"
        assert "total" not in split
        assert split["client"]["wakes"] > 0 and split["client"]["p99"] >= split["client"]["p50"]
        assert window["figures"]["resume"]["p99"] == phases["resume"]["p99"]  # judgeable
        resumes += phases["resume"]["count"]
    # Lost telemetry: every third resume record dropped; the reconciliation says so (the
    # client counts whole seconds, so a window's edge may move a wake or two).
    steady = doc["steady"]["wake_split"]
    said = steady["reconciliation"]
    assert fake.recorded < fake.resumes
    assert said["server_resumes"] == round(resumes) < said["client_wakes"]
    assert said["missing"] == said["client_wakes"] - said["server_resumes"]
    assert 0.15 <= said["missing_share"] <= 0.55
    assert "missing from the server's telemetry" in said["said"]
    # Every fourth checkpoint took 4 s, past the last bucket (2.5 s): the steady p99 is
    # saturated and read as the mean; the p50 is not.
    checkpoint = _phases(steady)["checkpoint"]
    assert "p99" in checkpoint["saturated"] and "p50" not in checkpoint["saturated"]
    assert checkpoint["p99"] == checkpoint["mean"] > checkpoint["p50"]
    assert steady["counts"]["no_free_worker"]["total"] > 0
    assert steady["checkpoint_bytes_per_second"] > 0
    verdicts = [json.loads(line) for line in (run_dir / "windows.jsonl").read_text().splitlines()]
    assert all(r["passed"] is True for v in verdicts for r in v["thresholds"])
    report = (run_dir / "report.html").read_text()
    assert "Where the wakes' time went" in report and "missing from the server" in report


async def test_a_real_prometheus_answers_the_preset(tmp_path: Path) -> None:
    prometheus = shutil.which("prometheus")
    assert prometheus, "no prometheus binary to scrape the stand-in (apt-get install prometheus)"
    series = platform_histograms()
    fake = ObservedSubstrate(series)
    port = fixed_port()
    async with serving(series) as standin:
        config = tmp_path / "prometheus.yml"
        target = standin.url.removeprefix("http://")
        config.write_text(
            "global: {scrape_interval: 500ms, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - job_name: platform\n    static_configs: [{{targets: ['{target}']}}]\n"
        )
        server = await asyncio.create_subprocess_exec(
            prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(timeout=2) as http:  # up, and the stand-in scraped
                while await up(http, url) != ["1"]:
                    assert server.returncode is None, "prometheus exited"
                    await asyncio.sleep(0.1)
            params = _params(
                tmp_path,
                "realprom",
                url,
                window=3,
                windows=1,
                server={"preset": "agent-substrate", "interval_seconds": 1},
            )
            await run_campaign(params, substrate=fake, handle_signals=False)
        finally:
            server.terminate()
            await asyncio.wait_for(server.wait(), 10)
    doc = json.loads((_run_dir(tmp_path, "realprom") / "server_summary.json").read_text())
    assert doc["sampling"]["failed"] == 0, doc["sampling"]["last_error"]
    steady = doc["steady"]["wake_split"]
    phases = _phases(steady)
    # Prometheus extrapolates increase() to the window's edges: counts are near, not exact.
    said = steady["reconciliation"]
    assert said["server_resumes"] == pytest.approx(said["client_wakes"], rel=0.5)
    assert 0.1 <= phases["restore"]["p50"] <= 0.3
    assert phases["scheduling"]["mean"] < phases["resume"]["mean"]


async def test_a_newer_platforms_no_capacity_is_read_as_the_capacity_fault(
    tmp_path: Path,
) -> None:
    """The scheduler's outcome was renamed (`no_capacity` beside the older `no_free_worker`):
    a stand-in that exports only the newer name still gives the capacity-fault figure."""
    series = platform_histograms()
    fake = ObservedSubstrate(series, no_room_outcome="no_capacity")
    async with serving(series) as standin:
        params = _params(
            tmp_path,
            "no-capacity",
            standin.url,
            server={"preset": "agent-substrate", "interval_seconds": 0.5},
        )
        await run_campaign(params, substrate=fake, handle_signals=False)
    assert fake.no_room > 0
    doc = json.loads((_run_dir(tmp_path, "no-capacity") / "server_summary.json").read_text())
    counts = doc["steady"]["wake_split"]["counts"]["no_free_worker"]
    assert 0 < counts["total"] <= fake.no_room
    assert set(counts["by"]) == {"no_free_worker_no_capacity"}
