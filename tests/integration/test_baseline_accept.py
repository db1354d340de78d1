"""Accepting a change (docs/SPEC.md §6.3) over real campaigns, as a release pipeline lives
with it: a baseline night against one standalone local substrate over the ate wire; then the
substrate's `wake:latency` fault slows every wake (an intended change) and the next night,
with `baseline: auto`, fails against the first; `agentsession baseline accept` (a
subprocess) accepts it with a reason; a third night, as slow, with `baseline: auto` passes,
compared with the accepted night alone (and against it named with `gate --baseline`), and
would still fail against the old level. Then
`agentsession history` marks the accepted night with its reason and `agentsession baseline
list` shows it. Once with the runs in a local `out` directory, once uploaded to an S3 prefix
(moto's server mode) and read back from there, the acceptance written beside the uploaded
run.

Each destination is one module fixture of three short campaigns. The judged nights have
generator.void_when_saturated off: a saturated second on this shared box says nothing of the
acceptance.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.campaign import Campaign, load_baseline
from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.upload import upload_once
from agentsession_core.output.upload import s3_client
from agentsession_core.run.run import Run, run_on_fresh_loop
from local_substrate.launcher import LocalSubstrate

pytestmark = pytest.mark.timeout(420)
# As in test_gate_noise.py: TimeToWake's p50 is ~10 ms on a quiet machine and 50-200 ms beside
# busy test workers; 600 ms more is several times slower at the worst of that.
SLOW_WAKE = "wake:latency:fixed:600ms"
REASON = "wake snapshots are now verified: <slower> by design & accepted"
BUCKET = "accepted-runs"


def values(
    sub: LocalSubstrate, out: Path, tag: str, *, dest: str | None, endpoint: str | None
) -> dict[str, Any]:
    """A night's parameters as the Prefect form or a params file gives them."""
    return {
        "baseline": "auto",
        "name": "accepting",
        "tag": tag,
        "out": str(out),
        "dest": dest,
        "upload": {"endpoint_url": endpoint, "attempts": 2, "retry_delay_seconds": 0.2},
        "seed": 11,
        "script": "smoke",
        "think_scale": 0.05,
        "hold_minutes": 0.2,
        "window_seconds": 4,
        "thresholds": ["TimeToWake: p99 < 30s", "Step_*: failure_ratio < 0.5"],
        "abort": {"rules": [], "delay_seconds": 1, "sliding_seconds": 2},
        "population": {
            "kind": "turnover",
            "sessions": 8,
            "awake": 4,
            "target_rps": 2,
            "registration_quiet_seconds": 0.5,
        },
        "target": {
            "substrate": sub.grpc_url,
            "router": sub.url,
            "protocol": "ate",
            "request_timeout_seconds": 20,
        },
        "generator": {"void_when_saturated": False},
        "cleanup": {"timeout_seconds": 20.0, "stop_grace_seconds": 0.5},
    }


def params(
    sub: LocalSubstrate, out: Path, tag: str, *, dest: str | None, endpoint: str | None
) -> CampaignParams:
    return CampaignParams(**values(sub, out, tag, dest=dest, endpoint=endpoint))


async def night(p: CampaignParams) -> dict[str, Any]:
    """One campaign as the flow runs it without Prefect: its baseline read first
    (`baseline: auto`), then the windows, then the upload to `dest` when it has one."""
    baseline = await asyncio.to_thread(load_baseline, p)
    run = Run(p, handle_signals=False)
    async with run:
        driver = Campaign(p, run, baseline=baseline)
        await run.preflight()
        await run.register()
        await run.fill()
        for window in driver.plan:
            await driver.hold_window(window.index)
        driver.finish()
    assert run.result is not None
    run_dir = run.result.run_dir
    location = str(run_dir)
    if p.dest:
        location = (await asyncio.to_thread(upload_once, run_dir, p)).location
    gate = json.loads((run_dir / "gate.json").read_text())
    return {"dir": run_dir, "location": location, "gate": gate}


