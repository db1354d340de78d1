"""The campaign flow under Prefect's test harness, against the embedded local substrate and
an S3 endpoint served over HTTP (moto's server mode on 127.0.0.1).

One session-scoped harness for the module (it takes ~20 s to start on two cores).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import io
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import parse
from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.output.upload import list_objects, read_object, s3_client
from flows.credentials import TOKEN_ENV, TOKEN_PARAMETER_REFUSED
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN
from tests.integration.mounts import tmpfs

# Under xdist, .ci/run's `--dist loadfile` runs the whole module on one worker, its tests in
# a row: one harness, made once.
pytestmark = pytest.mark.timeout(240)
BUCKET = "campaign-runs"


@pytest.fixture(scope="module")
def prefect_api() -> Iterator[str]:
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="module")
def s3_endpoint(s3_server: str) -> str:
    s3_client(s3_server).create_bucket(Bucket=BUCKET)
    return s3_server


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def small_campaign(tmp_path: Path, **overrides) -> dict:
    values = {
        "name": "ci",
        "tag": "flow",
        "out": str(tmp_path / "art"),
        "seed": 3,
        "script": "smoke",
        "think_scale": 0.05,
        "hold_minutes": 0.1,
        "window_seconds": 3,
        "thresholds": ["Step_*: failure_ratio < 0.5", "TimeToWake: p99 < 30s"],
        "abort": {"rules": [], "delay_seconds": 1, "sliding_seconds": 2},
        "population": {
            "kind": "turnover",
            "sessions": 6,
            "awake": 2,
            "target_rps": 2,
            "registration_quiet_seconds": 0.5,
        },
        "target": {"local_workers": 4, "request_timeout_seconds": 20},
        "upload": {"attempts": 2, "retry_delay_seconds": 0.2},
    }
    for key, value in overrides.items():
        values[key] = {**values.get(key, {}), **value} if isinstance(value, dict) else value
    return values


async def run_flow(values: dict):
    from flows.campaign import campaign

    return await campaign(params=parse(CampaignParams, values), return_state=True)


async def task_runs(state) -> dict[str, int]:
    """Task run name -> run_count, for one flow run."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async with get_client() as client:
        runs = await client.read_task_runs(
            flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[state.state_details.flow_run_id])
            )
        )
    return {run.name: run.run_count for run in runs}


async def test_flow_uploads_to_s3_under_the_upstream_layout(
    prefect_api, s3_endpoint, tmp_path, monkeypatch
):
    import tasks.hold

    # Watch the progress artifact move inside windows (a spy that still calls Prefect).
    published: list[float] = []
    update = tasks.hold.aupdate_progress_artifact

    async def spy(artifact_id, progress, **kwargs):
        published.append(progress)
        return await update(artifact_id, progress, **kwargs)

    monkeypatch.setattr(tasks.hold, "PROGRESS_EVERY_S", 0.5)
    monkeypatch.setattr(tasks.hold, "aupdate_progress_artifact", spy)
    values = small_campaign(
        tmp_path,
        dest=f"s3://{BUCKET}/nightly",
        out=str(tmp_path / "local"),
        upload={"endpoint_url": s3_endpoint},
    )
    state = await run_flow(values)
    # Two 3 s windows: it moved inside the first one, and ends at 100 %.
    assert any(0 < p < 50 for p in published) and published[-1] == 100.0, published
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
    prefect_api, tmp_path, aws_credentials
):
    dead = f"http://127.0.0.1:{closed_port()}"
    values = small_campaign(
        tmp_path,
        dest=f"s3://{BUCKET}/nightly",
        out=str(tmp_path / "local"),
        hold_minutes=0.05,
        upload={"endpoint_url": dead, "attempts": 3},
    )
    # What Prefect's console handler (on the root logger) would print of the flow and task
    # runs, formatted the same way: a record's exc_info becomes its traceback. Prefect's
    # logging set up first, or setting it up would drop the handler.
    from prefect.logging.configuration import ensure_logging_setup

    ensure_logging_setup()
    console = io.StringIO()
    handler = logging.StreamHandler(console)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    logging.getLogger("prefect").addHandler(handler)
    try:
        state = await run_flow(values)
    finally:
        logging.getLogger("prefect").removeHandler(handler)
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
    from prefect.logging.configuration import ensure_logging_setup

    ensure_logging_setup()
    console = io.StringIO()
    handler = logging.StreamHandler(console)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    logging.getLogger("prefect").addHandler(handler)
    try:
        state = await run_flow(small_campaign(tmp_path, out=str(unwritable_out / "art")))
    finally:
        logging.getLogger("prefect").removeHandler(handler)
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
    values = small_campaign(tmp_path, target={"substrate": f"http://127.0.0.1:{closed_port()}"})
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
    assert event.resource["agentsession.target"] == values["target"]["substrate"][len("http://") :]
    assert event.payload["verdict"] == "void" and event.payload["tag"] == "flow"
    assert event.payload["reason"] == result["reason"] and event.payload["regressions"] == []
    assert event.payload["location"] == result["location"]
    # Prefect relates it to the flow run that emitted it.
    assert f"prefect.flow-run.{state.state_details.flow_run_id}" in {r.id for r in event.related}


