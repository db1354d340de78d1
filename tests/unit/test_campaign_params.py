"""CampaignParams: window arithmetic, bad input named by parameter, presets, --set paths,
where the run goes (out, dest) and the defaults that differ from `agentsession run`."""

from __future__ import annotations

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.preset_files import load_preset, preset_names, preset_path
from agentsession_core.engine.params import RunParams, parse
from agentsession_core.engine.params_io import apply_settings, load_values
from agentsession_core.engine.population_params import KIND_PARAMS
from agentsession_core.errors import UsageError


def parse_campaign(values: dict) -> CampaignParams:
    return parse(CampaignParams, values)


def _refused(values: dict) -> str:
    with pytest.raises(UsageError) as info:
        parse_campaign(values)
    return str(info.value)


def test_defaults_hold_an_hour_in_six_windows_at_one_level():
    params = CampaignParams()
    plan = params.windows()
    assert [(w.index, w.level, w.seconds) for w in plan] == [(i, 1.0, 600.0) for i in range(6)]
    assert params.hold_seconds == 3600.0


def test_ramp_holds_each_further_level_for_ramp_minutes():
    params = parse_campaign({"hold_minutes": 60, "levels": [1, 1.5, 2], "ramp_minutes": 10})
    assert [w.level for w in params.windows()] == [1.0] * 6 + [1.5, 2.0]
    assert [w.index for w in params.windows()] == list(range(8))


def test_each_level_holds_hold_minutes_without_ramp_minutes():
    params = parse_campaign({"hold_minutes": 0.2, "window_seconds": 4, "levels": [1, 2]})
    assert [w.level for w in params.windows()] == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]


def test_fractional_minutes_that_make_whole_windows_are_accepted():
    # 0.3 min = 18 s = 6 windows of 3 s, despite 0.3 * 60 not being exact in binary.
    assert len(parse_campaign({"hold_minutes": 0.3, "window_seconds": 3}).windows()) == 6


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"hold_minutes": -5}, "hold_minutes"),
        ({"hold_minutes": 0}, "hold_minutes"),
        ({"window_seconds": -1}, "window_seconds"),
        ({"hold_minutes": 1, "window_seconds": 7}, "hold_minutes"),
        ({"hold_minutes": 1, "window_seconds": 600}, "hold_minutes"),
        ({"levels": [1, 2], "ramp_minutes": 3.5, "window_seconds": 60}, "ramp_minutes"),
        ({"levels": []}, "levels"),
        ({"levels": [1, -1]}, "levels[1]"),
        ({"script": "no-such-script"}, "script"),
        ({"thresholds": ["TimeToWake: p99 <"]}, "thresholds[0]"),
        ({"thresholds": ["TimeToWake: p99 < 2s", "Step_*: wobble < 3"]}, "thresholds[1]"),
        ({"abort": {"rules": ["nonsense"]}}, "abort.rules[0]"),
        ({"dest": "ftp://host/x"}, "dest"),
        ({"dest": "s3:///prefix"}, "dest"),
        ({"name": "Bad Name"}, "name"),
        ({"population": {"kind": "crowd"}}, "population.kind"),
        ({"population": {"sessions": 10, "awake": 50}}, "population.awake"),
        ({"population": {"sessions": 10}}, "population.awake: awake (100) exceeds sessions (10)"),
        ({"window_seconds": "ten minutes"}, "window_seconds"),
        ({"hold_minutes": float("inf")}, "hold_minutes"),
        ({"levels": [1, "nan"]}, "levels.1"),
        ({"dest": "/a", "out": "/b"}, "cannot differ from out"),
        ({"target": {"substrate": "not-a-url"}}, "target.substrate"),
        ({"target": {"local_workers": 0}}, "target.local_workers"),
        ({"hold_minutes": 1, "bogus": 1}, "bogus"),
    ],
)
def test_bad_parameters_are_refused_naming_the_parameter(values, names):
    message = _refused(values)
    assert names in message, message


def test_a_campaign_is_run_params(tmp_path):
    params = parse_campaign(
        {
            "name": "nightly",
            "tag": "n1",
            "out": str(tmp_path),
            "seed": 9,
            "script": "smoke",
            "think_scale": 0.1,
            "hold_minutes": 0.5,
            "window_seconds": "10s",
            "population": {"kind": "turnover", "sessions": 12, "awake": 4, "target_rps": 2},
            "target": {"local_workers": 2},
        }
    )
    assert isinstance(params, RunParams)
    assert (params.name, params.tag, params.out, params.seed, params.script) == (
        "nightly",
        "n1",
        str(tmp_path),
        9,
        "smoke",
    )
    p = params.population
    assert (p.kind, p.sessions, p.awake, p.target_rps, p.level) == ("turnover", 12, 4, 2.0, 2.0)
    assert (params.hold_seconds, params.target.local_workers, params.think_scale) == (30.0, 2, 0.1)


