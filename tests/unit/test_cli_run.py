"""`agentsession run` argument handling, in process: durations, parameter errors (exit 2,
one line naming the parameter) and a broken script (exit 1) all refused before any run
directory or substrate exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsession_core.cli import build_parser, main


def test_durations_and_flags_reach_the_parameters() -> None:
    args = build_parser().parse_args(
        [
            "run",
            "--hold",
            "10m",
            "--registration-quiet",
            "2s",
            "--turn-mean",
            "1.5s",
            "--population",
            "turnover",
            "--lifecycle-mode",
            "pause",
        ]
    )
    assert args.hold == 600.0 and args.registration_quiet == 2.0 and args.turn_mean == 1.5
    assert args.population == "turnover" and args.lifecycle_mode == "pause"


def test_a_bad_duration_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--hold", "ten minutes"])
    assert exited.value.code == 2
    assert "--hold" in capsys.readouterr().err


def test_a_bad_parameter_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "artifacts"
    code = main(
        ["run", "--population", "turnover", "--sessions", "2", "--awake", "3", "--out", str(out)]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == ["agentsession run: parameters: awake (3) exceeds sessions (2)"]
    assert not out.exists()


def test_a_missing_script_exits_1_before_a_run_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "artifacts"
    code = main(["run", "--script", str(tmp_path / "nope.yaml"), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and "nope.yaml" in err[0], err
    assert not out.exists()
