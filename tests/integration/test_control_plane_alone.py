"""The control plane tested alone (docs/SPEC.md §2.4, §3.3, §4.7): a local substrate started
`--no-data-plane` (a real process over real sockets: pod-less workers, a router that answers
no actor request) driven by cold-resume campaigns with `wake_probe: none`:

* every wake is a ResumeActor and the campaign passes, while the substrate's own /metrics
  count not one router request (and the router does refuse one, so a wake that went through
  it could not have passed);
* a fleet too small for its rate runs out of cold actors in every tick's second (a tick asks
  for more resumes at once than the fleet holds, however fast the machine), so every window
  is void with "fleet exhausted", never passed.

No timing is asserted: the generator's void rule is off, and the passing campaign is judged
on failures and counts only.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import run_campaign
from agentsession_core.substrate.errors import SubstrateError
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.conftest import TOKEN, ate_client, ate_target

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
HOLD_S = 6  # two 3 s windows


@pytest.fixture(scope="module")
def podless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    root = tmp_path_factory.mktemp("no-data-plane")
    with LocalSubstrateProcess(
        workers=4,
        store=root / "store",
        token=TOKEN,
        data_plane=False,
        log_path=root / "substrate.log",
    ) as proc:
        yield proc


def campaign(
    proc: LocalSubstrateProcess, out: Path, name: str, **population: Any
) -> CampaignParams:
    return CampaignParams(
        target=ate_target(proc, token=TOKEN),
        script="smoke",
        seed=5,
        name=name,
        tag="test",
        out=str(out),
        hold_minutes=HOLD_S / 60,
        window_seconds=HOLD_S // 2,
        population={
            "kind": "cold-resume",
            "resume_mode": "explicit",
            "wake_probe": "none",
            "spawn_rate": 50,
            "registration_quiet_seconds": 0.5,
            **population,
        },
        # Judged on failures and counts, never on time.
        thresholds=["TimeToWake: failure_ratio < 0.01", "TimeToWake: count >= 1"],
        cleanup={"stop_grace_seconds": 2.0},
        generator={"void_when_saturated": False},
    )


def metric(url: str, family: str) -> dict[str, float]:
    """One counter family of the substrate's own /metrics, by its labels' text."""
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    pattern = re.compile(rf"^agentsession_substrate_{family}_total\{{(.*)\}} (\S+)$", re.M)
    return {labels: float(value) for labels, value in pattern.findall(text)}


def windows(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "windows.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def router_requests(url: str) -> float:
    return sum(n for labels, n in metric(url, "requests").items() if 'api="router"' in labels)


async def test_wake_probe_none_passes_with_no_router_request(
    podless: LocalSubstrateProcess, tmp_path: Path
) -> None:
    # The substrate has no data plane: a request through its router is refused, so a wake
    # proven by a probe request could only fail here.
    client = ate_client(podless, token=TOKEN)
    try:
        await client.ensure_atespace("probe-check")
        await client.create_actor("probe-check", "a", "benchmark-workloads", "glutton")
        with pytest.raises(SubstrateError) as refused:
            await client.request("probe-check", "a", "ping", json={}, timeout=10)
        assert refused.value.status == 503 and "no data plane" in str(refused.value)
        await client.delete_actor("probe-check", "a")
    finally:
        await client.aclose()
    router_before = router_requests(podless.url)
    control_wakes_before = metric(podless.url, "wakes").get('via="control"', 0.0)

    params = campaign(podless, tmp_path, "control-plane", sessions=12, target_rps=2)
    result = await run_campaign(params, handle_signals=False)
    assert result.run.status == "completed", result.run.reason
    judged = windows(result.run_dir)
    assert [w["outcome"] for w in judged] == ["pass", "pass"], judged

    # Not one request reached the router during the campaign; every wake was ResumeActor's.
    assert router_requests(podless.url) == router_before
    wakes = metric(podless.url, "wakes")
    assert wakes.get('via="router"', 0.0) == 0.0
    resumed = wakes['via="control"'] - control_wakes_before
    samples = sum(
        t["samples"]
        for w in judged
        for t in w["thresholds"]
        if t["threshold"].startswith("TimeToWake")
    )
    assert resumed >= 1 and samples >= 1
    with (result.run_dir / "stats.csv").open() as f:
        rows = {(r["Type"], r["Name"]) for r in csv.DictReader(f)}
    assert ("grpc", "ResumeActor") in rows and ("rps", "TimeToWake") in rows, rows
    assert not [row for row in rows if row[0] == "http"], rows  # no first touch, probe, step


async def test_a_cold_resume_whose_fleet_runs_out_is_void(
    podless: LocalSubstrateProcess, tmp_path: Path
) -> None:
    # Each tick asks for 40 resumes at once of a fleet of 2: at most 2 are cold, so every
    # tick's second books resumes that found no cold actor, however fast the machine.
    params = campaign(
        podless, tmp_path, "fleet-exhausted", sessions=2, target_rps=40, swap_pacing="tick"
    )
    result = await run_campaign(params, handle_signals=False)
    judged = windows(result.run_dir)
    assert [w["outcome"] for w in judged] == ["void", "void"], judged
    for window in judged:
        assert window["void_reason"].startswith("fleet exhausted: no cold actor was left"), window
    gate = json.loads((result.run_dir / "gate.json").read_text())
    assert gate["verdict"] != "pass", gate["verdict"]


def test_the_embedded_substrate_without_a_data_plane_from_the_command_line(
    tmp_path: Path,
) -> None:
    """As a person starts it: `agentsession run … --local-data-plane false` starts the
    embedded substrate `--no-data-plane` and says so; every wake is a ResumeActor (one
    TimeToWake sample each) and no request of the run's went through a router."""
    done = subprocess.run(
        [
            sys.executable, "-m", "agentsession_core", "run", "--hold", "6s",
            "--population", "cold-resume", "--sessions", "12", "--target-rps", "5",
            "--registration-quiet-seconds", "0.5", "--wake-probe", "none",
            "--resume-mode", "explicit", "--local-data-plane", "false", "--local-workers", "4",
            "--set", "generator.void_when_saturated=false",
            "--out", str(tmp_path), "--progress", "plain",
        ],
        capture_output=True, text=True, timeout=110, check=False,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "(4 workers, 1 actors each, no data plane)" in said
    (stats,) = tmp_path.glob("runs/*/*/*/*/stats.csv")
    rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(stats.open())}
    assert not [key for key in rows if key[0] == "http"], sorted(rows)  # no router request
    resumes = int(rows[("grpc", "ResumeActor")]["Request Count"])
    assert resumes > 0 and rows[("grpc", "ResumeActor")]["Failure Count"] == "0"
    assert int(rows[("rps", "TimeToWake")]["Request Count"]) == resumes
