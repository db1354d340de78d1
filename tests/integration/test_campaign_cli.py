"""`agentsession campaign`: bad parameters are refused before anything starts (no Prefect,
no run directory, no actor), naming the parameter; --print-params shows the resolution."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agentsession_core.cli import main


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--set", "hold_minutes=-1"], "hold_minutes"),
        (["--set", "script=no-such-script"], "script"),
        (["--set", "thresholds=['TimeToWake: p99 < soon']"], "thresholds[0]"),
        (["--set", "hold_minutes=0.25", "--set", "window_seconds=7"], "hold_minutes"),
        (["--set", "population.kind=crowd"], "population.kind"),
        (["--set", "abort.rules=['wobble']"], "abort.rules[0]"),
        (["--set", "hold_minutes"], "--set"),
        (["--preset", "weekly"], "preset"),
    ],
)
def test_bad_parameters_exit_2_naming_the_parameter(args, names, tmp_path, capsys):
    preset = [] if "--preset" in args else ["--preset", "demo"]
    code = main(["campaign", *preset, *args, "--set", f"dest={tmp_path / 'art'}"])
    err = capsys.readouterr().err
    assert code == 2
    assert names in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "art").exists()


def test_params_file_and_print_params(tmp_path, capsys):
    params = tmp_path / "campaign.yaml"
    params.write_text("name: mine\nhold_minutes: 1\nwindow_seconds: 20\nlevels: [1, 2]\n")
    assert main(["campaign", "--params", str(params), "--set", "seed=5", "--print-params"]) == 0
    resolved = json.loads(capsys.readouterr().out)
    assert (resolved["name"], resolved["seed"], resolved["levels"]) == ("mine", 5, [1.0, 2.0])


def test_bad_params_file_names_the_line(tmp_path, capsys):
    params = tmp_path / "campaign.yaml"
    params.write_text("name: mine\nlevels: [1, 2\n")
    assert main(["campaign", "--params", str(params)]) == 2
    assert f"{params} line" in capsys.readouterr().err


@pytest.mark.timeout(600)
def test_print_params_shows_no_token_from_the_environment_or_a_file(tmp_path):
    """In a process of its own, as someone would run it: neither AGENTSESSION_TOKEN nor a
    token in the --params file is printed (issue #11)."""
    params = tmp_path / "campaign.yaml"
    params.write_text("name: mine\ntarget:\n  token: file-token-4c1d\n")
    env = {**os.environ, "AGENTSESSION_TOKEN": "env-token-9f2e"}
    cli = [sys.executable, "-m", "agentsession_core", "campaign"]
    for source, token in ((["--preset", "demo"], None), (["--params", str(params)], "***")):
        done = subprocess.run(
            [*cli, *source, "--print-params"], env=env, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["target"]["token"] == token
        assert "token-" not in done.stdout + done.stderr
