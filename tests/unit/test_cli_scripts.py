"""`agentsession scripts …`, in process for detail and as a real process for exit codes and
the absence of tracebacks."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentsession_core.cli import main
from agentsession_core.script import decode, load_script

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    # Paths like scripts/smoke.yaml in expected output are relative to the checkout.
    monkeypatch.chdir(REPO)


def run(capsys, *argv):
    code = main(["scripts", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list(capsys):
    code, out, err = run(capsys, "list")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "coding-session",
        "personal-assistant",
        "personal-assistant-light",
        "smoke",
    ]
    assert lines[0].split()[1:] == ["20", "steps", "min_actor_memory", "1Gi"]


def test_show_json_for_coding_session(capsys):
    code, out, _ = run(capsys, "show", "coding-session", "--json")
    assert code == 0
    assert len(out.splitlines()) == 1
    summary = json.loads(out)
    assert summary["name"] == "coding-session"
    assert summary["steps"] == 20
    assert summary["ops_per_lap"] == 44
    assert summary["declared_ram_bytes"] == 100663296
    assert summary["declared_disk_bytes"] == 103284736
    assert summary["min_actor_memory_bytes"] == 1073741824
    assert summary["think_seconds_per_lap"] == 69


def test_show_human(capsys):
    code, out, _ = run(capsys, "show", "coding-session")
    assert code == 0
    assert out.splitlines()[0] == "coding-session: 20 steps, 44 ops per lap"
    assert "declared RAM 96Mi, disk 98.5Mi" in out
    assert "think per lap 1m9s" in out
    assert "burn_cpu 3000ms ×2" in out
    assert len(out.splitlines()) == 22


def test_show_by_path(capsys, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\nmin_actor_memory: 1Mi\nsteps:\n"
        "  - {name: a, agent: x, think: 1.5s, ops: [ping: {}]}\n"
    )
    code, out, _ = run(capsys, "show", str(path), "--json")
    assert code == 0
    assert json.loads(out)["think_seconds_per_lap"] == 1.5


def test_validate_good_and_bad(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: Bad\nmin_actor_memory: 1Mi\nsteps: []\n")
    code, out, err = run(
        capsys, "validate", "scripts/smoke.yaml", str(bad), "scripts/coding-session.yaml"
    )
    assert code == 1
    assert out.splitlines() == [
        "ok scripts/smoke.yaml: smoke, 4 steps, 11 ops per lap, RAM 64Ki, disk 48Ki, "
        "min_actor_memory 64Mi",
        "ok scripts/coding-session.yaml: coding-session, 20 steps, 44 ops per lap, RAM 96Mi, "
        "disk 98.5Mi, min_actor_memory 1Gi",
    ]
    assert err == f'agentsession: {bad}: name: "Bad" must match ^[a-z0-9][a-z0-9-]*$\n'


def test_validate_all_good(capsys):
    code, out, err = run(capsys, "validate", "scripts/smoke.yaml")
    assert (code, err) == (0, "")
    assert out.startswith("ok scripts/smoke.yaml: smoke")


def test_encode_prints_canonical_yaml(capsys):
    code, out, _ = run(capsys, "encode", "smoke")
    assert code == 0
    assert out.startswith("name: smoke\nmin_actor_memory: 64Mi\nsteps:\n")
    assert decode(out, "stdout") == load_script("smoke")


def test_show_unknown_name(capsys):
    code, out, err = run(capsys, "show", "nope")
    assert code == 1 and out == ""
    assert err == (
        "agentsession: nope: file: no such file, and not a built-in script "
        "(built-ins: coding-session, personal-assistant, personal-assistant-light, smoke)\n"
    )


def make_bad_inputs(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_bytes(b"")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)))
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as handle:
        handle.truncate(50 * 2**20)
    syntax = tmp_path / "syntax.yaml"
    syntax.write_text("name: t\nsteps: [\n")
    return {
        "empty": (empty, f"{empty}: file: empty"),
        "binary": (binary, f"{binary}: file: binary data"),
        "directory": (tmp_path, f"{tmp_path}: file: is a directory"),
        "missing": (tmp_path / "missing.yaml", f"{tmp_path}/missing.yaml: file: no such file"),
        "huge": (huge, f"{huge}: file: 52428800 bytes is over the 1 MiB limit"),
        "syntax": (syntax, f"{syntax}: line 3, column 1: YAML: "),
    }


@pytest.mark.parametrize("case", ["empty", "binary", "directory", "missing", "huge", "syntax"])
@pytest.mark.parametrize("command", ["validate", "show", "encode"])
def test_bad_input_is_one_line_and_exit_1(capsys, tmp_path, case, command):
    path, start = make_bad_inputs(tmp_path)[case]
    code, out, err = run(capsys, command, str(path))
    assert code == 1 and out == ""
    assert err.startswith(f"agentsession: {start}")
    assert err.count("\n") == 1


def test_as_a_real_process_no_traceback(tmp_path):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentsession_core",
            "scripts",
            "validate",
            str(binary),
            "scripts/smoke.yaml",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"agentsession: {binary}: file: binary data")
    assert result.stdout.startswith("ok scripts/smoke.yaml")
    shown = subprocess.run(
        [sys.executable, "-m", "agentsession_core", "scripts", "show", "coding-session", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0
    assert json.loads(shown.stdout)["ops_per_lap"] == 44
