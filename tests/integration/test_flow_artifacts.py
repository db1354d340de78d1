"""The campaign flow's artifacts, under Prefect's test harness: the run directory it uploads
to an S3 endpoint served over HTTP (moto's server mode on 127.0.0.1) under the upstream
layout, the local copy it keeps when S3 is down, and what it writes (or does not) when it
cannot start: an unreachable substrate, an `out` nobody can write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.output.upload import list_objects, read_object, s3_client
from flows.credentials import TOKEN_ENV
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration import flow_harness
from tests.integration.conftest import TOKEN
from tests.integration.flow_harness import (
    TEST_TIMEOUT_S,
    closed_port,
    on_substrate,
    prefect_console,
    run_flow,
    small_campaign,
    task_runs,
    verdict_events,
)
from tests.integration.mounts import tmpfs

pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)
prefect_api = flow_harness.prefect_api  # this module's own Prefect API
BUCKET = "campaign-runs"


@pytest.fixture(scope="module")
def s3_endpoint(s3_server: str) -> str:
    s3_client(s3_server).create_bucket(Bucket=BUCKET)
    return s3_server


async def test_flow_uploads_to_s3_under_the_upstream_layout(
    prefect_api, substrate: LocalSubstrateProcess, s3_endpoint, tmp_path, monkeypatch
):
    import tasks.hold

    # Watch the progress artifact move inside windows (a spy that still calls Prefect).
    published: list[float] = []
    update = tasks.hold.aupdate_progress_artifact

    async def spy(artifact_id, progress, **kwargs):
        published.append(progress)
        return await update(artifact_id, progress, **kwargs)

    monkeypatch.setattr(tasks.hold, "PROGRESS_EVERY_S", 0.2)
    monkeypatch.setattr(tasks.hold, "aupdate_progress_artifact", spy)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    values = small_campaign(
        tmp_path,
        dest=f"s3://{BUCKET}/nightly",
        out=str(tmp_path / "local"),
        upload={"endpoint_url": s3_endpoint},
    )
    state = await run_flow(on_substrate(values, substrate))
    # Two 3 s windows: it moved inside one (a window's own ticks run from 0 to its end,
    # 50 % and 100 % being the ends of the two), and ends at 100 %.
    assert [p for p in published if p not in (0.0, 50.0, 100.0)], published
    assert published[-1] == 100.0, published
    assert state.is_completed(), state
    result = await state.result()
    run_dir = Path(result["run_dir"])
    assert result["run_status"] == "completed" and result["upload"]["ok"] is True
    relative = run_dir.relative_to(tmp_path / "local").as_posix()
    assert relative.startswith("runs/ci/run_date=") and relative.endswith("/run_tag=flow")
    assert result["location"] == f"s3://{BUCKET}/nightly/{relative}"

    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    listed = set(list_objects(result["location"], endpoint_url=s3_endpoint))
    assert listed == {e["path"] for e in manifest["files"]} | {"manifest.json"}
    for entry in manifest["files"]:
        body = read_object(f"{result['location']}/{entry['path']}", endpoint_url=s3_endpoint)
        assert hashlib.sha256(body).hexdigest() == entry["sha256"], entry["path"]
    assert (
        read_object(f"{result['location']}/manifest.json", endpoint_url=s3_endpoint)
        == (run_dir / "manifest.json").read_bytes()
    )

    for name in (
        "status.json",
        "campaign.json",
        "script.yaml",
        "stats.csv",
        "failures.csv",
        "stats_history.csv",
        "stats.jsonl",
        "windows.jsonl",
        "gate.json",
        "logs.txt",
    ):
        assert (run_dir / name).is_file(), name
    windows = (run_dir / "windows.jsonl").read_text().splitlines()
    assert [orjson.loads(w)["index"] for w in windows] == [0, 1]
    first, second = map(orjson.loads, windows)
    assert first["end_unix"] == second["start_unix"]  # windows tile the hold: no lost second
    step_rows = [
        r
        for r in map(orjson.loads, (run_dir / "stats.jsonl").read_text().splitlines())
        if r["metric"] == "step_window"
    ]
    assert len(step_rows) == 2
    gate = orjson.loads((run_dir / "gate.json").read_bytes())
    assert gate["verdict"] == result["verdict"] and len(gate["windows"]) == 2

    runs = await task_runs(state)
    assert {"hold-0", "hold-1"} <= set(runs)
    from prefect.artifacts import Artifact

    table = await Artifact.aget("ci-windows")
    assert table is not None and table.type == "table"
    assert (await Artifact.aget("ci-gate")).type == "markdown"
    assert (await Artifact.aget("ci-hold-progress")).data == 100.0
    link = await Artifact.aget("ci-report")
    assert result["location"] in link.data


async def test_s3_down_keeps_the_local_copy_retries_and_says_so(
    prefect_api, substrate: LocalSubstrateProcess, tmp_path, aws_credentials, monkeypatch
):
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    dead = f"http://127.0.0.1:{closed_port()}"
    values = small_campaign(
        tmp_path,
        dest=f"s3://{BUCKET}/nightly",
        out=str(tmp_path / "local"),
        hold_minutes=0.05,
        upload={"endpoint_url": dead, "attempts": 3},
    )
    with prefect_console() as console:
        state = await run_flow(on_substrate(values, substrate))
    assert state.is_completed(), state  # the campaign reached its verdict
    result = await state.result()
    upload = result["upload"]
    assert upload["ok"] is False and upload["attempts"] == 3 and dead in upload["error"]
    run_dir = Path(result["run_dir"])
    assert upload["local_dir"] == str(run_dir)
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["upload"]["ok"] is False and status["upload"]["local_copy"] == str(run_dir)
    assert verify_manifest(run_dir) == []
    runs = await task_runs(state)
    upload_runs = [count for name, count in runs.items() if name.startswith("upload")]
    assert upload_runs == [3]
    # Handled, so said in one line: no traceback from Prefect's task logging (issue 18).
    printed = console.getvalue()
    assert "Traceback" not in printed, printed[-5000:]
    said = [line for line in printed.splitlines() if "upload to s3://" in line]
    assert len(said) == 1 and "failed after 3 attempts" in said[0], said
    assert "local copy kept at" in said[0] and dead in said[0], said


@pytest.fixture(params=["read-only", "a-file"])
def unwritable_out(request, tmp_path: Path) -> Iterator[Path]:
    """An `out` no run directory can be made in: a read-only filesystem (a tmpfs mounted ro:
    the tests run as root, for whom a chmod changes nothing), or a file where the directory
    should be."""
    if request.param == "a-file":
        (tmp_path / "out").write_text("not a directory\n")
        yield tmp_path / "out"
        return
    with tmpfs(tmp_path / "ro", "ro,size=16k") as mount:
        yield mount


async def test_an_out_that_cannot_be_written_fails_the_campaign_in_one_line(
    prefect_api, tmp_path, unwritable_out
):
    """Failed (`agentsession campaign` exits 1), not void (exit 0): with no run directory
    there is no verdict to read, and a release gate must not take "the benchmark could not
    write its results" for a pass (docs/SPEC.md §6.6)."""
    with prefect_console() as console:
        state = await run_flow(small_campaign(tmp_path, out=str(unwritable_out / "art")))
    assert state.is_failed(), state
    why = "Read-only file system" if unwritable_out.name == "ro" else "Not a directory"
    assert state.message.startswith("campaign not started: ") and why in state.message, state
    printed = console.getvalue()
    assert "Traceback" not in printed, printed[-5000:]
    # Said once; Prefect's own closing line repeats the flow run's Failed message.
    lines = [line for line in printed.splitlines() if "Finished in state Failed" not in line]
    said = [line for line in lines if "cannot create" in line]
    assert len(said) == 1 and why in said[0], printed[-3000:]
    assert not list(tmp_path.glob("**/status.json"))  # nothing pretends a run was written