async def test_a_paired_aa_campaign_passes_and_reports_its_arms_to_prefect(prefect_api, tmp_path):
    """A paired campaign (docs/SPEC.md §6.8) of one build on both arms, two embedded local
    substrates: it passes with no figure regressed or improved (every figure with enough
    samples unchanged); both arms run in one task per phase; the verdict artifact and the
    verdict event carry the comparison of the candidate with its reference arm."""
    values = small_campaign(
        tmp_path,
        name="pairedflow",
        hold_minutes=0.25,
        window_seconds=5,
        population={"target_rps": 8, "sessions": 16, "awake": 3},
        target={"local_workers": 5},
        reference={"local_workers": 5, "request_timeout_seconds": 20},
        # A short hold's few wakes: p50 compared from 20 past it in each arm (default 50).
        gate={"block_seconds": 1, "min_blocks": 4, "min_beyond": 20},
        max_regression=0.5,
    )
    for _ in range(2):  # a machine so busy the generator saturated a whole window: again
        state = await run_flow(values)
        assert state.is_completed(), state
        result = await state.result()
        gate = orjson.loads((Path(result["run_dir"]) / "gate.json").read_bytes())
        if gate["verdict"] != "void" or "saturated" not in gate["reason"]:
            break
    paired = gate["paired"]
    assert result["verdict"] == gate["verdict"] == "pass", result["reason"]
    assert paired["status"] == "compared" and paired["blocks"] >= 4
    assert "against the reference arm" in result["reason"]
    statuses = {m["metric"]: m["status"] for m in paired["metrics"]}
    assert not set(statuses.values()) & {"regressed", "improved"}, statuses
    assert statuses["TimeToWake.p50"] == statuses["Step_*.p50"] == "unchanged", statuses
    assert {m["status"] for m in paired["metrics"] if m.get("why") is None} == {"unchanged"}
    # Prefect names a task run after its task and a short hex suffix (fill-3fa).
    runs = {re.sub(r"-[0-9a-f]{3}$", "", name) for name in await task_runs(state)}
    assert {"preflight", "register", "fill", "hold-0", "hold-1", "hold-2"} <= runs, runs
    from prefect.artifacts import Artifact

    markdown = (await Artifact.aget("pairedflow-gate")).data
    assert "Candidate against the reference arm" in markdown
    assert "| TimeToWake.p50 |" in markdown
    (event,) = await verdict_events("pairedflow", result["run_dir"])
    carried = event.payload["paired"]
    assert carried["status"] == "compared" and carried["blocks"] == paired["blocks"]
    assert carried["rule"] == paired["rule"] and carried["regressions"] == paired["regressions"]
    wake = next(m for m in carried["metrics"] if m["metric"] == "TimeToWake.p50")
    assert wake["ratio"] == next(
        m["ratio"] for m in paired["metrics"] if m["metric"] == "TimeToWake.p50"
    )


