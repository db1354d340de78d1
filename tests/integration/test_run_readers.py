"""The readers of a stored run, as a user meets them (issue #18, items 3 and 9): real
`agentsession gate`, `gate --baseline`, `report --baseline` and `history` processes against
run directories and a real S3 endpoint (moto's server).

A gate believes only a sealed run: a truncated prefix, a file missing from its manifest or one
byte changed is refused in one line naming the file. A hostile baseline (a FIFO, JSON nested
100,000 deep, a NaN verdict, a 4 GiB gate.json, a link out of the run) is refused by every
reader with the same line, exit 2, without a traceback (and without waiting on the FIFO: a
reader that did would not end within its command's cap); history lists it with that line.
The runs are gate_runs.write_run's (gate.json schema 2, hold_seconds.jsonl, campaign.json)
plus the other files a campaign writes, sealed by RunDir.write_manifest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentsession_core.judge.artifacts import windows_jsonl
from agentsession_core.output.run_dir import RunDir
from agentsession_core.output.upload import s3_client, upload_run
from tests.unit import gate_runs

pytestmark = pytest.mark.timeout(600)
CLI = [sys.executable, "-m", "agentsession_core"]
BUCKET = "readers-runs"
# What the issue found on a half-uploaded prefix: no manifest.json, stats or windows.
TRUNCATED = ("campaign.json", "failures.csv", "gate.json", "gauges.jsonl", "logs.txt")
# A FIFO must not hang a reader: every command here has this long (a cap for a reader that
# waits for ever; it takes the time to start Python, however busy the machine).
TIMEOUT = 120


def command(
    *args: str, cwd: Path | None = None, endpoint: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd
    )


def refusal_line(done: subprocess.CompletedProcess[str], *says: str) -> str:
    """The one line a refusal prints (exit 2, no traceback), without its prefix."""
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert all(part in lines[0] for part in says), lines[0]
    assert len(lines[0]) < 1000
    return lines[0].removeprefix("agentsession: ")


def real_run(root: Path, run_ts: int, *, p50_ms: float = 40, tag: str = "night") -> Path:
    """A sealed run with every file a campaign writes (the judged ones real-shaped)."""
    run = gate_runs.write_run(
        root, run_ts, gate_runs.seconds(p50_ms=p50_ms, seconds=120, seed=run_ts), tag=tag
    )
    (run / "windows.jsonl").write_text(windows_jsonl([gate_runs.window(0)]))
    (run / "stats.csv").write_text("Type,Name,Request Count\nrps,TimeToWake,480\n")
    (run / "failures.csv").write_text("Method,Name,Error,Occurrences\n")
    (run / "stats.jsonl").write_text('{"metric": "rps_TimeToWake", "measurements": {}}\n')
    (run / "gauges.jsonl").write_text('{"t": 1000, "name": "sessions", "value": 12}\n')
    (run / "logs.txt").write_text("a log line\n" * 50)
    RunDir(run).write_manifest()
    return run


@pytest.fixture(scope="module")
def endpoint(s3_server: str) -> str:
    s3_client(s3_server).create_bucket(Bucket=BUCKET)
    return s3_server


def put_prefix(endpoint: str, run: Path, prefix: str, names: list[str] | None = None) -> str:
    """Plain puts of the run's files (no checksum metadata), as a hand copy would."""
    client = s3_client(endpoint)
    for name in names if names is not None else sorted(p.name for p in run.iterdir()):
        client.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=(run / name).read_bytes())
    return f"s3://{BUCKET}/{prefix}"


def where(kind: str, endpoint: str | None, run: Path, names: list[str] | None, tag: str) -> str:
    if kind == "local":
        if names is None:
            return str(run)
        copy = run.parent / f"{run.name}-{tag}"
        copy.mkdir()
        for name in names:
            shutil.copy(run / name, copy / name)
        return str(copy)
    assert endpoint is not None
    return put_prefix(endpoint, run, f"{tag}/{run.name}", names)


