"""deployments/prefect.yaml without a server: entrypoints import, schedules parse,
parameters validate as CampaignParams and the nightly ones match the preset; the
`baseline-accept` deployment is ad hoc, with the command's parameters."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.preset_files import load_preset
from flows.serve import PREFECT_YAML, build_deployments, deployment_specs

KEY = re.compile(r"^[a-z0-9-]*$")


@pytest.fixture(scope="module")
def document() -> dict:
    return yaml.safe_load(PREFECT_YAML.read_text())


DEPLOYMENTS = {"nightly", "adhoc", "verdict-report", "baseline-accept"}


def test_every_deployment_is_declared_with_no_pull_step(document):
    assert {d["name"] for d in document["deployments"]} == DEPLOYMENTS
    assert document["pull"] == []


def test_every_entrypoint_imports_a_flow(document):
    from prefect import Flow

    for spec in document["deployments"]:
        module, _, attr = spec["entrypoint"].rpartition(".")
        assert ":" not in spec["entrypoint"], "module-path entrypoints only"
        flow = getattr(importlib.import_module(module), attr)
        assert isinstance(flow, Flow), spec["entrypoint"]


def test_every_schedule_parses(document):
    from prefect.client.schemas.schedules import CronSchedule

    for spec in document["deployments"]:
        for schedule in spec.get("schedules") or []:
            parsed = CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])
            assert parsed.timezone == "UTC"
            assert KEY.match(schedule["slug"])
    nightly = deployment_specs()["nightly"]
    assert len(nightly["schedules"]) == 1


def test_both_campaign_deployments_run_one_at_a_time(document):
    for spec in document["deployments"]:
        if spec["entrypoint"] == "flows.campaign.campaign":
            assert spec["concurrency_limit"]["limit"] == 1


def test_parameters_validate_and_nightly_matches_its_preset(document):
    specs = deployment_specs()
    nightly = CampaignParams.model_validate(specs["nightly"]["parameters"]["params"])
    assert nightly == load_preset("nightly")
    assert nightly.script == "coding-session" and nightly.population.kind == "turnover"
    assert [w.level for w in nightly.windows()] == [1.0] * 6
    assert nightly.search.enabled and nightly.search.max_level == 16
    assert not specs["adhoc"].get("parameters")


def test_serve_builds_every_deployment_offline():
    deployments = {d.name: d for d in build_deployments()}
    assert set(deployments) == DEPLOYMENTS
    nightly = deployments["nightly"]
    assert nightly.schedules[0].schedule.cron == "0 2 * * *"
    assert nightly.concurrency_limit == 1
    assert nightly.parameters["params"]["hold_minutes"] == 60
    assert deployments["adhoc"].schedules in (None, [])


def test_the_flow_form_is_campaign_params():
    from prefect.utilities.callables import parameter_schema

    from flows.campaign import campaign

    schema = parameter_schema(campaign.fn).model_dump_for_openapi()
    params = schema["properties"]["params"]
    assert "CampaignParams" in str(params)
    definitions = schema.get("definitions") or schema.get("$defs")
    assert "hold_minutes" in definitions["CampaignParams"]["properties"]


def test_artifact_keys_are_prefect_keys():
    from flows.baseline_accept import NO_CAMPAIGN
    from tasks.publish import artifact_key

    for what in ("windows", "report", "hold-progress", "gate", "accepted"):
        assert KEY.match(artifact_key(load_preset("nightly").name, what))
    assert KEY.match(artifact_key(NO_CAMPAIGN, "accepted"))


def test_the_form_shows_the_generator_shards_and_cluster():
    from prefect.utilities.callables import parameter_schema

    from flows.campaign import campaign

    schema = parameter_schema(campaign.fn).model_dump_for_openapi()
    definitions = schema.get("definitions") or schema.get("$defs")
    assert "generator" in definitions["CampaignParams"]["properties"]
    generator = definitions["GeneratorParams"]["properties"]
    assert {"shards", "cluster"} <= set(generator)
    kinds = generator["shards"]["anyOf"]
    assert {"type": "integer", "minimum": 1, "maximum": 1024} in kinds
    assert {"const": "auto", "type": "string"} in kinds


def test_the_dask_example_deployment_validates():
    path = PREFECT_YAML.parent / "prefect-dask.yaml"
    if not path.is_file():  # an installed wheel carries prefect.yaml only
        pytest.skip("deployments/prefect-dask.yaml is in the checkout only")
    specs = deployment_specs(path)
    spec = specs["nightly-scaled"]
    module, _, attr = spec["entrypoint"].rpartition(".")
    assert getattr(importlib.import_module(module), attr).name == "campaign"
    params = CampaignParams.model_validate(spec["parameters"]["params"])
    assert params.generator.shards == "auto"
    assert params.generator.cluster == "tcp://dask-scheduler:8786"


def test_the_report_trigger_fires_on_a_failed_verdict_only():
    """The example automation parses as Prefect's deployment trigger and matches the
    resource the flow's verdict event carries when, and only when, the verdict is fail."""
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    from flows.verdict_event import VERDICT_EVENT, verdict_event
    from flows.verdict_report import verdict_report

    report = {d.name: d for d in build_deployments()}["verdict-report"]
    (trigger,) = report.triggers
    assert isinstance(trigger, DeploymentEventTrigger)
    assert trigger.expect == {VERDICT_EVENT}
    template_keys = set(trigger.parameters or {})
    assert template_keys <= set(verdict_report.parameters.properties)
    assert "campaign" in template_keys

    from agentsession_core.output.upload import UploadResult

    def labels(verdict: str) -> dict[str, str]:
        event = verdict_event(
            {"verdict": verdict, "reason": "r"},
            name="nightly",
            tag="t",
            target="sub.example:443",
            run_dir=Path("/runs/x"),
            upload=UploadResult(True, "s3://b/p", "/runs/x"),
        )
        return event["resource"]

    def matches(resource: dict[str, str]) -> bool:
        from prefect.events.schemas.events import Resource, ResourceSpecification

        return ResourceSpecification.model_validate(trigger.match).matches(Resource(resource))

    assert [v for v in ("pass", "fail", "void") if matches(labels(v))] == ["fail"]


def test_baseline_accept_is_an_ad_hoc_deployment_with_the_commands_parameters():
    """`baseline-accept` runs only when started (an acceptance is a person's decision), on
    the load-generator pool, and its form asks what `baseline accept` asks: the run and a
    reason (required), who and the S3 endpoint (optional)."""
    spec = deployment_specs()["baseline-accept"]
    assert spec["entrypoint"] == "flows.baseline_accept.baseline_accept"
    assert spec["tags"] == ["agentsession", "baseline"]
    assert spec["work_pool"]["name"] == "loadgen"
    assert not spec.get("schedules") and not spec.get("triggers") and not spec.get("parameters")
    accept = {d.name: d for d in build_deployments()}["baseline-accept"]
    assert accept.schedules in (None, []) and not accept.triggers
    assert accept.tags == ["agentsession", "baseline"]
    from flows.baseline_accept import baseline_accept

    schema = baseline_accept.parameters
    assert set(schema.properties) == {"run", "reason", "by", "endpoint_url"}
    assert sorted(schema.required) == ["reason", "run"]
    assert "s3://" in schema.properties["run"]["description"]
