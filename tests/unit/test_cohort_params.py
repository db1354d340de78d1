"""The spawn and burst parameters (docs/SPEC.md §4.5, §4.6): the marks' percentages from a
list or the command line, what a cohort cannot be asked to do, and each kind's defaults."""

from __future__ import annotations

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.rules import DEFAULT_THRESHOLDS_BY_KIND
from agentsession_core.engine.params import parse_params
from agentsession_core.errors import UsageError
from agentsession_core.judge.thresholds import parse_thresholds


def test_percentages_come_sorted_and_unique_from_a_list_or_a_flag() -> None:
    listed = parse_params({"population": {"kind": "spawn", "cohort_percentiles": [99, 10, 99]}})
    assert listed.population.cohort_percentiles == [10, 99]
    flagged = parse_params({"population": {"kind": "burst", "cohort_percentiles": "90, 50"}})
    assert flagged.population.cohort_percentiles == [50, 90]
    assert parse_params({"population": {"kind": "spawn"}}).population.cohort_percentiles == [
        50,
        90,
        99,
    ]


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("100", "each percentage is 1-99"),
        ([0], "each percentage is 1-99"),
        ("fifty", "whole percentages"),
        ([], "at least one"),
        (list(range(1, 30)), "at most 20"),
    ],
)
def test_a_bad_percentage_is_refused_naming_the_parameter(value: object, why: str) -> None:
    with pytest.raises(UsageError, match=rf"population\.cohort_percentiles: .*{why}"):
        parse_params({"population": {"kind": "spawn", "cohort_percentiles": value}})


def test_a_burst_must_park_its_actors() -> None:
    with pytest.raises(UsageError, match="lifecycle_mode none parks nothing"):
        parse_params({"population": {"kind": "burst", "lifecycle_mode": "none"}})


def test_cohorts_run_in_one_generator_process_unpaired() -> None:
    with pytest.raises(UsageError, match=r"generator\.shards must be 1"):
        parse_params({"population": {"kind": "spawn"}, "generator": {"shards": 2}})
    with pytest.raises(UsageError, match="paired run of cohorts is not built"):
        parse_params({"population": {"kind": "burst"}, "reference": "embedded"})


def test_each_cohort_kind_has_its_own_default_thresholds_and_they_parse() -> None:
    for kind in ("spawn", "burst"):
        params = CampaignParams(population={"kind": kind, "sessions": 5})
        assert [t.text for t in params.thresholds] == list(DEFAULT_THRESHOLDS_BY_KIND[kind])
        assert params.thresholds == parse_thresholds(DEFAULT_THRESHOLDS_BY_KIND[kind])
        assert all(r.stat != "achieved_rps" for r in params.thresholds)
    spawn = [t.text for t in CampaignParams(population={"kind": "spawn", "sessions": 5}).thresholds]
    assert "TimeToAllReady: count >= 1" in spawn and "CrashCount: events < 1" in spawn


def test_a_rate_rule_or_a_search_is_refused_for_cohorts() -> None:
    with pytest.raises(ValueError, match="no rate to achieve"):
        CampaignParams(
            population={"kind": "spawn", "sessions": 5},
            thresholds=["achieved_rps >= 0.95 * target"],
        )
    with pytest.raises(ValueError, match=r"search\.enabled"):
        CampaignParams(
            population={"kind": "burst", "sessions": 5},
            search={"enabled": True, "threshold": "ActorTimeToResume: p99 < 2s"},
        )


def test_a_cohort_kinds_level_is_its_cohort() -> None:
    params = parse_params({"population": {"kind": "spawn", "sessions": 40}})
    assert params.population.level == 40.0 and params.population.cohorts
    assert not parse_params({"population": {"kind": "turns"}}).population.cohorts
