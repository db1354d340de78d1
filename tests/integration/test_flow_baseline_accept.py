"""Accepting a change through Prefect (docs/SPEC.md §6.3): the `baseline-accept` flow under
Prefect's test harness, as `agentsession baseline accept` does it from the command line
(test_baseline_accept.py), and the campaign flow's `baseline: auto` reading it.

One module fixture makes the nights: a baseline night and a slower night that failed against
it (the standalone local substrate's `wake:latency` fault, as in test_baseline_accept.py);
the slower one accepted with the `baseline-accept` flow; then the campaign flow runs a third
night as slow with `baseline: auto`. The tests read what the flow returned and the artifact
it wrote back from the Prefect API, see the third night compared with the accepted night
alone and pass, and reuse the baseline night (copies of it: no other campaign is run) for an
altered run, which fails the flow run with the command's one line, and for a run uploaded to
S3 (moto's server mode), accepted twice through the flow's `endpoint_url` parameter alone.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentsession_core.judge.acceptance import AcceptanceError
from agentsession_core.output.upload import read_object, s3_client, upload_run
from agentsession_core.report.gate_summary import md_text
from agentsession_core.run.run import run_on_fresh_loop
from local_substrate.launcher import LocalSubstrate
from tests.integration import flow_harness
from tests.integration.flow_harness import (
    TEST_TIMEOUT_S,
    prefect_console,
    run_flow,
    verdict_events,
)
from tests.integration.test_baseline_accept import (
    REASON,
    SLOW_WAKE,
    command,
    night,
    params,
    values,
)

pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)
prefect_api = flow_harness.prefect_api  # this module's own Prefect API
BUCKET = "flow-accepted-runs"
KEY = "accepting-accepted"  # artifact_key(the nights' campaign name, "accepted")


async def accept(run: str, reason: str = REASON, **parameters: Any):  # type: ignore[no-untyped-def]
    """The `baseline-accept` flow, run here as the harness runs the campaign flow."""
    from flows.baseline_accept import baseline_accept

    return await baseline_accept(run=run, reason=reason, return_state=True, **parameters)


async def outcome(state) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """A finished flow run's state, its flow run and, when it completed, what it returned."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        flow_run = await client.read_flow_run(state.state_details.flow_run_id)
    result = await state.result() if state.is_completed() else None
    return {"state": state, "flow_run": flow_run, "result": result}


async def accepted_and_judged(out: Path) -> dict[str, Any]:
    async with LocalSubstrate(workers=6, store=out / "store") as sub:
        base = await night(params(sub, out, "base", dest=None, endpoint=None))
        await sub.set_faults([SLOW_WAKE])
        slower = await night(params(sub, out, "slower", dest=None, endpoint=None))
        accepted = await outcome(await accept(slower["location"]))
        judged = await outcome(await run_flow(values(sub, out, "flow", dest=None, endpoint=None)))
    return {"root": out, "base": base, "slower": slower, "accepted": accepted, "judged": judged}