def command(
    *args: object, endpoint: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`agentsession ARGS`; with `endpoint`, the S3 endpoint as `--endpoint-url` where the
    command takes one, and as AWS_ENDPOINT_URL for `gate` (boto3's usual chain)."""
    extra = ["--endpoint-url", endpoint] if endpoint and args[0] != "gate" else []
    env = dict(os.environ, AWS_ENDPOINT_URL=endpoint) if endpoint else None
    return subprocess.run(
        [sys.executable, "-m", "agentsession_core", *map(str, args), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


async def three_nights(out: Path, dest: str | None, endpoint: str | None) -> dict[str, Any]:
    async with LocalSubstrate(workers=6, store=out / "store") as sub:
        runs: dict[str, Any] = {
            "base": await night(params(sub, out, "base", dest=dest, endpoint=endpoint))
        }
        await sub.set_faults([SLOW_WAKE])
        runs["slower"] = await night(params(sub, out, "slower", dest=dest, endpoint=endpoint))
        accepted = command(
            "baseline", "accept", runs["slower"]["location"], "--reason", REASON, endpoint=endpoint
        )
        runs["accept"] = accepted
        runs["after"] = await night(params(sub, out, "after", dest=dest, endpoint=endpoint))
    return runs


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("accept-local")
    return {"root": out, **run_on_fresh_loop(three_nights(out, None, None))}


@pytest.fixture(scope="module")
def s3(s3_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    s3_client(s3_server).create_bucket(Bucket=BUCKET)
    out = tmp_path_factory.mktemp("accept-s3")
    dest = f"s3://{BUCKET}/team"
    runs = run_on_fresh_loop(three_nights(out, dest, s3_server))
    return {"root": dest, "endpoint": s3_server, **runs}


def the_accepted_night_lets_the_next_one_pass(runs: dict[str, Any]) -> None:
    base, slower, after = runs["base"], runs["slower"], runs["after"]
    assert base["gate"]["verdict"] == "pass", base["gate"]["reason"]
    assert base["gate"]["baseline"]["status"] == "none"  # the campaign's first night
    # The intended slowdown fails against the night before it.
    assert slower["gate"]["verdict"] == "fail", slower["gate"]["reason"]
    assert slower["gate"]["baseline"]["locations"] == [base["location"]]
    assert "TimeToWake.p50" in slower["gate"]["baseline"]["regressions"]
    done = runs["accept"]
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"accepted {slower['location']} (fail; regressed: " in done.stdout
    assert done.stdout.strip().endswith(f"{slower['location']}/acceptance.json")
    # The next night, as slow: compared only with the accepted one, and passes.
    stored = after["gate"]["baseline"]
    assert after["gate"]["verdict"] == "pass", after["gate"]["reason"]
    assert stored["status"] == "compared" and stored["locations"] == [slower["location"]]
    statuses = {m["metric"]: m["status"] for m in stored["metrics"]}
    assert statuses["TimeToWake.p50"] == "unchanged", stored["metrics"]
    # Without the acceptance it would have failed: against the old level it still does.
    code = command("gate", after["location"], "--baseline", base["location"], **_ep(runs))
    assert code.returncode == 1 and "TimeToWake.p50" in json.loads(code.stdout)["reason"]
    # Named explicitly, the accepted night is a baseline too (it failed: without its
    # acceptance `--baseline` refuses it), and the next night passes against it.
    named = command("gate", after["location"], "--baseline", slower["location"], **_ep(runs))
    assert named.returncode == 0, named.stderr[-2000:]
    assert json.loads(named.stdout)["baseline"]["locations"] == [slower["location"]]
    # The gate still believes the accepted run: its seal is its own files', untouched.
    again = command("gate", slower["location"], **_ep(runs))
    assert again.returncode in (0, 1) and "not listed" not in again.stderr, again.stderr


def _ep(runs: dict[str, Any]) -> dict[str, Any]:
    return {"endpoint": runs.get("endpoint")}


def history_shows_the_acceptance(runs: dict[str, Any], cwd: Path) -> None:
    done = command("history", runs["root"], "--name", "accepting", **_ep(runs), cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((cwd / "history.json").read_text())
    by_tag = {r["tag"]: r for r in doc["runs"]}
    assert [r["tag"] for r in doc["runs"]] == ["base", "slower", "after"]
    accepted = by_tag["slower"]["accepted"]
    assert accepted is not None and accepted["reason"] == REASON
    assert accepted["verdict"] == "fail" and "TimeToWake.p50" in accepted["regressions"]
    assert by_tag["base"]["accepted"] is None and by_tag["after"]["accepted"] is None
    page = (cwd / "history.html").read_text()
    assert page.count('class="accepted"') >= 1
    # The reason is a user's text: escaped on the page, never markup.
    assert "&lt;slower&gt; by design &amp; accepted" in page and "<slower>" not in page
    listed = command("baseline", "list", runs["root"], **_ep(runs))
    assert listed.returncode == 0, listed.stderr
    (line,) = listed.stdout.strip().splitlines()
    assert line.startswith(runs["slower"]["location"]) and line.endswith(REASON)


def test_local_an_accepted_night_lets_the_next_night_pass(local: dict[str, Any]) -> None:
    the_accepted_night_lets_the_next_one_pass(local)


def test_local_history_and_list_show_the_acceptance(local: dict[str, Any], tmp_path: Path) -> None:
    history_shows_the_acceptance(local, tmp_path)


def test_s3_an_accepted_night_lets_the_next_night_pass(s3: dict[str, Any]) -> None:
    assert all(s3[t]["location"].startswith("s3://") for t in ("base", "slower", "after"))
    the_accepted_night_lets_the_next_one_pass(s3)


def test_s3_history_and_list_show_the_acceptance(s3: dict[str, Any], tmp_path: Path) -> None:
    history_shows_the_acceptance(s3, tmp_path)
