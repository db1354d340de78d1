"""`agentsession run` argument handling, in process: flags generated from RunParams,
durations, --params/--set, parameter errors (exit 2, one line naming the dotted path) and a
broken script (exit 1) all refused before any run directory or substrate exists."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentsession_core.cli import build_parser, main
from agentsession_core.cli.model_flags import add_model_flags, leaves
from agentsession_core.cli.run import resolve
from agentsession_core.engine.params import RunParams, Section
from agentsession_core.engine.population_params import TurnoverParams, TurnsParams


def _resolve(*argv: str) -> RunParams:
    return resolve(build_parser().parse_args(["run", *argv]))


def test_every_leaf_of_run_params_is_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    flags = {leaf.path: leaf.flags[0] for leaf in leaves(RunParams)}
    assert flags["population.awake"] == "--awake"
    assert flags["population.kind"] == "--population"
    assert flags["population.registration_quiet_seconds"] == "--registration-quiet-seconds"
    assert flags["target.local_workers"] == "--local-workers"
    assert flags["cleanup.concurrency"] == "--cleanup-concurrency"
    assert flags["target.protocol"] == "--protocol"
    assert flags["target.token_file"] == "--token-file"
    assert flags["generator.shards"] == "--shards"
    assert flags["generator.cluster"] == "--cluster"
    assert flags["generator.min_shards"] == "--min-shards"
    assert flags["server.enabled"] == "--server-metrics"
    assert flags["target.metrics_url"] == "--metrics-url"
    assert flags["target.max_answer_bytes"] == "--max-answer-bytes"
    assert flags["target.local_start_timeout_seconds"] == "--local-start-timeout-seconds"
    assert flags["population.swap_pacing"] == "--swap-pacing"
    assert flags["target.worker_pools"] == "--worker-pools"
    assert flags["target.router_ca_file"] == "--router-ca-file"
    assert flags["server.preset"] == "--server-preset"
    assert len(set(flags.values())) == len(flags)  # no flag sets two leaves
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = capsys.readouterr().out
    for flag in flags.values():
        assert flag in help_text
    assert "--registration-quiet" in help_text  # the historical spelling still works


def test_sizes_reach_the_parameters() -> None:
    assert _resolve("--max-answer-bytes", "1Mi").target.max_answer_bytes == 2**20
    assert _resolve().target.max_answer_bytes == 64 * 2**20


def test_durations_and_flags_reach_the_parameters() -> None:
    args = build_parser().parse_args(["run", "--hold", "10m"])
    assert args.hold == 600.0
    params = _resolve(
        "--registration-quiet",
        "2s",
        "--population",
        "turnover",
        "--lifecycle-mode",
        "pause",
        "--sessions",
        "20",
        "--awake",
        "4",
        "--substrate",
        "http://127.0.0.1:9",
    )
    p = params.population
    assert isinstance(p, TurnoverParams) and p.registration_quiet_seconds == 2.0
    assert (p.kind, p.lifecycle_mode, p.sessions, p.awake) == ("turnover", "pause", 20, 4)
    turns = _resolve("--population", "turns", "--turn-mean-seconds", "1.5s").population
    assert isinstance(turns, TurnsParams) and turns.turn_mean_seconds == 1.5
    assert params.target.substrate == "http://127.0.0.1:9"
    assert build_parser().parse_args(["run"]).hold == 60.0


def test_params_file_then_flags_then_set(tmp_path: Path) -> None:
    file = tmp_path / "run.yaml"
    file.write_text("population:\n  kind: turnover\n  sessions: 30\n  awake: 2\nseed: 3\n")
    params = _resolve("--params", str(file), "--awake", "5", "--set", "population.awake=6")
    assert (params.population.kind, params.population.sessions) == ("turnover", 30)
    assert params.population.awake == 6 and params.seed == 3


def test_the_token_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSESSION_TOKEN", "from-env")
    assert _resolve().target.token == "from-env"


def test_a_params_file_token_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTSESSION_TOKEN", "from-env")
    file = tmp_path / "p.yaml"
    file.write_text("target:\n  token: from-file\n")
    assert _resolve("--params", str(file), "--sessions", "3").target.token == "from-file"


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--token", "secret"], "--token:"),
        (["--set", "target.token=secret"], "--set target.token:"),
    ],
)
def test_a_token_on_the_command_line_is_refused_in_one_line(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *argv, "--sessions", "2", "--print-params"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"agentsession run: {flag}"), lines
    assert "AGENTSESSION_TOKEN" in lines[0] and "--params" in lines[0]
    assert "secret" not in captured.err + captured.out


def test_print_params_redacts_the_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AGENTSESSION_TOKEN", "secret")
    assert main(["run", "--population", "turnover", "--awake", "2", "--print-params"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["target"]["token"] == "***" and printed["population"]["awake"] == 2


def test_two_leaves_with_one_flag_fail_when_the_parser_is_built() -> None:
    class A(Section):
        workers: int = 1

    class B(Section):
        workers: int = 2

    class Clash(BaseModel):
        a: A = A()
        b: B = B()

    with pytest.raises(ValueError, match=r"--workers would set both a\.workers and b\.workers"):
        add_model_flags(argparse.ArgumentParser(), Clash)


def test_a_bad_duration_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--hold", "ten minutes"])
    assert exited.value.code == 2
    assert "--hold" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["--population", "turnover", "--sessions", "2", "--awake", "3"],
            "agentsession run: parameter population.awake: awake (3) exceeds sessions (2)",
        ),
        (
            ["--registration-quiet-seconds", "soon"],
            "agentsession run: parameter population.registration_quiet_seconds: bad duration "
            "'soon': expected a number at 'soon'",
        ),
        (
            ["--think-scale", "inf"],
            "agentsession run: parameter think_scale: Input should be a finite number",
        ),
        (
            ["--set", "population.sesions=3"],
            "agentsession run: parameter population.sesions: Extra inputs are not permitted",
        ),
        (
            ["--population", "spawn", "--target-rps", "5"],
            "agentsession run: parameter population.target_rps: spawn has no target_rps "
            "(it is turnover's, cold-resume's)",
        ),
        (
            ["--awake", "2"],  # kind left out: closed
            "agentsession run: parameter population.awake: closed has no awake (it is turnover's)",
        ),
        (
            ["--population", "burst", "--set", "population.at_once=true"],
            "agentsession run: parameter population.at_once: burst has no at_once (it is spawn's)",
        ),
    ],
)
def test_a_bad_parameter_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], line: str
) -> None:
    out = tmp_path / "artifacts"
    code = main(["run", *argv, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [line]
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


def test_substrate_serve_refuses_a_token_flag_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["substrate", "serve", "--token", "secret"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentsession: --token:"), lines
    assert "AGENTSESSION_SUBSTRATE_TOKEN" in lines[0] and "--token-file" in lines[0]
    assert "secret" not in captured.err + captured.out


def test_substrate_serve_takes_its_token_from_a_file_or_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agentsession_core.errors import UsageError
    from local_substrate.cli import config_from_args

    def config(*argv: str) -> str | None:
        return config_from_args(build_parser().parse_args(["substrate", "serve", *argv])).token

    monkeypatch.setenv("AGENTSESSION_SUBSTRATE_TOKEN", "from-env")
    assert config() == "from-env"
    file = tmp_path / "token"
    file.write_text("from-file\n")
    assert config("--token-file", str(file)) == "from-file"
    file.write_text("\n")
    with pytest.raises(UsageError, match="holds no token"):
        config("--token-file", str(file))


SPAWN_WITH_A_RATE = (
    "parameter population.target_rps: spawn has no target_rps (it is turnover's, cold-resume's)"
)


def test_a_params_file_with_another_kinds_field_exits_2_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    file = tmp_path / "spawn.yaml"
    file.write_text("population: {kind: spawn, sessions: 10, target_rps: 5}\n")
    assert main(["run", "--params", str(file), "--print-params"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [f"agentsession run: {file}: {SPAWN_WITH_A_RATE}"]
    assert captured.out == ""


def test_a_campaign_switched_to_spawn_with_a_rate_exits_2_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["campaign", "--preset", "demo", "--set", "population.kind=spawn"]
    assert main([*argv, "--set", "population.target_rps=5", "--print-params"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"with --set: {SPAWN_WITH_A_RATE}"), err


def test_a_switched_kind_leaves_the_files_fields_of_the_old_kind_behind(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The file chose awake and target_rps for its turnover; --population turns leaves them
    behind rather than refusing what the command line never said."""
    file = tmp_path / "turnover.yaml"
    file.write_text("population: {kind: turnover, sessions: 8, awake: 2, target_rps: 3}\n")
    assert main(["run", "--params", str(file), "--population", "turns", "--print-params"]) == 0
    population = json.loads(capsys.readouterr().out)["population"]
    assert population["kind"] == "turns" and population["sessions"] == 8
    assert "awake" not in population and "target_rps" not in population