async def test_a_capacity_search_runs_one_task_per_probe(prefect_api, tmp_path, monkeypatch):
    """After the hold's `hold-N` tasks, one `probe-N` task per probe (docs/SPEC.md §6.7);
    the probes' result lands in gate.json. A busy box must not void the one probe."""
    from agentsession_core.measure.health import GeneratorHealth

    monkeypatch.setattr(GeneratorHealth, "void_reason", lambda self, window: None)
    values = small_campaign(
        tmp_path,
        search={
            "threshold": "TimeToWake: p99 < 30s",
            "start": 1.5,
            "max_level": 1.5,
            "settle_seconds": 0,
            "window_seconds": 2,
        },
    )
    state = await run_flow(values)
    assert state.is_completed(), state
    result = await state.result()
    runs = await task_runs(state)
    assert "probe-0" in runs and "probe-1" not in runs, runs
    gate = orjson.loads((Path(result["run_dir"]) / "gate.json").read_bytes())
    capacity = gate["capacity"]
    assert [p["level"] for p in capacity["probes"]] == [1.5]
    assert capacity["status"] == "above", capacity  # held at max_level: above it
    assert "capacity search above" in result["reason"]


async def flow_run_named(name: str):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    async with get_client() as client:
        runs = await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name]))
        )
    return runs[0].id if runs else None


async def stored_runs(flow_run_id) -> str:
    """Everything Prefect's database holds about one flow run and its task runs, as JSON."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async with get_client() as client:
        flow_run = await client.read_flow_run(flow_run_id)
        task_runs = await client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    stored = flow_run.model_dump_json() + "".join(t.model_dump_json() for t in task_runs)
    # The dump is the real record: it holds the parameters the flow was given.
    assert '"local_workers":4' in stored.replace(" ", ""), stored[:2000]
    return stored


async def test_a_token_from_the_environment_reaches_the_substrate_not_prefect(
    prefect_api, substrate: LocalSubstrateProcess, tmp_path, monkeypatch
):
    """The substrate requires TOKEN: the campaign completes only if the flow took it from
    AGENTSESSION_TOKEN, and Prefect's records of the run never hold it."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    values = small_campaign(tmp_path, hold_minutes=0.05, target={"substrate": substrate.url})
    state = await run_flow(values)
    assert state.is_completed(), state
    result = await state.result()
    assert result["run_status"] == "completed", result
    assert TOKEN not in await stored_runs(state.state_details.flow_run_id)
    campaign_json = (Path(result["run_dir"]) / "campaign.json").read_bytes()
    assert TOKEN.encode() not in campaign_json
    assert orjson.loads(campaign_json)["params"]["target"]["token"] == "***"  # it was used


async def test_a_secret_block_names_the_token(
    prefect_api, substrate: LocalSubstrateProcess, tmp_path, monkeypatch
):
    """target.token_secret: the token comes from a Secret block on the flow's Prefect API;
    a block with a wrong token makes the substrate refuse the campaign (void, one reason)."""
    from prefect.blocks.system import Secret

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    await Secret(value=TOKEN).asave("substrate-token", overwrite=True)
    await Secret(value="not-the-token").asave("stale-token", overwrite=True)

    values = small_campaign(
        tmp_path,
        hold_minutes=0.05,
        target={"substrate": substrate.url, "token_secret": "substrate-token"},
    )
    state = await run_flow(values)
    assert state.is_completed(), state
    result = await state.result()
    assert result["run_status"] == "completed", result
    assert TOKEN not in await stored_runs(state.state_details.flow_run_id)

    values["target"]["token_secret"] = "stale-token"
    state = await run_flow(values)
    assert state.is_completed(), state  # a refusal is a verdict
    result = await state.result()
    assert result["verdict"] == "void" and result["run_status"] == "refused", result
    assert "credentials refused" in result["reason"], result["reason"]
    assert "target.token_secret" in result["reason"] and "not-the-token" not in result["reason"]
    assert "not-the-token" not in await stored_runs(state.state_details.flow_run_id)


