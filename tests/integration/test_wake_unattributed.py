"""The wake split's `unattributed` row end to end (docs/SPEC.md §5.9): a short campaign
against a FakeSubstrate whose wakes feed the stand-in of the platform's Prometheus series
(tests/integration/agent_substrate_standin.py) over real sockets; server_summary.json holds
the row per window and over the steady window, consistent with the client's TimeToWake and
the innermost phases' own figures, a `server.unattributed_mean` rule judges it, and
report.html shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.run import run_campaign
from agentsession_core.measure.wake_unattributed import row_name
from tests.integration.agent_substrate_standin import (
    ObservedSubstrate,
    platform_histograms,
    serving,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


async def test_every_window_and_the_steady_one_carry_the_row(tmp_path: Path) -> None:
    series = platform_histograms()
    async with serving(series) as standin:
        params = CampaignParams(
            think_scale=0.05,
            seed=5,
            tag="test",
            script="smoke",
            name="unattributed",
            out=str(tmp_path),
            hold_minutes=6 / 60,
            window_seconds=3,
            population={
                "kind": "turnover",
                "sessions": 6,
                "awake": 2,
                "target_rps": 4,
                "registration_quiet_seconds": 0.5,
            },
            target={"prometheus_url": standin.url},
            cleanup={"timeout_seconds": 20.0, "stop_grace_seconds": 2.0},
            server={"preset": "agent-substrate", "interval_seconds": 0.5},
            thresholds=["server.unattributed_mean >= 0"],
        )
        await run_campaign(params, substrate=ObservedSubstrate(series), handle_signals=False)
    (run_dir,) = [p for p in (tmp_path / "runs" / "unattributed").glob("*/*/*") if p.is_dir()]
    doc = json.loads((run_dir / "server_summary.json").read_text())
    for span in [*doc["windows"], doc["steady"]]:
        split = span["wake_split"]
        found = split["unattributed"]
        # With every phase answering, the innermost are scheduling and the restore.
        assert found["named_phases"] == ["scheduling", "restore"]
        rows = {r["statistic"]: r for r in found["rows"]}
        mean = rows["mean"]
        assert mean["row"] == row_name("mean")
        phases = {p["row"]: p for p in split["phases"]}
        named = phases["scheduling"]["mean"] + phases["restore"]["mean"]
        assert mean["named"] == pytest.approx(named)
        assert mean["whole"] == pytest.approx(split["client"]["mean"])
        assert mean["raw"] == pytest.approx(split["client"]["mean"] - named)
        assert mean["value"] == max(0.0, mean["raw"]) and mean["negative"] == (mean["raw"] < 0)
        assert rows["p50"]["whole"] == pytest.approx(split["client"]["p50"])
        assert span["figures"]["unattributed"]["mean"] == mean["value"]
    verdicts = [json.loads(line) for line in (run_dir / "windows.jsonl").read_text().splitlines()]
    judged = [r for v in verdicts for r in v["thresholds"]]
    assert judged and all(r["passed"] is True for r in judged), judged
    report = (run_dir / "report.html").read_text()
    assert f"<code>{row_name('mean')}</code>" in report
    assert f"<code>{row_name('p50')}</code>" in report
