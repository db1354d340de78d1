"""Bad numbers and hostile files are refused in one line before anything starts (issue #11):
non-finite and absurd values, YAML alias bombs in scripts, parameter files and `--set`,
numbers too long to read; no error message ever renders a huge value."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsession_core.campaign.bounds import MAX_WINDOWS
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import RunParams, parse
from agentsession_core.engine.params_io import apply_settings, load_values
from agentsession_core.errors import UsageError, clip
from agentsession_core.script import ScriptError, decode
from agentsession_core.script.quantity import QuantityError, parse_duration, parse_quantity

# Every refusal here takes microseconds; a bomb that got expanded would take forever, which
# the timeout catches (no wall-clock assertion: a loaded machine is slow, not wrong).
pytestmark = pytest.mark.timeout(60)


def laughs(levels: int = 9) -> str:
    """The "billion laughs": `levels` nested lists of nine aliases, 9^levels leaves."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    return "\n".join(lines)


def nested_bomb(levels: int = 9) -> list:
    value: list = ["lol"] * 9
    for _ in range(levels):
        value = [value] * 9
    return value


def refused_quickly(call, error=Exception) -> str:
    with pytest.raises(error) as info:
        call()
    text = str(info.value)
    assert "\n" not in text and len(text) < 1000, text
    return text


# ------------------------------------------------------------------ scripts
SCRIPT = (
    "name: bomb\nmin_actor_memory: {memory}\nsteps:\n"
    "  - {{name: a, agent: x, think: {think}, ops: [ping: {{}}]}}\n"
)


@pytest.mark.parametrize("field", ["memory", "think"])
def test_an_alias_bomb_in_a_script_is_refused_at_its_first_anchor(field: str) -> None:
    values = {"memory": "1Mi", "think": "1s"}
    values[field] = "*a9"
    text = laughs() + "\n" + SCRIPT.format(**values)
    message = refused_quickly(lambda: decode(text, "bomb.yaml"), ScriptError)
    assert "line 1" in message and "anchor &a0" in message and "not allowed" in message


def test_an_anchor_alone_is_refused_too() -> None:
    text = SCRIPT.format(memory="&m 1Mi", think="1s")
    assert "anchor &m" in refused_quickly(lambda: decode(text, "s.yaml"), ScriptError)


def test_a_number_too_long_to_read_is_one_line() -> None:
    text = SCRIPT.format(memory="9" * 5000, think="1s")
    message = refused_quickly(lambda: decode(text, "s.yaml"), ScriptError)
    assert "4300 digits" in message


@pytest.mark.parametrize(
    "value",
    [nested_bomb(), "9" * 100_000, 10**5000, ["1Mi"] * 100_000, {"x": nested_bomb()}],
    ids=["alias-bomb", "long-text", "huge-int", "long-list", "mapping"],
)
def test_sizes_and_durations_never_format_a_huge_value(value) -> None:
    refused_quickly(lambda: parse_quantity(value), QuantityError)
    refused_quickly(lambda: parse_duration(value), QuantityError)


def test_clip_is_short_and_cheap() -> None:
    for value in (nested_bomb(), "x" * 10**6, 10**5000, b"\0" * 10**6, float("inf")):
        text = clip(value)
        assert len(text) <= 80 and "\n" not in text
    assert clip("2s") == "'2s'"


# ------------------------------------------------------------------ parameter files, --set
def test_an_alias_bomb_in_a_params_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(laughs() + "\nhold_minutes: *a9\n")
    message = refused_quickly(lambda: load_values(path), UsageError)
    assert str(path) in message and "anchor &a0" in message


def test_a_params_file_over_1_mib_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("# " + "x" * (1024 * 1024) + "\n")
    assert "1 MiB" in refused_quickly(lambda: load_values(path), UsageError)


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ("think_scale=[&a [1, 2], *a]", "anchor &a"),
        (f"seed={'9' * 5000}", "4300 digits"),
        ("seed=" + "[" * 50_000 + "]" * 50_000, "too deep"),
    ],
    ids=["alias", "long-int", "deep"],
)
def test_hostile_set_values_are_refused(setting: str, says: str) -> None:
    assert says in refused_quickly(lambda: apply_settings({}, [setting]), UsageError)


# ------------------------------------------------------------------ bounds
@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"hold_minutes": float("inf")}, "hold_minutes"),
        ({"hold_minutes": "1e7"}, "hold_minutes"),
        ({"hold_minutes": 7 * 24 * 60 + 1}, "hold_minutes"),
        ({"ramp_minutes": float("inf"), "levels": [1, 2]}, "ramp_minutes"),
        ({"hold_minutes": 7 * 24 * 60, "window_seconds": 60}, "at most 10000"),
        ({"levels": [1.0] * 101}, "levels"),
        ({"levels": [1, 1e6]}, "levels[1]"),
        ({"window_seconds": 0.5}, "window_seconds"),
        ({"population": {"target_rps": float("inf")}}, "population.target_rps"),
        ({"population": {"target_rps": 100_001}}, "population.target_rps"),
        ({"population": {"spawn_rate": 1e9}}, "population.spawn_rate"),
        ({"think_scale": float("inf")}, "think_scale"),
        ({"think_scale": 1001}, "think_scale"),
        ({"population": {"registration_quiet_seconds": "inf"}}, "registration_quiet_seconds"),
        ({"population": {"registration_quiet_seconds": "48h"}}, "registration_quiet_seconds"),
        ({"population": {"sessions": 1_000_001}}, "population.sessions"),
        ({"cleanup": {"timeout_seconds": float("nan")}}, "cleanup.timeout_seconds"),
        ({"thresholds": ["TimeToWake: p99 < 2s"] * 101}, "thresholds"),
        ({"thresholds": ["x" * 501]}, "thresholds[0]"),
        ({"upload": {"retry_delay_seconds": 3600}}, "upload.retry_delay_seconds"),
        ({"name": "a" * 64}, "name"),
        ({"seed": 2**64}, "seed"),
        ({"target": {"substrate": "x" * 100_000}}, "target.substrate"),
        ({"window_seconds": "1" * 100_000}, "window_seconds"),
    ],
)
def test_absurd_values_are_refused_naming_the_parameter(values: dict, names: str) -> None:
    message = refused_quickly(lambda: parse(CampaignParams, values), UsageError)
    assert names in message, message


def test_the_largest_allowed_campaign_plans_without_building_a_huge_list() -> None:
    params = parse(CampaignParams, {"hold_minutes": 7 * 24 * 60, "window_seconds": 7 * 24 * 36})
    assert len(params.windows()) == 100 <= MAX_WINDOWS
    run = parse(
        RunParams,
        {"think_scale": 1000, "population": {"kind": "turnover", "target_rps": 100_000}},
    )
    assert run.think_scale == 1000