async def test_unreachable_substrate_is_refused_before_any_actor(prefect_api, tmp_path):
    """A refusal is a verdict (void, with the reason), not a crashed flow (issue #11), and
    is announced as one (the verdict event, issue #17)."""
    dead = f"127.0.0.1:{closed_port()}"
    values = small_campaign(
        tmp_path, target={"substrate": f"grpc://{dead}", "router": f"http://{dead}"}
    )
    state = await run_flow(values)
    assert state.is_completed(), state
    result = await state.result()
    assert result["verdict"] == "void" and result["run_status"] == "refused", result
    assert "could not start" in result["reason"] and "substrate" in result["reason"]
    run_dir = Path(result["run_dir"])
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "refused" and status["actors_created"] == 0
    assert "substrate" in status["abort_reason"]
    assert verify_manifest(run_dir) == []
    runs = await task_runs(state)
    assert not any(name.startswith(("register", "fill", "hold")) for name in runs), runs
    # The verdict reaches Prefect as an event even when nothing ran: a release pipeline
    # waiting on it hears `void` with the reason, not silence.
    events = await verdict_events("ci", result["run_dir"])
    assert len(events) == 1, events
    (event,) = events
    assert event.resource.id == "agentsession.campaign.ci"
    assert event.resource["agentsession.target"] == dead  # the control address's host:port
    assert event.payload["verdict"] == "void" and event.payload["tag"] == "flow"
    assert event.payload["reason"] == result["reason"] and event.payload["regressions"] == []
    assert event.payload["location"] == result["location"]
    # Prefect relates it to the flow run that emitted it.
    assert f"prefect.flow-run.{state.state_details.flow_run_id}" in {r.id for r in event.related}
