"""What a careless user gives the local substrate is refused in one line, and a run against a
substrate that can never place its actors says why (issue 38):

- `substrate serve --worker-memory 1` (or a pool that small) was accepted, and every wake was
  then refused for as long as it ran: now refused at start, naming the flag and the smallest
  template's reservation;
- a run whose template fits no worker (64Mi workers, the 1Gi default template) failed after
  its registration deadline with "no answer in time" while failures.csv held thousands of
  RESOURCE_EXHAUSTED answers: the line now names the failure it booked most often;
- a drain of a worker with a 10 KB name got a plain-text 400 and a LineTooLong traceback on
  the substrate's console: now the wire's JSON 400 (INVALID_ARGUMENT), and a request line
  past what the server reads at all (100 KB) is said in one line, never a traceback.

Real `agentsession` processes and real substrates over real sockets."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from local_substrate.launcher import LocalSubstrateProcess


def agentsession(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentsession_core", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("flags", "flag"),
    [(["--worker-memory", "1"], "--worker-memory"), (["--pool", "tiny=2:1:1"], "--pool")],
)
def test_workers_too_small_for_every_template_are_refused_at_start(
    tmp_path: Path, flags: list[str], flag: str
) -> None:
    done = agentsession("substrate", "serve", "--store", str(tmp_path / "store"), *flags)
    assert done.returncode == 2, done
    assert done.stderr.strip() == (
        f"agentsession: {flag}: no template fits in a worker: the largest worker has 1 bytes, "
        "the smallest template (benchmark-workloads/glutton) reserves 1073741824 bytes for each "
        "actor; give workers at least that, or a smaller template (--template NAMESPACE/NAME=SIZE)"
    )
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())


def test_a_run_whose_template_fits_no_worker_names_the_refusal(tmp_path: Path) -> None:
    with LocalSubstrateProcess(
        workers=2,
        store=tmp_path / "store",
        templates={"test/small": "1Mi"},  # fits: the substrate starts
        extra_args=["--worker-memory", "64Mi"],  # the run's 1Gi template fits nowhere
        log_path=tmp_path / "substrate.log",
    ) as sub:
        done = agentsession(
            "run", "--substrate", sub.url, "--script", "smoke", "--sessions", "2",
            "--registration-deadline-seconds", "5s", "--hold", "3s",
            "--out", str(tmp_path / "out"),
        )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "agentsession run: failed: registration: 0 of 2 sessions registered before the 5 s "
        "deadline: FirstTouch failed "
    ), last
    assert last.endswith(" times, most often RESOURCE_EXHAUSTED"), last


def drain(url: str, name: str) -> tuple[int, str, bytes]:
    request = urllib.request.Request(
        f"{url}/v1/workers/{name}:drain",
        method="POST",
        data=b"{}",
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers.get("content-type", ""), answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("content-type", ""), refused.read()


def test_a_drain_of_a_very_long_worker_name_is_a_json_400_and_no_traceback(
    tmp_path: Path,
) -> None:
    log = tmp_path / "substrate.log"
    with LocalSubstrateProcess(workers=2, store=tmp_path / "store", log_path=log) as sub:
        status, kind, body = drain(sub.url, "w" * 10_000)
        assert (status, kind) == (400, "application/json"), (status, kind, body[:300])
        assert json.loads(body) == {
            "error": {
                "code": "INVALID_ARGUMENT",
                "message": "a worker name of 10000 characters: at most 253",
            }
        }
        status, _, body = drain(sub.url, "w" * 100_000)  # past what the server reads at all
        assert status == 400, body[:300]
        status, _, body = drain(sub.url, "w0")  # and it serves on
        assert status == 200, body[:300]
    said = log.read_text()
    assert "Traceback" not in said, said[-3000:]
    (refusal,) = [line for line in said.splitlines() if "refused by the HTTP parser" in line]
    assert "Got more than 65536 bytes" in refusal
