"""The target's global concurrency limit name and the verdict event, without a Prefect API."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentsession_core.engine.params import TargetParams
from agentsession_core.output.upload import UploadResult
from flows.target_limit import limit_name, target_id
from flows.verdict_event import VERDICT_EVENT, verdict_event

PLAIN = re.compile(r"^[a-z0-9-]+$")  # no quoting in an API path or a shell


@pytest.mark.parametrize(
    ("substrate", "ident", "name"),
    [
        ("http://127.0.0.1:8080", "127.0.0.1:8080", "agentsession-target-127-0-0-1-8080"),
        (
            "https://Sub.Example.com/api",
            "sub.example.com:443",
            "agentsession-target-sub-example-com-443",
        ),
        ("grpcs://ate.internal", "ate.internal:443", "agentsession-target-ate-internal-443"),
        ("grpc://ate.internal:9090", "ate.internal:9090", "agentsession-target-ate-internal-9090"),
        ("http://user:secret@host:81", "host:81", "agentsession-target-host-81"),
    ],
)
def test_a_substrate_url_names_its_limit_by_host_and_port(substrate, ident, name):
    target = TargetParams(substrate=substrate, router="http://r:1" if "grpc" in substrate else None)
    assert target_id(target) == ident
    assert limit_name(target_id(target)) == name and PLAIN.match(name)
    assert "secret" not in name


def test_the_embedded_substrate_is_named_after_the_machine():
    assert target_id(TargetParams(), hostname="Box_7.lan") == "local:Box_7.lan"
    assert limit_name("local:Box_7.lan") == "agentsession-target-local-box-7-lan"


def test_the_json_and_ate_wires_of_one_address_share_a_limit():
    json = TargetParams(substrate="http://sub:7000")
    ate = TargetParams(substrate="grpc://sub:7000", router="http://sub:7001")
    assert limit_name(target_id(json)) == limit_name(target_id(ate))


def test_the_verdict_event_carries_gate_json_and_where_the_files_are():
    doc = {"verdict": "fail", "reason": "window 1 missed", "baseline": {"regressions": ["p99"]}}
    uploaded = UploadResult(True, "s3://b/runs/x", "/tmp/x")
    event = verdict_event(
        doc, name="nightly", tag="n1", target="sub:443", run_dir=Path("/tmp/x"), upload=uploaded
    )
    assert event["event"] == VERDICT_EVENT
    assert event["resource"] == {
        "prefect.resource.id": "agentsession.campaign.nightly",
        "prefect.resource.name": "nightly",
        "agentsession.target": "sub:443",
        "agentsession.verdict": "fail",
    }
    assert event["related"][0]["prefect.resource.role"] == "target"
    assert event["payload"] == {
        "verdict": "fail",
        "reason": "window 1 missed",
        "regressions": ["p99"],
        "location": "s3://b/runs/x",
        "uploaded": True,
        "run_dir": "/tmp/x",
        "tag": "n1",
    }
    failed = UploadResult(False, "s3://b/runs/x", "/tmp/x", error="down")
    event = verdict_event(
        {"verdict": "void"}, name="n", tag="t", target="t:1", run_dir=Path("/tmp/x"), upload=failed
    )
    assert event["payload"]["location"] == "/tmp/x"  # the local copy: nothing was uploaded
    assert event["payload"]["regressions"] == [] and event["payload"]["reason"] == ""
