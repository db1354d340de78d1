"""The refusals of `population.wake_probe: none` and `target.local_data_plane: false`
(docs/SPEC.md §2.4, §3.3), each one line naming the field, and cold-resume's level and
defaults (§4.7)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import RunParams
from agentsession_core.judge.conditions import conditions


def refusal(**fields: object) -> str:
    with pytest.raises(ValidationError) as refused:
        RunParams(**fields)
    return str(refused.value)


def test_wake_probe_none_needs_an_explicit_resume() -> None:
    assert "population.wake_probe none" in refusal(population={"wake_probe": "none"})


def test_wake_probe_none_refuses_what_needs_the_router() -> None:
    explicit = {"wake_probe": "none", "resume_mode": "explicit"}
    assert "population.wake_probe none" in refusal(
        population={**explicit, "lifecycle_mode": "none"}
    )
    assert "population.wake_probe none" in refusal(population={**explicit, "kind": "spawn"})


def test_no_data_plane_needs_wake_probe_none() -> None:
    assert "target.local_data_plane false" in refusal(target={"local_data_plane": False})
    RunParams(
        target={"local_data_plane": False},
        population={"wake_probe": "none", "resume_mode": "explicit"},
    )


def test_cold_resume_levels_its_rate_and_judges_its_wakes() -> None:
    params = CampaignParams(
        population={
            "kind": "cold-resume",
            "target_rps": 40,
            "wake_probe": "none",
            "resume_mode": "explicit",
        }
    )
    assert params.population.level == 40
    assert "achieved_rps >= 0.95 * target" in [t.text for t in params.thresholds]
    assert "cold-resume" in refusal(population={"kind": "cold-resume", "lifecycle_mode": "none"})


def test_a_run_from_before_wake_probe_compares_as_ping() -> None:
    old = {"population": {"kind": "turnover"}}
    new = {"population": {"kind": "turnover", "wake_probe": "ping"}}
    assert conditions(old)["population.wake_probe"] == conditions(new)["population.wake_probe"]