async def test_a_token_parameter_or_a_missing_block_is_refused_before_anything(
    prefect_api, tmp_path, monkeypatch
):
    """Someone typed the token into the flow's form: the flow refuses it in one line naming
    what to use instead, and starts nothing."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    for target, message in (
        ({"token": "typed-into-the-form"}, TOKEN_PARAMETER_REFUSED),
        ({"token_secret": "no-such-block"}, "no Prefect Secret block named 'no-such-block'"),
    ):
        state = await run_flow(small_campaign(tmp_path, target=target))
        assert state.is_failed(), state
        assert state.message.startswith("campaign not started: "), state.message
        assert message in state.message and "typed-into-the-form" not in state.message
        assert not (tmp_path / "art").exists()


def test_cli_runs_the_flow_and_prints_the_run_directory_last(prefect_api, tmp_path):
    """Also: a token in AGENTSESSION_TOKEN (the demo preset's embedded substrate then
    requires it) is on no command line of the campaign or any process it started, and
    not in the flow run Prefect recorded."""
    import asyncio

    import psutil

    token = "cli-token-" + os.urandom(8).hex()
    env = {**os.environ, "PREFECT_API_URL": prefect_api, TOKEN_ENV: token}
    sets = [
        "name=cli",
        "tag=t1",
        f"dest={tmp_path / 'art'}",
        "hold_minutes=0.05",
        "window_seconds=3",
        "think_scale=0.05",
        "population.sessions=6",
        "population.awake=2",
        "population.registration_quiet_seconds=0.5",
        "target.local_workers=4",
        "levels=[1.0]",
        "abort.rules=[]",
    ]
    args = [sys.executable, "-m", "agentsession_core", "campaign", "--preset", "demo"]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        early = []
        for line in proc.stderr:  # every process is up once the fill is done
            early.append(line)
            if "turnover fill done" in line:
                break
        else:
            pytest.fail("the campaign never reached its hold: " + "".join(early)[-3000:])
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        cmdlines = [" ".join(p.cmdline()) for p in family if p.is_running()]
        out, err = proc.communicate(timeout=200)
    finally:
        proc.kill()
    assert any("substrate serve" in c for c in cmdlines), cmdlines  # the embedded substrate
    assert not [c for c in cmdlines if token in c]
    assert proc.returncode == 0, err[-3000:]
    assert token not in out + "".join(early) + err
    run_dir = Path(out.strip().splitlines()[-1])
    assert run_dir.is_dir() and run_dir.name == "run_tag=t1"
    assert (run_dir / "gate.json").is_file() and verify_manifest(run_dir) == []
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "completed", status  # the substrate took the token
    flow_run_id = asyncio.run(flow_run_named("cli-t1"))
    assert flow_run_id is not None
    assert token not in asyncio.run(stored_runs(flow_run_id))


def test_sigterm_mid_hold_cleans_up_writes_artifacts_and_exits_143(prefect_api, tmp_path):
    """A scheduler or an operator stops the campaign process: the flow still deletes every
    actor it created and writes its artifacts, marked cancelled."""
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    sets = [
        "name=term",
        "tag=t1",
        f"dest={tmp_path / 'art'}",
        "hold_minutes=2",
        "window_seconds=30",
        "think_scale=0.05",
        "population.sessions=6",
        "population.awake=2",
        "population.registration_quiet_seconds=0.5",
        "target.local_workers=4",
        "levels=[1.0]",
        "abort.rules=[]",
    ]
    args = [sys.executable, "-m", "agentsession_core", "campaign", "--preset", "demo"]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the hold has begun once the fill is done
            if "turnover fill done" in line:
                break
        else:
            pytest.fail("the campaign never reached its hold")
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in err and "received SIGTERM" in err
    run_dir = Path(out.strip().splitlines()[-1])
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "cancelled", status
    assert status["actors_created"] == 6 and status["actors_deleted"] == 6
    assert status["leaked_actors"] == []
    assert verify_manifest(run_dir) == []
    gate = orjson.loads((run_dir / "gate.json").read_bytes())
    assert gate["verdict"] == "void" and "cancelled" in gate["reason"], gate["reason"]
    assert gate["windows"][-1]["outcome"] == "void"  # the window the signal cut short
    # A cancelled campaign announces its verdict too (sent before the process exits).
    (event,) = asyncio.run(verdict_events("term", run_dir))
    assert event.payload["verdict"] == "void" and event.payload["reason"] == gate["reason"]


async def test_a_two_shard_campaign_runs_end_to_end_on_a_local_dask_cluster(prefect_api, tmp_path):
    """generator.shards=2 with no cluster address: a local Dask cluster of two worker
    processes, one run directory with the merged rows and each shard's health beside it."""
    values = {**small_campaign(tmp_path), "generator": {"shards": 2}}
    state = await run_flow(values)
    assert state.is_completed(), state
    result = await state.result()
    assert result["run_status"] == "completed", result
    run_dir = Path(result["run_dir"])
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["generator"]["shards"] == 2 and status["generator"]["lost"] == []
    assert [s["state"] for s in status["shards"]] == ["stopped", "stopped"]
    assert [s["sessions"] for s in status["shards"]] == [3, 3]
    assert status["actors_created"] == status["actors_deleted"] == 6
    assert status["leaked_actors"] == []
    for k in (0, 1):
        health = orjson.loads((run_dir / f"shards/{k}/health.json").read_bytes())
        assert health["shard"] == k and health["state"] == "stopped" and health["monitored"]
    rows = [orjson.loads(r) for r in (run_dir / "stats.jsonl").read_text().splitlines()]
    metrics = {r["metric"] for r in rows}
    assert {"step_window", "turnover_window"} <= metrics
    created = next(r for r in rows if r["metric"].endswith("_CreateActor"))
    assert created["measurements"]["request_count"] == 6  # both shards' rows, merged
    windows = [orjson.loads(w) for w in (run_dir / "windows.jsonl").read_text().splitlines()]
    assert [w["index"] for w in windows] == [0, 1]
    assert windows[0]["end_unix"] == windows[1]["start_unix"]
    gate = orjson.loads((run_dir / "gate.json").read_bytes())
    assert gate["verdict"] == result["verdict"] and len(gate["windows"]) == 2
    assert "shard 0: agentsession: turnover fill done" in (run_dir / "logs.txt").read_text()
    assert verify_manifest(run_dir) == []


