"""Upload: layout under the destination, manifest checks, failure recorded locally."""

from __future__ import annotations

import hashlib

import orjson
import pytest

from agentsession_core.output.run_dir import RunDir, verify_manifest
from agentsession_core.output.upload import (
    UploadError,
    read_object,
    record_failed_upload,
    run_location,
    split_s3,
    upload_run,
)

STARTED = 1_790_000_000.0  # 2026-09-21 UTC


@pytest.fixture
def run(tmp_path):
    run_dir = RunDir.create(str(tmp_path / "art"), "demo", "t1", STARTED)
    run_dir.write_text("logs.txt", "line\n")
    run_dir.write_json("status.json", {"status": "completed"})
    run_dir.write_manifest()
    return run_dir


def test_s3_location_keeps_the_upstream_layout(run, tmp_path):
    url = run_location("s3://bench/nightly/", run.path, tmp_path / "art")
    assert url == ("s3://bench/nightly/runs/demo/run_date=2026-09-21/run_ts=1790000000/run_tag=t1")
    assert run_location("s3://bench", run.path, tmp_path / "art").startswith("s3://bench/runs/")


def test_split_s3_refuses_other_urls():
    assert split_s3("s3://b/x/y/") == ("b", "x/y")
    for url in ("http://b/x", "s3:///x"):
        with pytest.raises(UploadError):
            split_s3(url)


def test_local_destination_only_verifies(run, tmp_path):
    result = upload_run(run.path, str(tmp_path / "art"), local_root=tmp_path / "art")
    assert result.ok and result.location == str(run.path) and result.files == 2


def test_a_tampered_local_copy_is_not_uploaded(run, tmp_path):
    (run.path / "logs.txt").write_text("changed\n")
    with pytest.raises(UploadError, match=r"logs\.txt"):
        upload_run(
            run.path, "s3://bench/x", local_root=tmp_path / "art", endpoint_url="http://127.0.0.1:9"
        )


def test_a_run_without_manifest_is_refused(tmp_path):
    bare = RunDir.create(str(tmp_path), "demo", "t1", STARTED)
    with pytest.raises(UploadError, match="manifest"):
        upload_run(bare.path, "s3://bench/x", local_root=tmp_path)


def test_run_outside_local_root_is_refused(run, tmp_path):
    with pytest.raises(UploadError, match="not under"):
        run_location("s3://bench/x", run.path, tmp_path / "elsewhere")


def test_failed_upload_is_recorded_and_the_copy_still_verifies(run):
    record_failed_upload(run.path, "s3://bench/x", "connection refused", attempts=3)
    status = orjson.loads((run.path / "status.json").read_bytes())
    assert status["status"] == "completed"
    assert status["upload"]["ok"] is False and status["upload"]["attempts"] == 3
    assert status["upload"]["local_copy"] == str(run.path)
    assert verify_manifest(run.path) == []


def test_read_object_reads_local_files(run):
    data = read_object(f"file://{run.path}/logs.txt")
    assert hashlib.sha256(data).hexdigest() == hashlib.sha256(b"line\n").hexdigest()
    with pytest.raises(UploadError, match="cannot read"):
        read_object(str(run.path / "missing.json"))