@pytest.fixture(scope="module")
def nights(prefect_api: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("flow-accept")
    nights: dict[str, Any] = run_on_fresh_loop(accepted_and_judged(out))
    assert nights["base"]["gate"]["verdict"] == "pass", nights["base"]["gate"]["reason"]
    assert nights["slower"]["gate"]["verdict"] == "fail", nights["slower"]["gate"]["reason"]
    return nights


async def artifacts_of(flow_run_id) -> list:  # type: ignore[no-untyped-def]
    """The `accepting-accepted` artifacts one flow run wrote, read back from the API."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    async with get_client() as client:
        return await client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[KEY]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
            )
        )


async def test_the_flow_accepts_the_run_and_says_so_in_its_result_and_artifact(nights):
    accepted, slower = nights["accepted"], nights["slower"]
    assert accepted["state"].is_completed(), accepted["state"]
    result, flow_run = accepted["result"], accepted["flow_run"]
    location = slower["location"]
    # Nobody named who: the flow run (Prefect records no creator for it).
    assert result["by"] == f"prefect:{flow_run.name}"
    assert result["location"] == location and result["reason"] == REASON
    assert result["verdict"] == "fail" and result["replaced"] is None
    assert result["regressions"] == sorted(slower["gate"]["baseline"]["regressions"])
    assert "TimeToWake.p50" in result["regressions"]
    assert result["record"] == f"{location}/acceptance.json"
    record = orjson.loads(read_object(result["record"]))
    assert (record["by"], record["reason"], record["verdict"]) == (result["by"], REASON, "fail")
    assert record["accepted_unix"] == result["accepted_unix"]

    (artifact,) = await artifacts_of(flow_run.id)
    assert artifact.type == "markdown" and artifact.description == (
        f"{location} accepted by {result['by']}"
    )
    text = artifact.data
    assert text.startswith(f"## Accepted: `{location}`")
    assert f"By prefect:{flow_run.name}, " in text and md_text(REASON) in text
    assert "The run's verdict: **fail** (regressed: " in text and "TimeToWake.p50" in text
    assert "No earlier acceptance of this run was replaced." in text
    assert f"Record: `{location}/acceptance.json`" in text


async def test_the_campaign_flow_then_compares_only_with_the_accepted_night(nights):
    judged, slower = nights["judged"], nights["slower"]
    assert judged["state"].is_completed(), judged["state"]
    result = judged["result"]
    gate = orjson.loads((Path(result["run_dir"]) / "gate.json").read_bytes())
    stored = gate["baseline"]
    assert result["verdict"] == gate["verdict"] == "pass", result["reason"]
    assert stored["status"] == "compared" and stored["locations"] == [slower["location"]]
    statuses = {m["metric"]: m["status"] for m in stored["metrics"]}
    assert statuses["TimeToWake.p50"] == "unchanged", stored["metrics"]
    (event,) = await verdict_events("accepting", result["run_dir"])
    assert event.payload["verdict"] == "pass" and event.payload["regressions"] == []


async def test_an_altered_run_fails_the_flow_run_with_the_commands_one_line(nights, tmp_path):
    """A copy of the baseline night with one byte of a sealed file changed: the flow run
    ends Failed, its message the line `agentsession baseline accept` prints for the same
    copy, logged once without a traceback; no record is written."""
    altered = tmp_path / "altered"
    shutil.copytree(nights["base"]["dir"], altered)
    windows = altered / "windows.jsonl"
    data = bytearray(windows.read_bytes())
    data[0] ^= 0x01  # same size: only the hash tells
    windows.write_bytes(bytes(data))

    with prefect_console() as console:
        state = await accept(str(altered))
    assert state.is_failed(), state
    message = state.message
    assert message == (f"cannot accept: {windows}: altered: sha256 differs from manifest.json"), (
        message
    )
    with pytest.raises(AcceptanceError):
        await state.result()
    lines = console.getvalue().splitlines()
    assert lines.count(f"ERROR prefect.flow_runs {message}") == 1, lines
    assert "Traceback" not in console.getvalue()
    assert not (altered / "acceptance.json").exists()
    cli = command("baseline", "accept", altered, "--reason", REASON)
    assert cli.returncode == 2 and cli.stderr == f"agentsession: {message}\n", cli.stderr
    assert not await artifacts_of(state.state_details.flow_run_id)


async def test_an_s3_run_is_accepted_through_the_endpoint_parameter_alone(
    nights, s3_server, monkeypatch
):
    """The baseline night uploaded to an S3 prefix; the flow reads it (its seal checked
    object by object), writes the record beside it and replaces it on a second acceptance,
    all through `endpoint_url`: the process's environment names no endpoint before or after
    (boto3 would otherwise go to AWS)."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    s3_client(s3_server).create_bucket(Bucket=BUCKET)
    uploaded = upload_run(
        nights["base"]["dir"],
        f"s3://{BUCKET}/team",
        local_root=nights["root"],
        endpoint_url=s3_server,
    )
    location = uploaded.location
    first = await outcome(await accept(location, "first", by="release-bot", endpoint_url=s3_server))
    assert first["state"].is_completed(), first["state"]
    assert first["result"]["by"] == "release-bot" and first["result"]["replaced"] is None
    second = await outcome(await accept(location, endpoint_url=s3_server))
    assert second["state"].is_completed(), second["state"]
    assert "AWS_ENDPOINT_URL" not in os.environ
    result = second["result"]
    assert result["location"] == location and result["verdict"] == "pass"
    assert result["by"] == f"prefect:{second['flow_run'].name}"
    assert result["replaced"] == {
        key: first["result"][key]
        for key in ("by", "reason", "accepted_unix", "verdict", "regressions")
    }
    record = json.loads(read_object(result["record"], endpoint_url=s3_server))
    assert (record["by"], record["reason"]) == (result["by"], REASON)
    (artifact,) = await artifacts_of(second["flow_run"].id)
    assert "by release-bot: first" in artifact.data and "Replaces the acceptance of " in (
        artifact.data
    )