def test_sigterm_stops_every_shard_within_seconds(prefect_api, tmp_path):
    """Prefect's cancellation (SIGTERM to the flow-run process) with two shards: every
    shard stops and deletes its actors, their worker processes are gone, artifacts say
    cancelled."""
    import psutil

    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    sets = [
        "name=term",
        "tag=shards",
        f"dest={tmp_path / 'art'}",
        "hold_minutes=2",
        "window_seconds=30",
        "think_scale=0.05",
        "population.sessions=6",
        "population.awake=2",
        "population.registration_quiet_seconds=0.5",
        "target.local_workers=4",
        "levels=[1.0]",
        "abort.rules=[]",
        "generator.shards=2",
    ]
    args = [sys.executable, "-m", "agentsession_core", "campaign", "--preset", "demo"]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the coordinator says so once every shard has filled
            if "turnover fill done" in line and "shard " not in line:
                break
        else:
            pytest.fail("the campaign never reached its hold")
        time.sleep(2)
        # Dask's processes (nannies, workers): every child but the local substrate.
        dask_procs = [
            c
            for c in psutil.Process(proc.pid).children(recursive=True)
            if "agentsession" not in " ".join(c.cmdline())
        ]
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == 143, err[-3000:]
    print(f"campaign with two shards exited {took:.1f}s after SIGTERM")
    assert took < 30
    assert "Traceback" not in err and "received SIGTERM" in err
    run_dir = Path(out.strip().splitlines()[-1])
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "cancelled", status
    assert [s["state"] for s in status["shards"]] == ["stopped", "stopped"]
    assert status["actors_created"] == 6 and status["actors_deleted"] == 6
    assert status["leaked_actors"] == []
    assert {s["pid"] for s in status["shards"]} <= {p.pid for p in dask_procs}
    _, alive = psutil.wait_procs(dask_procs, timeout=10)
    assert not alive, [" ".join(p.cmdline()) for p in alive]
    gate = orjson.loads((run_dir / "gate.json").read_bytes())
    assert gate["verdict"] == "void" and "cancelled" in gate["reason"], gate["reason"]
    assert verify_manifest(run_dir) == []


