"""The `demo` campaign as its preset says, over the ate wire against the embedded local
substrate (gRPC ateapi.Control + protobuf bodies through the router, real worker processes),
shortened with overrides: the path a real campaign takes, judged end to end without Prefect
(`run_campaign`, the flow's phases in plain asyncio). Both windows pass the demo's thresholds;
the generator's void rule is off (a busy shared machine saturates it: the substrate and the
wire are what is judged here)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.preset_files import load_preset
from agentsession_core.campaign.standalone import run_campaign
from agentsession_core.output.run_dir import verify_manifest

pytestmark = pytest.mark.timeout(180)

# Every row the upstream runner's dashboards read from a turnover campaign, each with the
# substrate's own handling time beside the client's (x-server-elapsed-us: the gRPC trailer on
# control calls, the glutton's header on router requests).
TIMED_ROWS = (
    "grpc_CreateActor",
    "grpc_SuspendActor_Register",
    "grpc_SuspendActor",
    "http_WakeFirstTouch",
)


def shortened_demo(out: Path) -> CampaignParams:
    demo = load_preset("demo")
    assert demo.target.protocol == "ate" and demo.target.substrate is None
    values = demo.model_dump(mode="json")
    values.update(
        out=str(out),
        hold_minutes=0.1,  # one 6 s window at 1x, then one at 1.5x (the ramp is kept)
        window_seconds=6,
        ramp_minutes=0.1,
    )
    values["abort"] = {**values["abort"], "delay_seconds": 5}
    values["generator"] = {**values["generator"], "void_when_saturated": False}
    return CampaignParams.model_validate(values)


async def test_the_demo_campaign_over_the_ate_wire(tmp_path: Path) -> None:
    params = shortened_demo(tmp_path / "art")
    result = await run_campaign(params, handle_signals=False)
    assert result.verdict == "pass", result.reason
    assert result.run.status == "completed", result.run.reason
    run_dir = result.run_dir

    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["leaked_actors"] == []
    assert status["actors_created"] == status["actors_deleted"] >= params.population.sessions

    rows = {}
    for line in (run_dir / "stats.jsonl").read_bytes().splitlines():
        row = orjson.loads(line)
        rows.setdefault(row["metric"], row["measurements"])
    steps = [metric for metric in rows if metric.startswith("http_Step_")]
    assert len(steps) == 4, sorted(rows)  # smoke's four steps
    for metric in (*TIMED_ROWS, *steps):
        measurements = rows[metric]
        assert measurements["request_count"] > 0, metric
        assert measurements["server_count"] > 0 and measurements["server_p50"] > 0, metric
    # TimeToWake is the client's view of a wake (tick → first answer): it has no server time.
    assert rows["rps_TimeToWake"]["request_count"] > 0
    windows = [orjson.loads(line) for line in (run_dir / "windows.jsonl").read_bytes().splitlines()]
    assert [(w["level"], w["outcome"]) for w in windows] == [(1.0, "pass"), (1.5, "pass")]
    assert verify_manifest(run_dir) == []
    campaign = orjson.loads((run_dir / "campaign.json").read_bytes())
    assert campaign["params"]["target"]["protocol"] == "ate", campaign["params"]["target"]
