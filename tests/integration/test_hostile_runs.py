"""Bad numbers, hostile files and a full disk, as a user meets them (issue #11): real
commands, each ending in one line, no traceback; refusals before anything starts, and a run
whose disk fills up ends `failed` with its final status and manifest written."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from agentsession_core.output.run_dir import verify_manifest
from tests.integration.mounts import tmpfs
from tests.integration.terminal import SMALL_TURNOVER

pytestmark = pytest.mark.timeout(600)
CLI = [sys.executable, "-m", "agentsession_core"]
RUN = [*CLI, "run", *SMALL_TURNOVER, "--progress", "plain"]
# A cap that only catches a command that never ends (a bomb expanded, a hang): a refusal
# takes the time to start Python and read the file, however busy the machine.
REFUSAL_CAP_S = 120


def laughs() -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def command(args: list[str], timeout: float = REFUSAL_CAP_S) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)


def assert_one_line_refusal(done: subprocess.CompletedProcess[str], code: int, *says: str):
    assert done.returncode == code, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]
    assert all(part in lines[0] for part in says), lines[0]
    assert len(lines[0]) < 1000 and done.stdout == ""


@pytest.fixture
def bomb_script(tmp_path: Path) -> Path:
    path = tmp_path / "bomb.yaml"
    steps = "steps:\n  - {name: a, agent: x, think: *a9, ops: [ping: {}]}\n"
    path.write_text(laughs() + "name: bomb\nmin_actor_memory: *a9\n" + steps)
    return path


def test_a_yaml_bomb_script_is_refused_in_one_line(bomb_script: Path, tmp_path: Path) -> None:
    """Refused by its anchors, before anything expands them (a billion nodes: expanded, the
    command would not end within its cap)."""
    out = tmp_path / "art"
    assert_one_line_refusal(
        command([*RUN, "--script", str(bomb_script), "--out", str(out)]), 1, "anchor &a0"
    )
    assert_one_line_refusal(
        command([*CLI, "campaign", "--preset", "demo", "--set", f"script={bomb_script}"]),
        2,
        "parameter script",
        "anchor &a0",
    )
    assert not out.exists()


def test_a_yaml_bomb_params_file_is_refused_in_one_line(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(laughs() + "hold_minutes: *a9\n")
    for args, code in (
        ([*CLI, "campaign", "--params", str(params)], 2),
        ([*RUN, "--params", str(params), "--out", str(tmp_path / "art")], 2),
    ):
        assert_one_line_refusal(command(args), code, str(params), "anchor &a0")
    assert not (tmp_path / "art").exists()


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["campaign", "--preset", "demo", "--set", "hold_minutes=inf"], "hold_minutes"),
        (["campaign", "--preset", "demo", "--set", "hold_minutes=1e7"], "hold_minutes"),
        (["campaign", "--preset", "demo", "--set", "population.target_rps=.inf"], "target_rps"),
        (["campaign", "--preset", "demo", "--set", "think_scale=.inf"], "think_scale"),
        (
            ["campaign", "--preset", "demo", "--set", "population.registration_quiet_seconds=inf"],
            "registration_quiet_seconds",
        ),
        (["run", "--population", "turnover", "--target-rps", "inf"], "target_rps"),
        (["run", "--think-scale", "1e9"], "think_scale"),
        (["run", "--hold", "10000000s"], "--hold"),
    ],
    ids=lambda v: "-".join(v) if isinstance(v, list) else v,
)
def test_non_finite_and_absurd_numbers_are_refused_before_anything_starts(
    args: list[str], names: str, tmp_path: Path
) -> None:
    where = ["--set", f"dest={tmp_path / 'art'}"] if args[0] == "campaign" else []
    where = where or ["--out", str(tmp_path / "art")]
    assert_one_line_refusal(command([*CLI, *args, *where]), 2, names)
    assert not (tmp_path / "art").exists()


# ------------------------------------------------------------------ a full disk
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 40 KiB tmpfs for a run to fill (`until_the_disk_fills`)."""
    with tmpfs(tmp_path / "disk", "size=40k") as mount:
        yield mount


def until_the_disk_fills(
    args: list[str], disk: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `args` with its artifacts on `disk`; once the fill is done (the hold begins), a
    ballast file takes the disk's last free bytes, so the run's own next write meets a full
    disk mid-hold (left to its own growth it took 20 s and more to get there)."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            if "turnover fill done" in line:
                break
        else:
            pytest.fail(f"the run never reached its hold: {''.join(seen)[-3000:]}")
        with (disk / "ballast").open("wb", buffering=0) as ballast:
            with pytest.raises(OSError, match="No space left on device"):
                while True:
                    ballast.write(bytes(4096))
        out, err = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(args, proc.returncode, out, "".join(seen) + err)


def assert_ended_on_the_full_disk(run_dir: Path, err: str) -> None:
    assert "Traceback" not in err and "Logging error" not in err, err[-3000:]
    said = [line for line in err.splitlines() if "No space left on device" in line]
    assert said and "cannot write the run directory" in said[0], err[-3000:]
    status = orjson.loads((run_dir / "status.json").read_bytes())
    assert status["status"] == "failed" and status["exit_code"] == 1, status
    assert "No space left on device" in status["abort_reason"]
    assert status["actors_deleted"] == status["actors_created"] and status["leaked_actors"] == []
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert "No space left on device" in manifest["incomplete"]
    assert verify_manifest(run_dir) == []


def test_a_run_on_a_full_disk_ends_failed_with_its_final_status(small_disk: Path) -> None:
    done = until_the_disk_fills([*RUN, "--hold", "120s", "--out", str(small_disk)], small_disk, 300)
    assert done.returncode == 1, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, done.stderr[-3000:]
    assert_ended_on_the_full_disk(Path(done.stdout.strip().splitlines()[-1]), done.stderr)


def test_a_campaign_on_a_full_disk_ends_failed_with_its_final_status(small_disk: Path) -> None:
    sets = [f"dest={small_disk}", "hold_minutes=2", "levels=[1.0]", "abort.rules=[]"]
    sets += ["population.sessions=6", "population.awake=2", "target.local_workers=4"]
    sets += ["population.registration_quiet_seconds=0.5"]
    args = [*CLI, "campaign", "--preset", "demo"]
    for setting in sets:
        args += ["--set", setting]
    done = until_the_disk_fills(args, small_disk, 400)
    assert done.returncode == 1, done.stderr[-3000:]
    ours = [line for line in done.stderr.splitlines() if "agentsession - " in line]
    assert sum("No space left on device" in line for line in ours) == 1, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == "agentsession campaign: failed (reason above)"
    assert_ended_on_the_full_disk(Path(done.stdout.strip().splitlines()[-1]), done.stderr)
