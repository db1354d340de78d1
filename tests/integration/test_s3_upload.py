"""upload_run against a real S3 endpoint over HTTP (moto's server mode on 127.0.0.1)."""

from __future__ import annotations

import hashlib
import os
import time

import orjson
import pytest

from agentsession_core.output.run_dir import RunDir
from agentsession_core.output.upload import (
    UploadError,
    list_objects,
    read_object,
    s3_client,
    upload_run,
)


@pytest.fixture(scope="module")
def endpoint(s3_server: str) -> str:
    s3_client(s3_server).create_bucket(Bucket="runs-bucket")
    return s3_server


@pytest.fixture
def run(tmp_path):
    run_dir = RunDir.create(str(tmp_path), "nightly", "n1", time.time())
    run_dir.write_text("logs.txt", "hello\n" * 1000)
    run_dir.write_bytes("report.html", os.urandom(200_000))
    run_dir.write_json("gate.json", {"verdict": "pass"})
    run_dir.write_manifest()
    return run_dir


def test_every_file_lands_with_its_manifest_sha256(endpoint, run, tmp_path):
    result = upload_run(
        run.path, "s3://runs-bucket/team/a", local_root=tmp_path, endpoint_url=endpoint
    )
    assert result.ok and result.files == 4
    assert result.location.startswith("s3://runs-bucket/team/a/runs/nightly/run_date=")
    manifest = orjson.loads((run.path / "manifest.json").read_bytes())
    assert list_objects(result.location, endpoint_url=endpoint) == sorted(
        [e["path"] for e in manifest["files"]] + ["manifest.json"]
    )
    for entry in manifest["files"]:
        body = read_object(f"{result.location}/{entry['path']}", endpoint_url=endpoint)
        assert (len(body), hashlib.sha256(body).hexdigest()) == (entry["size"], entry["sha256"])
    head = s3_client(endpoint).head_object(
        Bucket="runs-bucket", Key=result.location.split("/", 3)[3] + "/gate.json"
    )
    assert head["Metadata"]["sha256"] == manifest["files"][0]["sha256"]


def test_the_endpoint_comes_from_aws_endpoint_url(endpoint, run, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    result = upload_run(run.path, "s3://runs-bucket/env", local_root=tmp_path)
    assert read_object(f"{result.location}/gate.json") == (run.path / "gate.json").read_bytes()


def test_a_missing_bucket_fails_naming_the_object(endpoint, run, tmp_path):
    with pytest.raises(UploadError, match=r"s3://no-such-bucket/.*NoSuchBucket"):
        upload_run(run.path, "s3://no-such-bucket/x", local_root=tmp_path, endpoint_url=endpoint)


def test_reading_a_missing_key_says_no_such_key(endpoint):
    with pytest.raises(UploadError, match="NoSuchKey"):
        read_object("s3://runs-bucket/nothing/here.json", endpoint_url=endpoint)


def twin_runs(tmp_path, started: float) -> list[RunDir]:
    """Two runs with the same name, tag and second on two machines: the same relative
    layout under two local roots (each machine's exclusive directory is its own)."""
    runs = []
    for machine in ("a", "b"):
        run_dir = RunDir.create(str(tmp_path / machine), "nightly", "n1", started)
        run_dir.write_text("logs.txt", f"machine {machine}\n")
        run_dir.write_json("gate.json", {"verdict": "pass", "location": "?"})
        run_dir.write_manifest()
        runs.append(run_dir)
    return runs


def test_a_prefix_another_run_holds_is_never_written_into(endpoint, tmp_path):
    """Issue 18 row 10, the s3 case: the second run with the same prefix goes to
    run_tag=<tag>.2, its gate.json says so, and the first run's files are untouched."""
    first, second = twin_runs(tmp_path, time.time())
    dest = "s3://runs-bucket/twins"
    one = upload_run(first.path, dest, local_root=tmp_path / "a", endpoint_url=endpoint)
    meant = one.location
    gate = orjson.loads((second.path / "gate.json").read_bytes())
    gate["location"] = meant  # as the campaign writes it: where the run was meant to go
    second.write_json("gate.json", gate)
    second.write_manifest()
    two = upload_run(second.path, dest, local_root=tmp_path / "b", endpoint_url=endpoint)
    assert two.location == f"{meant}.2"
    assert read_object(f"{meant}/logs.txt", endpoint_url=endpoint) == b"machine a\n"
    assert read_object(f"{two.location}/logs.txt", endpoint_url=endpoint) == b"machine b\n"
    uploaded_gate = orjson.loads(read_object(f"{two.location}/gate.json", endpoint_url=endpoint))
    assert uploaded_gate["location"] == two.location
    assert list_objects(two.location, endpoint_url=endpoint) == sorted(
        ["gate.json", "logs.txt", "manifest.json"]
    )
    # A retry of an upload recognises its own claim: same prefix, not a third one.
    again = upload_run(second.path, dest, local_root=tmp_path / "b", endpoint_url=endpoint)
    assert again.location == two.location
    assert list_objects(f"{meant}.3", endpoint_url=endpoint) == []


def test_a_prefix_with_a_run_from_before_claims_is_not_written_into(endpoint, tmp_path):
    first, second = twin_runs(tmp_path, time.time() + 7)
    dest = "s3://runs-bucket/older"
    meant = upload_run(first.path, dest, local_root=tmp_path / "a", endpoint_url=endpoint).location
    bucket, key = meant.removeprefix("s3://").split("/", 1)
    s3_client(endpoint).delete_object(Bucket=bucket, Key=f"{key}.claim")  # as before claims
    two = upload_run(second.path, dest, local_root=tmp_path / "b", endpoint_url=endpoint)
    assert two.location == f"{meant}.2"
    assert read_object(f"{meant}/logs.txt", endpoint_url=endpoint) == b"machine a\n"