# ----------------------------------------------------- the verdict event, the target limit, logs
async def verdict_events(name: str, run_dir: Path | str, timeout: float = 60.0) -> list:
    """The `agentsession.campaign.verdict` events of campaign `name` about one run
    directory, once the server has stored one (it persists events in batches; other runs of
    the same campaign name emit theirs too)."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
    from prefect.events.worker import EventsWorker

    from flows.verdict_event import VERDICT_EVENT, campaign_resource_id

    drained = EventsWorker.drain_all(timeout=10)  # this process's own events, if queued
    if inspect.isawaitable(drained):  # it is, called from a running loop
        await drained
    wanted = EventFilter(
        event=EventNameFilter(name=[VERDICT_EVENT]),
        resource=EventResourceFilter(id=[campaign_resource_id(name)]),
    )
    deadline = time.monotonic() + timeout
    async with get_client() as client:
        while True:
            events = [
                e
                for e in (await client.read_events(wanted, limit=50)).events  # newest first
                if e.payload.get("run_dir") == str(run_dir)
            ]
            if events or time.monotonic() > deadline:
                return events
            await asyncio.sleep(0.5)


async def flow_run_logs(flow_run_id) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    async with get_client() as client:
        logs = await client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )
    return [f"{log.name}: {log.message}" for log in logs]


async def test_an_operators_limit_is_left_as_it_is(prefect_api):
    """The flow creates a missing target limit with one slot, and never touches one that
    exists (an operator may have raised it on purpose)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    from flows.target_limit import ensure_limit

    assert await ensure_limit("agentsession-target-fresh-1") is True
    assert await ensure_limit("agentsession-target-fresh-1") is False
    async with get_client() as client:
        await client.create_global_concurrency_limit(
            GlobalConcurrencyLimitCreate(name="agentsession-target-raised-1", limit=3)
        )
        assert await ensure_limit("agentsession-target-raised-1") is False
        fresh = await client.read_global_concurrency_limit_by_name("agentsession-target-fresh-1")
        raised = await client.read_global_concurrency_limit_by_name("agentsession-target-raised-1")
    assert (fresh.limit, raised.limit) == (1, 3)


async def test_the_verdict_report_flow_writes_its_artifact(prefect_api):
    """What the fail trigger runs: one markdown artifact naming the failure and the files."""
    from prefect.artifacts import Artifact

    from flows.verdict_report import verdict_report

    state = await verdict_report(
        campaign="gone-bad",
        tag="n1",
        reason="window 0 at 1x: break",
        regressions=["TimeToWake p99"],
        location="s3://b/runs/gone-bad",
        return_state=True,
    )
    assert state.is_completed(), state
    artifact = await Artifact.aget("gone-bad-failed")
    assert artifact is not None and artifact.type == "markdown"
    assert "window 0 at 1x: break" in artifact.data and "TimeToWake p99" in artifact.data
    assert "s3://b/runs/gone-bad" in artifact.data


async def apply_report_deployment() -> None:
    """The `verdict-report` deployment and its trigger, applied as `agentsession serve`
    applies them (from deployments/prefect.yaml)."""
    from flows.serve import build_deployments

    # In a thread: called from a running loop, Prefect's to_deployment returns a coroutine.
    deployments = await asyncio.to_thread(build_deployments)
    (report,) = [d for d in deployments if d.name == "verdict-report"]
    await report.aapply()