def test_campaign_defaults_differ_from_the_engine_only_in_the_population():
    campaign, run = CampaignParams(), RunParams()
    p = campaign.population
    assert (p.kind, p.sessions, p.awake, p.target_rps) == ("turnover", 1000, 100, 5.0)
    r = run.population
    assert (r.kind, r.sessions) == ("closed", 10) and not hasattr(r, "awake")
    shared = {k: v for k, v in campaign.model_dump().items() if k in RunParams.model_fields}
    # The campaign's target has one field of its own (the flow's Secret block), unset.
    assert shared["target"].pop("token_secret") is None
    assert {**shared, "population": None} == {**run.model_dump(), "population": None}
    # A partial population keeps the campaign's other defaults.
    assert parse_campaign({"population": {"awake": 4}}).population.kind == "turnover"


@pytest.mark.parametrize(
    ("kind", "defaults"),
    [
        ("turnover", {"sessions": 1000, "awake": 100, "target_rps": 5.0}),
        ("cold-resume", {"sessions": 1000, "target_rps": 5.0}),
        ("spawn", {"sessions": 1000}),
        ("turns", {"sessions": 1000}),
    ],
)
def test_the_campaign_defaults_are_data_applied_where_the_kind_has_the_field(kind, defaults):
    population = parse_campaign({"population": {"kind": kind}}).population
    dumped = population.model_dump()
    assert {name: dumped.get(name) for name in defaults} == defaults
    assert set(dumped) == set(type(population).model_fields)  # nothing of another kind
    assert type(population) is type(RunParams(population={"kind": kind}).population)


def test_without_dest_the_run_stays_in_out(tmp_path):
    params = parse_campaign({"out": str(tmp_path)})
    assert params.dest is None and not params.is_s3 and params.destination == str(tmp_path)


def test_a_local_dest_is_where_the_run_is_written(tmp_path):
    params = parse_campaign({"dest": str(tmp_path)})
    assert params.out == params.destination == str(tmp_path)
    assert parse_campaign({"dest": "file:///x", "out": "file:///x"}).out == "file:///x"


def test_s3_destination_writes_the_local_copy_to_out(tmp_path):
    params = parse_campaign({"dest": "s3://bench/nightly", "out": str(tmp_path)})
    assert params.is_s3 and params.out == str(tmp_path)
    assert params.destination == "s3://bench/nightly"


def test_abort_rules_include_thresholds_marked_abort():
    params = parse_campaign(
        {
            "thresholds": ["TimeToWake: p99 < 2s", "Step_*: failure_ratio < 0.3 (abort)"],
            "abort": {"rules": ["TimeToWake: p99 < 10s"]},
        }
    )
    rules = params.abort_rules
    assert [r.text for r in rules] == [
        "TimeToWake: p99 < 10s",
        "Step_*: failure_ratio < 0.3 (abort)",
    ]
    assert all(r.abort for r in rules)


def test_settings_assign_field_paths_with_yaml_values():
    values = apply_settings(
        {"population": {"awake": 3}},
        [
            "hold_minutes=0.5",
            "population.sessions=20",
            "levels=[1, 1.5]",
            "name=x1",
            "target.substrate=http://127.0.0.1:9/",
        ],
    )
    assert values == {
        "hold_minutes": 0.5,
        "levels": [1, 1.5],
        "name": "x1",
        "population": {"awake": 3, "sessions": 20},
        "target": {"substrate": "http://127.0.0.1:9/"},
    }


@pytest.mark.parametrize("setting", ["hold_minutes", "=3", "name.inner=1"])
def test_malformed_settings_are_refused(setting):
    with pytest.raises(UsageError, match="--set"):
        apply_settings({"name": "x"}, [setting])


