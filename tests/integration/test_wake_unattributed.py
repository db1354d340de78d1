"""The wake split's `unattributed` row end to end (docs/SPEC.md §5.9): a short campaign
against a FakeSubstrate whose wakes feed the stand-in of the platform's Prometheus series
(tests/integration/agent_substrate_standin.py) over real sockets; server_summary.json holds
the row per window and over the steady window, consistent with the client's TimeToWake and
the innermost phases' own figures, a `server.unattributed_mean` rule judges it, and
report.html shows it.

The stand-in's wakes take at least WAKE_S on the client's clock (a sleep before each), while
the phases it reports (scheduling + restore) add up to at most 0.32 s per wake, whatever the
machine's speed: so every span's unattributed mean is at least WAKE_S - 0.32 s, a known
positive floor the rule is judged against (and never the clamp at 0)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import run_campaign
from agentsession_core.measure.wake_unattributed import row_name
from tests.integration.agent_substrate_standin import (
    ObservedSubstrate,
    platform_histograms,
    serving,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]
WAKE_S = 0.45
NAMED_MAX_S = 0.02 + 0.3  # the stand-in's longest scheduling and restore
FLOOR_S = 0.1  # below WAKE_S - NAMED_MAX_S


class SlowWakes(ObservedSubstrate):
    """Each wake of a parked actor takes WAKE_S before the stand-in's own."""

    async def _wake(self, actor: Any, origin: Any) -> None:
        if actor.status != "RUNNING":
            await asyncio.sleep(WAKE_S)
        await super()._wake(actor, origin)


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
            thresholds=[f"server.unattributed_mean >= {FLOOR_S}"],
        )
        await run_campaign(params, substrate=SlowWakes(series), handle_signals=False)
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
        assert mean["named"] <= NAMED_MAX_S and split["client"]["mean"] >= WAKE_S
        assert mean["value"] == mean["raw"] > FLOOR_S and mean["negative"] is False
        assert rows["p50"]["whole"] == pytest.approx(split["client"]["p50"])
        assert span["figures"]["unattributed"]["mean"] == mean["value"]
    verdicts = [json.loads(line) for line in (run_dir / "windows.jsonl").read_text().splitlines()]
    judged = [r for v in verdicts for r in v["thresholds"]]
    assert [r["passed"] for r in judged] == [True, True], judged  # one rule, two windows
    assert all(r["observed"] > FLOOR_S for r in judged), judged
    report = (run_dir / "report.html").read_text()
    assert f"<code>{row_name('mean')}</code>" in report
    assert f"<code>{row_name('p50')}</code>" in report