async def report_runs(timeout: float) -> list:
    """Flow runs of `verdict-report` (the trigger creates them; nothing executes them here)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    deadline = time.monotonic() + timeout
    async with get_client() as client:
        while True:
            runs = await client.read_flow_runs(
                deployment_filter=DeploymentFilter(
                    name=DeploymentFilterName(any_=["verdict-report"])
                )
            )
            if runs or time.monotonic() > deadline:
                return runs
            await asyncio.sleep(0.5)


def test_two_campaigns_on_one_substrate_take_turns_and_report_to_prefect(
    prefect_api, substrate: LocalSubstrateProcess, tmp_path
):
    """Two `agentsession campaign` processes against one standalone local substrate, the
    second started while the first holds the target: the target's global concurrency limit
    lets one drive it at a time, the other says it waits and starts only after the first
    cleaned up. Each ends with its verdict
    event (one fail, one pass or void); the fail fires the example trigger; the engine's
    own lines are in each flow run's logs on the Prefect API."""
    from prefect.client.orchestration import get_client

    from flows.target_limit import limit_name

    asyncio.run(apply_report_deployment())
    port = int(substrate.url.rsplit(":", 1)[1].split("/")[0])
    limit = limit_name(f"127.0.0.1:{port}")
    env = {
        **os.environ,
        "PREFECT_API_URL": prefect_api,
        TOKEN_ENV: TOKEN,
        "PREFECT_LOGGING_TO_API_ENABLED": "true",  # the suite turns it off; a user has it on
    }
    # turn-a must fail, and by an abort rule: on a busy machine every short window can be
    # void (its generator saturated for a second; fresh-clone CI saw both of two), and a void
    # run fires no trigger, while an abort fails the campaign whatever its windows were.
    thresholds = {"turn-a": ["TimeToWake: p99 < 1ms (abort)"], "turn-b": None}
    procs = {}
    for name, rules in thresholds.items():
        # turn-a holds 12 s and aborts 8 s in, so turn-b, started once turn-a holds the
        # target, waits long enough to see the slot taken twice (flows/target_limit.py) even
        # when its interpreter is slow to start on a busy machine. Started together instead,
        # the slower of two starts could arrive as the first ended, and rightly say nothing.
        values = small_campaign(
            tmp_path,
            name=name,
            hold_minutes=0.2 if rules else 0.05,
            target={"substrate": substrate.url},
        )
        values["levels"] = [1.0]
        if rules:
            values["thresholds"] = rules
            values["abort"]["delay_seconds"] = 8
        params = tmp_path / f"{name}.json"
        params.write_bytes(orjson.dumps(values))
        err = open(tmp_path / f"{name}.err", "w")
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "agentsession_core", "campaign", "--params", str(params)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        if rules:
            deadline = time.monotonic() + 120
            while f"holding {limit}" not in (tmp_path / f"{name}.err").read_text():
                assert procs[name].poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
    outs = {}
    try:
        for name, proc in procs.items():
            outs[name], _ = proc.communicate(timeout=200)
    finally:
        for proc in procs.values():
            proc.kill()
    errs = {name: (tmp_path / f"{name}.err").read_text() for name in procs}
    for name, proc in procs.items():
        assert proc.returncode == 0, errs[name][-3000:]
    run_dirs = {name: Path(out.strip().splitlines()[-1]) for name, out in outs.items()}
    status = {n: orjson.loads((d / "status.json").read_bytes()) for n, d in run_dirs.items()}
    first, second = sorted(status, key=lambda n: status[n]["started_unix"])
    assert (first, second) == ("turn-a", "turn-b")
    print(
        f"{first}: {status[first]['started_unix']:.2f} .. {status[first]['updated_unix']:.2f}; "
        f"{second}: from {status[second]['started_unix']:.2f}"
    )
    for name in (first, second):
        assert status[name]["status"] == ("aborted" if thresholds[name] else "completed")
        assert status[name]["actors_created"] == status[name]["actors_deleted"] == 6
    # The final status.json is written once every actor is deleted (and the substrate's
    # metrics stopped); the second run's clock started after that, not beside it.
    assert status[second]["started_unix"] >= status[first]["updated_unix"]
    assert f"waiting for the global concurrency limit {limit}" in errs[second]
    assert "waiting for the global concurrency limit" not in errs[first]

    async def prefect_side() -> tuple[dict, dict, list]:
        events = {name: await verdict_events(name, run_dirs[name]) for name in procs}
        logs = {name: await flow_run_logs(await flow_run_named(f"{name}-flow")) for name in procs}
        async with get_client() as client:
            gcl = await client.read_global_concurrency_limit_by_name(limit)
        assert (gcl.limit, gcl.active_slots) == (1, 0)
        return events, logs, await report_runs(timeout=60)

    events, logs, reports = asyncio.run(prefect_side())
    for name in procs:
        gate = orjson.loads((run_dirs[name] / "gate.json").read_bytes())
        (event,) = events[name]
        assert event.resource.id == f"agentsession.campaign.{name}"
        assert event.resource["agentsession.target"] == f"127.0.0.1:{port}"
        assert event.payload["verdict"] == gate["verdict"], event.payload
        assert event.payload["run_dir"] == str(run_dirs[name])
        # The engine's lines, read back from the API: the fill and a window's verdict.
        text = "\n".join(logs[name])
        assert "agentsession: turnover fill done" in text, text[-3000:]
        said = r"window \d ended early: abort rule" if thresholds[name] else r"window 0 at 1x: \w+"
        assert re.search(rf"agentsession: {said}", text), text[-3000:]
    assert events["turn-a"][0].payload["verdict"] == "fail"
    assert events["turn-b"][0].payload["verdict"] != "fail"
    assert f"waiting for the global concurrency limit {limit}" in "\n".join(logs[second])
    # The example trigger ran the report for the failed campaign, and only for it.
    assert [r.parameters.get("campaign") for r in reports] == ["turn-a"], reports
    assert reports[0].parameters["location"] == str(run_dirs["turn-a"])