# --------------------------------------------------------------------------- item 3
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_truncated_run_is_refused_naming_manifest_json(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    endpoint = request.getfixturevalue("endpoint") if kind == "s3" else None
    run = real_run(tmp_path, 1_000)
    location = where(kind, endpoint, run, list(TRUNCATED), "truncated")
    line = refusal_line(command("gate", location, endpoint=endpoint), "manifest.json: missing")
    assert line.startswith(location) and "never sealed" in line


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_a_file_missing_from_a_sealed_run_is_refused_naming_it(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    endpoint = request.getfixturevalue("endpoint") if kind == "s3" else None
    run = real_run(tmp_path, 1_000)
    kept = sorted(p.name for p in run.iterdir() if p.name != "windows.jsonl")
    location = where(kind, endpoint, run, kept, "missing")
    refusal_line(command("gate", location, endpoint=endpoint), "windows.jsonl: missing")


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_one_byte_changed_is_refused_naming_the_file(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    endpoint = request.getfixturevalue("endpoint") if kind == "s3" else None
    run = real_run(tmp_path, 1_000)
    assert command("gate", str(run)).returncode == 0  # the sealed run passes
    data = bytearray((run / "gauges.jsonl").read_bytes())
    data[10] ^= 0x01  # same size: only the sha256 can tell
    (run / "gauges.jsonl").write_bytes(bytes(data))
    location = where(kind, endpoint, run, None, "altered")
    refusal_line(
        command("gate", location, endpoint=endpoint), "gauges.jsonl: altered: sha256 differs"
    )


def test_an_uploaded_run_is_verified_from_its_checksums_and_an_overwrite_caught(
    endpoint: str, tmp_path: Path
) -> None:
    run = real_run(tmp_path, 1_000)
    uploaded = upload_run(
        run, f"s3://{BUCKET}/uploaded", local_root=tmp_path, endpoint_url=endpoint
    )
    done = command("gate", uploaded.location, endpoint=endpoint)
    assert done.returncode == 0, done.stderr
    # An object put again with other bytes (no checksum metadata) is read and hashed.
    bucket_key = uploaded.location.removeprefix(f"s3://{BUCKET}/") + "/logs.txt"
    body = (run / "logs.txt").read_bytes().replace(b"a log", b"A log", 1)
    s3_client(endpoint).put_object(Bucket=BUCKET, Key=bucket_key, Body=body)
    refusal_line(command("gate", uploaded.location, endpoint=endpoint), "logs.txt: altered")


# --------------------------------------------------------------------------- item 9
def fifo(run: Path) -> None:
    (run / "gate.json").unlink()
    os.mkfifo(run / "gate.json")
    RunDir(run).write_manifest()  # a FIFO is no file of the run: not listed


def deep(run: Path) -> None:
    depth = 100_000
    (run / "gate.json").write_text('{"verdict": ' + "[" * depth + "]" * depth + "}")
    RunDir(run).write_manifest()


def nan_verdict(run: Path) -> None:
    doc = json.loads((run / "gate.json").read_text())
    doc["verdict"] = float("nan")
    (run / "gate.json").write_text(json.dumps(doc))  # Python writes NaN; JSON has none
    RunDir(run).write_manifest()


def over_cap(run: Path) -> None:
    os.truncate(run / "gate.json", 4 << 30)  # sparse: 4 GiB that cost nothing to make


def link_out(run: Path) -> None:
    outside = run.parents[5] / "elsewhere-gate.json"
    shutil.move(run / "gate.json", outside)
    (run / "gate.json").symlink_to(outside)
    RunDir(run).write_manifest()  # write_manifest follows the link: listed, and refused


HOSTILE = {
    "fifo": (fifo, "gate.json: not a regular file (a FIFO)"),
    "deep": (deep, "gate.json: not valid JSON (nested deeper than 64 levels)"),
    "nan": (nan_verdict, "gate.json: not valid JSON (a non-finite number at line 1"),
    "over-cap": (over_cap, "gate.json: 4294967296 bytes, over the 4 MiB cap for gate.json"),
    "link": (link_out, "gate.json: not a regular file (a symbolic link)"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_baseline_is_refused_by_every_reader_in_the_same_line(
    case: str, tmp_path: Path
) -> None:
    damage, says = HOSTILE[case]
    root = tmp_path / "out"
    hostile = real_run(root, 1_000, tag="hostile")
    good = real_run(root, 2_000, tag="good")
    damage(hostile)
    line = refusal_line(command("gate", str(hostile)), str(hostile / "gate.json"), says)
    assert refusal_line(command("gate", str(good), "--baseline", str(hostile))) == line
    page = tmp_path / "compare.html"
    done = command("report", str(good), "--baseline", str(hostile), "-o", str(page))
    assert refusal_line(done) == line and not page.exists()
    done = command("history", str(root), cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    runs = json.loads((tmp_path / "history.json").read_text())["runs"]
    assert [r["error"] for r in runs] == [line, None]  # listed with the reason, not judged
    assert runs[0]["verdict"] == "void" and runs[1]["verdict"] == "pass"


def test_baseline_auto_skips_an_unverifiable_run_with_a_warning_naming_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "out"
    taken = real_run(root, 1_000, tag="taken")
    unsealed = real_run(root, 2_000, tag="unsealed")
    (unsealed / "manifest.json").unlink()  # killed before it was sealed
    current = real_run(root, 3_000, tag="current")
    done = command("gate", str(current), "--baseline", "auto")
    assert done.returncode == 0, done.stderr
    assert f"baseline auto: {unsealed} skipped: {unsealed}/manifest.json: missing" in done.stderr
    doc = json.loads(done.stdout)
    assert doc["baseline"]["status"] == "compared"
    assert doc["baseline"]["locations"] == [str(taken)]
