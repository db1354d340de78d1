"""RunParams: bad values are refused once, naming the dotted parameter path; durations and
finite floats everywhere; levels per population."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import (
    DURATION,
    PopulationParams,
    RunParams,
    parse,
    parse_params,
)
from agentsession_core.engine.population_params import KIND_PARAMS, ClosedParams, TurnsParams
from agentsession_core.errors import UsageError
from agentsession_core.judge.conditions import conditions


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"population": {"sessions": 0}}, "parameter population.sessions:"),
        ({"population": {"kind": "open"}}, "parameter population.kind:"),
        ({"target": {"template": "glutton"}}, "parameter target.template: must be NAMESPACE/NAME"),
        ({"target": {"substrate": "ftp://x"}}, "parameter target.substrate:"),
        ({"name": "Bad Name"}, "parameter name:"),
        ({"tag": "-x"}, "parameter tag:"),
        ({"population": {"lifecycle_mode": "hibernate"}}, "parameter population.lifecycle_mode:"),
        ({"population": {"resume_mode": "eager"}}, "parameter population.resume_mode:"),
        ({"population": {"spawn_rate": 0}}, "parameter population.spawn_rate:"),
        ({"think_scale": -1}, "parameter think_scale:"),
        ({"metrics_port": 70000}, "parameter metrics_port:"),
        ({"cleanup": {"concurrency": 0}}, "parameter cleanup.concurrency:"),
        ({"population": {"sesions": 3}}, "parameter population.sesions: Extra inputs"),
        ({"sessions": 3}, "parameter sessions: Extra inputs are not permitted"),
    ],
)
def test_bad_values_name_the_parameter(values: dict, where: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_params(values)
    message = str(caught.value)
    assert message.startswith(where), message
    assert "\n" not in message and caught.value.exit_code == 2


def test_the_source_prefixes_the_message() -> None:
    with pytest.raises(UsageError, match=r"^run.yaml: parameter population.sessions:"):
        parse(RunParams, {"population": {"sessions": 0}}, source="run.yaml")


def test_awake_may_not_exceed_sessions_in_turnover() -> None:
    with pytest.raises(
        UsageError, match=r"^parameter population.awake: awake \(5\) exceeds sessions \(4\)$"
    ):
        parse_params({"population": {"kind": "turnover", "sessions": 4, "awake": 5}})


@pytest.mark.parametrize(
    ("population", "line"),
    [
        (
            {"kind": "spawn", "sessions": 10, "target_rps": 5},
            "parameter population.target_rps: spawn has no target_rps "
            "(it is turnover's, cold-resume's)",
        ),
        (
            {"sessions": 4, "awake": 2},
            "parameter population.awake: closed has no awake (it is turnover's)",
        ),
        (
            {"kind": "turnover", "cohort_percentiles": [50]},
            "parameter population.cohort_percentiles: turnover has no cohort_percentiles "
            "(it is spawn's, burst's)",
        ),
        (
            {"kind": "burst", "turns_per_hour": 3},
            "parameter population.turns_per_hour: burst has no turns_per_hour (it is turns')",
        ),
    ],
)
def test_a_field_of_another_kind_is_refused_naming_the_field_and_the_kind(
    population: dict[str, Any], line: str
) -> None:
    with pytest.raises(UsageError) as caught:
        parse_params({"population": population})
    assert str(caught.value) == line
    with pytest.raises(ValidationError, match=re.escape(line.split(": ", 1)[1])):
        PopulationParams(**population)  # the public name builds the kind's model, which refuses


def test_each_kind_has_only_its_own_fields() -> None:
    shared = set(PopulationParams.model_fields)
    own = {kind: set(model.model_fields) - shared for kind, model in KIND_PARAMS.items()}
    assert own == {
        "closed": set(),
        "turnover": {
            "awake",
            "target_rps",
            "fill_concurrency",
            "fill_deadline_seconds",
            "catch_up_ratio",
            "swap_pacing",
        },
        "turns": {"turns_per_hour", "turn_mean_seconds"},
        "spawn": {
            "at_once",
            "cohort_period_seconds",
            "cohort_deadline_seconds",
            "cohort_percentiles",
        },
        "burst": {"cohort_period_seconds", "cohort_deadline_seconds", "cohort_percentiles"},
        "cold-resume": {"target_rps", "swap_pacing"},
    }
    assert type(parse_params({}).population) is ClosedParams  # kind left out: closed


def test_level_is_the_population_knob() -> None:
    assert PopulationParams(kind="closed", sessions=7).level == 7.0
    assert PopulationParams(kind="turnover", target_rps=2.5).level == 2.5
    assert PopulationParams(kind="turns", turns_per_hour=12).level == 12.0


def test_template_ref_and_assignment_is_validated() -> None:
    params = RunParams(target={"template": "test/small"})
    assert params.target.template_ref == ("test", "small")
    with pytest.raises(ValueError):
        params.population.sessions = -1
    with pytest.raises(ValueError):
        params.name = "Bad Name"


@pytest.mark.parametrize(
    ("text", "seconds"), [("2s", 2.0), ("500ms", 0.5), ("10m", 600.0), ("1h30m", 5400.0)]
)
def test_seconds_take_durations(text: str, seconds: float) -> None:
    params = parse_params(
        {
            "population": {
                "kind": "turns",
                "registration_quiet_seconds": text,
                "turn_mean_seconds": text,
            },
            "target": {"request_timeout_seconds": text},
            "cleanup": {"timeout_seconds": text, "stop_grace_seconds": text},
        }
    )
    assert params.population.registration_quiet_seconds == seconds
    assert isinstance(params.population, TurnsParams)
    assert params.population.turn_mean_seconds == seconds
    assert params.target.request_timeout_seconds == seconds
    assert params.cleanup.timeout_seconds == params.cleanup.stop_grace_seconds == seconds
    plain = parse_params({"population": {"kind": "turns", "turn_mean_seconds": "2.5"}})
    assert isinstance(plain.population, TurnsParams)
    assert plain.population.turn_mean_seconds == 2.5


@pytest.mark.parametrize("bad", ["ten", "-2s", "2 parsecs"])
def test_bad_durations_name_the_parameter(bad: str) -> None:
    with pytest.raises(UsageError, match=r"^parameter population.registration_quiet_seconds:"):
        parse_params({"population": {"registration_quiet_seconds": bad}})


@pytest.mark.parametrize(
    ("given", "size"), [("64Mi", 64 * 2**20), ("1G", 10**9), ("4096", 4096), (2**20, 2**20)]
)
def test_the_answer_cap_takes_sizes(given: str | int, size: int) -> None:
    assert parse_params({"target": {"max_answer_bytes": given}}).target.max_answer_bytes == size


def test_the_answer_cap_defaults_to_64_mib() -> None:
    assert parse_params({}).target.max_answer_bytes == 64 * 2**20


@pytest.mark.parametrize("bad", ["lots", "0", "-1Mi", "1.5", 100, "17Gi", 1.5])
def test_a_bad_answer_cap_names_the_parameter(bad: str | int | float) -> None:
    with pytest.raises(UsageError, match=r"^parameter target.max_answer_bytes:"):
        parse_params({"target": {"max_answer_bytes": bad}})


def _float_leaves(
    model: type[BaseModel], prefix: str = "", kind: dict[str, Any] | None = None
) -> list[tuple[str, Any, dict[str, Any]]]:
    """(path, field, the section's other values: a population kind's `kind`) per float."""
    found = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += _float_leaves(annotation, f"{prefix}{name}.", kind)
        elif name == "population":  # one model per kind
            for each, member in KIND_PARAMS.items():
                found += _float_leaves(member, f"{prefix}{name}.", {"kind": each})
        elif annotation in (float, float | None):
            found.append((f"{prefix}{name}", field, kind or {}))
    return found


@pytest.mark.parametrize("model", [RunParams, CampaignParams])
def test_every_float_refuses_inf_and_nan_and_every_seconds_field_takes_durations(
    model: type[BaseModel],
) -> None:
    leaves = _float_leaves(model)
    assert len(leaves) >= 9
    for path, field, section in leaves:
        assert path.endswith("_seconds") == any(m is DURATION for m in field.metadata), path
        for bad in (math.inf, math.nan, "inf", "-inf", "nan"):
            values: dict[str, Any] = {}
            node = values
            *groups, leaf = path.split(".")
            for group in groups:
                node = node.setdefault(group, {})
            node.update(section)
            node[leaf] = bad
            with pytest.raises(UsageError, match=f"parameter {path}: Input should be a finite"):
                parse(model, values)


# ---- the wire form (docs/SPEC.md §2) ------------------------------------------------------

ATE = {"substrate": "grpc://api.test:8443", "router": "http://router.test"}


@pytest.mark.parametrize(
    ("target", "wire"),
    [
        ({}, "ate"),  # the embedded local substrate, over its ateapi.Control endpoint
        ({"protocol": "ate"}, "ate"),
        ({"protocol": "json"}, "json"),  # the embedded one, over its JSON control API
        ({"substrate": "http://127.0.0.1:8080"}, "json"),
        ({"substrate": "https://sub.test", "protocol": "json"}, "json"),
        (ATE, "ate"),
        ({**ATE, "substrate": "grpcs://api.test"}, "ate"),
        ({**ATE, "protocol": "ate"}, "ate"),
    ],
)
def test_the_wire_form_comes_from_protocol_or_the_url_scheme(target: dict, wire: str) -> None:
    assert parse_params({"target": target}).target.wire == wire


def test_ate_tls_and_token_file_fields() -> None:
    target = parse_params(
        {
            "target": {
                **ATE,
                "substrate": "grpcs://api.test",
                "ca_file": "/run/ca.crt",
                "cert_file": "/run/client.pem",
                "key_file": "/run/client.key",
                "token_file": "/run/token",
            }
        }
    ).target
    assert target.server_name == "api.ate-system.svc"  # the API server certificate's name
    assert (target.ca_file, target.cert_file, target.key_file) == (
        "/run/ca.crt",
        "/run/client.pem",
        "/run/client.key",
    )
    assert target.token_file == "/run/token"


@pytest.mark.parametrize(
    ("target", "population", "where"),
    [
        ({"substrate": "grpc://api.test:1"}, {}, "parameter target.router: required"),
        (
            {**ATE, "router_ca_file": "ca"},
            {},
            "parameter target.router_ca_file: router TLS settings apply to an https:// router",
        ),
        (
            {**ATE, "router": "https://r.test", "router_key_file": "k"},
            {},
            "parameter target.router_key_file: router mTLS needs both",
        ),
        ({**ATE, "router": "grpc://r.test:1"}, {}, "parameter target.router: 'grpc://"),
        ({"substrate": "http://h:1", "protocol": "ate"}, {}, "parameter target.protocol: ate's"),
        ({**ATE, "protocol": "json"}, {}, "parameter target.protocol: json needs"),
        ({**ATE, "ca_file": "ca"}, {}, "parameter target.ca_file: TLS files apply to a grpcs://"),
        ({**ATE, "substrate": "grpcs://a", "cert_file": "c"}, {}, "parameter target.key_file"),
        ({**ATE, "substrate": "grpcs://a", "key_file": "k"}, {}, "parameter target.key_file"),
        ({**ATE, "token": "t", "token_file": "f"}, {}, "parameter target.token_file: give"),
        ({"protocol": "json", "token_file": "f"}, {}, "parameter target.token_file: a token"),
        ({"token_file": "f"}, {}, "target.token_file: a token file is for a remote control API"),
        ({"protocol": "xml"}, {}, "parameter target.protocol:"),
        (ATE, {"lifecycle_mode": "suspend-async"}, "population.lifecycle_mode suspend-async"),
        ({"protocol": "ate"}, {"lifecycle_mode": "suspend-async"}, "SuspendActorAsync"),
    ],
)
def test_ate_parameters_are_refused_naming_the_field(
    target: dict, population: dict, where: str
) -> None:
    with pytest.raises(UsageError, match=re.escape(where)):
        parse_params({"target": target, "population": population})


def test_suspend_async_stays_on_the_json_wire() -> None:
    params = parse_params({"population": {"lifecycle_mode": "suspend-async"}})
    assert params.target.wire == "json"
    with pytest.raises(UsageError, match="SuspendActorAsync"):  # campaigns inherit the rule
        parse(CampaignParams, {"target": ATE, "population": {"lifecycle_mode": "suspend-async"}})
    # Only the json wire has SuspendActorAsync: an embedded reference speaks it too, a remote
    # ate reference is refused naming its arm.
    params = parse_params(
        {"population": {"lifecycle_mode": "suspend-async"}, "reference": "embedded"}
    )
    assert params.reference is not None and params.reference.protocol == "json"
    with pytest.raises(UsageError, match=r"reference\.protocol ate"):
        parse_params({"population": {"lifecycle_mode": "suspend-async"}, "reference": ATE})


@pytest.mark.parametrize(
    ("target", "population", "wire"),
    [
        ({}, {}, "ate"),
        ({}, {"lifecycle_mode": "suspend-async"}, "json"),
        ({"protocol": "json"}, {}, "json"),
        ({"substrate": "http://127.0.0.1:8080"}, {}, "json"),
        (ATE, {}, "ate"),
    ],
)
def test_a_run_records_the_wire_it_speaks(target: dict, population: dict, wire: str) -> None:
    # campaign.json holds the dump: a reader takes the wire from it, never from today's
    # default, and the dump read back speaks the same wire.
    dumped = parse_params({"target": target, "population": population}).model_dump(mode="json")
    assert dumped["target"]["protocol"] == wire
    assert conditions(dumped)["wire"] == wire
    assert parse_params(dumped).target.wire == wire


def test_a_stored_run_from_before_keeps_its_wire() -> None:
    # Runs from before the embedded substrate spoke ate recorded no protocol: they spoke json.
    old = {"target": {"substrate": None, "protocol": None}, "population": {"kind": "closed"}}
    assert conditions(old)["wire"] == "json"
    new = parse_params({"population": {"kind": "closed"}}).model_dump(mode="json")
    assert conditions(new)["wire"] == "ate"
