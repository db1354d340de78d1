"""The hold's progress, as the Prefect progress artifact shows it inside windows."""

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import parse
from tasks.hold import held_percent


class Plan:
    def __init__(self, params):
        self.plan = params.windows()


def test_held_percent_counts_whole_windows_then_time_into_the_current_one():
    params = parse(
        CampaignParams,
        {
            "script": "smoke",
            "hold_minutes": 20,
            "window_seconds": 600,
            "levels": [1, 2],
            "ramp_minutes": 10,
        },
        source="test",
    )  # 2 windows at 1x, 1 at 2x: 1800 s
    campaign = Plan(params)
    assert held_percent(campaign, 0, 0) == 0
    assert held_percent(campaign, 0, 300) == 100 * 300 / 1800
    assert held_percent(campaign, 1, 600) == 100 * 1200 / 1800
    assert held_percent(campaign, 2, 10_000) == 100  # never past its window
