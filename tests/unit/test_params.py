"""RunParams: bad values are refused once, with the parameter's name; levels per population."""

from __future__ import annotations

import pytest

from agentsession_core.engine.params import RunParams, parse_params
from agentsession_core.errors import UsageError


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"sessions": 0}, "parameter sessions:"),
        ({"population": "open"}, "parameter population:"),
        ({"template": "glutton"}, "parameter template: must be NAMESPACE/NAME"),
        ({"name": "Bad Name"}, "parameter name:"),
        ({"tag": "-x"}, "parameter tag:"),
        ({"lifecycle_mode": "hibernate"}, "parameter lifecycle_mode:"),
        ({"resume_mode": "eager"}, "parameter resume_mode:"),
        ({"spawn_rate": 0}, "parameter spawn_rate:"),
        ({"think_scale": -1}, "parameter think_scale:"),
        ({"metrics_port": 70000}, "parameter metrics_port:"),
        ({"sesions": 3}, "parameter sesions: Extra inputs are not permitted"),
    ],
)
def test_bad_values_name_the_parameter(values: dict, where: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_params(values)
    message = str(caught.value)
    assert message.startswith(where), message
    assert "\n" not in message and caught.value.exit_code == 2


def test_awake_may_not_exceed_sessions_in_turnover() -> None:
    with pytest.raises(UsageError, match=r"^parameters: awake \(5\) exceeds sessions \(4\)$"):
        parse_params({"population": "turnover", "sessions": 4, "awake": 5})
    assert parse_params({"population": "closed", "sessions": 4, "awake": 5}).awake == 5


def test_level_is_the_population_knob() -> None:
    assert RunParams(population="closed", sessions=7).level == 7.0
    assert RunParams(population="turnover", target_rps=2.5).level == 2.5
    assert RunParams(population="turns", turns_per_hour=12).level == 12.0


def test_template_ref_and_assignment_is_validated() -> None:
    params = RunParams(template="test/small")
    assert params.template_ref == ("test", "small")
    with pytest.raises(ValueError):
        params.sessions = -1