def test_presets_load_and_validate():
    assert {"nightly", "demo"} <= set(preset_names())
    nightly = load_preset("nightly")
    assert nightly.script == "coding-session" and nightly.population.kind == "turnover"
    assert nightly.hold_minutes == 60 and nightly.window_seconds == 600
    assert nightly.levels == [1.0] and nightly.search.enabled  # the hour, then the search
    capacity = load_preset("capacity")
    assert capacity.search.enabled and capacity.search_window_seconds < nightly.window_seconds
    demo = load_preset("demo")
    assert demo.script == "smoke" and demo.population.kind == "turnover"
    assert demo.hold_seconds <= 150
    # The path a real campaign takes is the one exercised every night and in CI: the ate
    # wire, here against the embedded substrate (no URL).
    for preset in (nightly, demo):
        assert preset.target.protocol == "ate" and preset.target.wire == "ate"
        assert preset.target.substrate is None
    # The release gate: candidate and reference side by side, 10 minutes, a 5 % margin.
    gate = load_preset("release-gate")
    assert gate.paired and gate.reference is not None and gate.reference.wire == "ate"
    assert gate.hold_seconds == 600 and gate.max_regression == 0.05
    assert gate.gate.paired_rule == "significant"


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_validates_with_its_population_kinds_own_fields(name):
    preset = load_preset(name)
    given = load_values(preset_path(name)).get("population", {})
    population = preset.population
    assert type(population) is KIND_PARAMS[given.get("kind", "turnover")]
    assert {key: getattr(population, key) for key in given} == given  # each one read
    # Its JSON form (--print-params, campaign.json) reads back as the same parameters.
    assert CampaignParams.model_validate_json(preset.model_dump_json()) == preset


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(UsageError, match="nightly"):
        load_preset("weekly")


def test_parameter_schema_is_a_form():
    schema = CampaignParams.model_json_schema()
    assert schema["properties"]["hold_minutes"]["exclusiveMinimum"] == 0
    # The population is a choice of kinds (anyOf, which the Prefect UI's form offers as one),
    # each kind's model with its kind as a constant and only its own fields.
    population = schema["properties"]["population"]
    assert population["discriminator"]["propertyName"] == "kind"
    kinds = {}
    for option in population["anyOf"]:
        model = schema["$defs"][option["$ref"].rpartition("/")[2]]
        kinds[model["properties"]["kind"]["const"]] = model
    assert set(kinds) == {"closed", "turnover", "turns", "spawn", "burst", "cold-resume"}
    assert "target_rps" in kinds["turnover"]["properties"]
    assert "target_rps" not in kinds["spawn"]["properties"]
    assert all(model["title"] == kind for kind, model in kinds.items())
    # The form opens on the campaign's own default: a turnover of 1000, 100 awake, 5 swaps/s.
    default = population["default"]
    assert (default["kind"], default["sessions"], default["awake"]) == ("turnover", 1000, 100)
    assert "run: closed" in population["description"]


def test_thresholds_are_parsed_once_and_the_campaign_reads_the_parsed_rules(monkeypatch):
    """The rules are parsed when the parameters are validated; Campaign reads those very
    rules (no second parse), and their JSON form is their text."""
    import types

    import agentsession_core.campaign.rules as rules
    import agentsession_core.judge.thresholds as thresholds
    from agentsession_core.campaign.campaign import Campaign

    params = parse_campaign(
        {
            "thresholds": ["TimeToWake: p99 < 2s", "Step_*: failure_ratio < 0.3 (abort)"],
            "abort": {"rules": ["TimeToWake: p99 < 10s"]},
            "search": {"threshold": "TimeToWake: p99 < 3s"},
        }
    )
    assert all(isinstance(t, thresholds.Threshold) for t in params.thresholds)

    def no_second_parse(*args, **kwargs):
        raise AssertionError("a threshold parsed again after validation")

    monkeypatch.setattr(thresholds, "parse_threshold", no_second_parse)
    monkeypatch.setattr(rules, "parse_threshold", no_second_parse)
    run = types.SimpleNamespace(finalizers=[], report_rules=None)
    campaign = Campaign(params, run)  # type: ignore[arg-type]
    assert campaign.thresholds[:2] == params.thresholds
    assert all(a is b for a, b in zip(campaign.thresholds, params.thresholds, strict=False))
    assert campaign.thresholds[2] is params.search.threshold  # the SLO judged in every window
    assert [r.text for r in campaign.abort_rules] == [
        "TimeToWake: p99 < 10s",
        "Step_*: failure_ratio < 0.3 (abort)",
    ]
    dumped = params.model_dump(mode="json")
    assert dumped["thresholds"] == ["TimeToWake: p99 < 2s", "Step_*: failure_ratio < 0.3 (abort)"]
    assert dumped["abort"]["rules"] == ["TimeToWake: p99 < 10s"]
    assert dumped["search"]["threshold"] == "TimeToWake: p99 < 3s"


def test_a_bad_threshold_is_refused_at_validation_in_one_line_naming_its_entry():
    with pytest.raises(UsageError) as caught:
        parse_campaign({"thresholds": ["TimeToWake: p99 < 2s", "Step_*: wobble < 3"]})
    line = str(caught.value)
    assert line.startswith("parameter thresholds[1]: unknown statistic 'wobble'"), line
    assert "\n" not in line
    with pytest.raises(UsageError, match=r"^parameter abort\.rules\[0\]: "):
        parse_campaign({"abort": {"rules": ["nonsense"]}})
