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
