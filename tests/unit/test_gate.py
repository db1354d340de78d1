"""gate.json verdicts, baseline comparison, reading runs and `agentsession gate` exit codes."""

import json
from pathlib import Path

import pytest

from agentsession_core.cli import main
from agentsession_core.judge.artifacts import windows_jsonl
from agentsession_core.judge.gate import gate_document, with_baseline, worst_headline
from agentsession_core.judge.gate_document import GateInputError
from agentsession_core.judge.stored_run import StoredRun, load_run
from agentsession_core.judge.verdict import ThresholdResult, WindowVerdict
from agentsession_core.output.run_dir import RunDir, verify_manifest
from tests.unit import gate_runs
from tests.unit.gate_runs import seconds


def verdict(index, outcome, *, level=1.0, wake_p99=100.0, failure_ratio=0.0, rps=2.0, missed=False):
    results = [ThresholdResult("TimeToWake: p99 < 2s", wake_p99, 50, not missed, "x")]
    return WindowVerdict(
        index=index,
        level=level,
        start_unix=100.0 + 10 * index,
        end_unix=110.0 + 10 * index,
        outcome=outcome,
        results=results,
        headline={
            "TimeToWake": {
                "p50": wake_p99 / 2,
                "p90": wake_p99 * 0.8,
                "p99": wake_p99,
                "p99_9": wake_p99 * 1.1,
            },
            "requests": {"failure_ratio": failure_ratio, "achieved_rps": rps},
        },
        void_reason="cpu 99% > 90%" if outcome == "void" else None,
        abort_reason="abort rule tripped" if outcome == "aborted" else None,
    )


@pytest.mark.parametrize(
    ("outcomes", "status", "abort", "expected"),
    [
        (["pass", "pass"], "completed", None, "pass"),
        (["pass", "break"], "completed", None, "fail"),
        (["pass", "aborted"], "aborted", "abort rule tripped", "fail"),
        (["pass", "void"], "completed", None, "void"),
        (["void", "break"], "completed", None, "fail"),
        ([], "completed", None, "void"),
        (["pass"], "cancelled", None, "void"),
        (["pass", "void"], "cancelled", "received SIGTERM", "void"),  # an operator stopped it
        (["break", "void"], "cancelled", "received SIGTERM", "fail"),  # it broke before that
        (["pass"], "failed", None, "fail"),
    ],
)
def test_verdict(outcomes, status, abort, expected):
    vs = [verdict(i, o, missed=o == "break") for i, o in enumerate(outcomes)]
    doc = gate_document(vs, abort_reason=abort, run_status=status)
    assert doc["verdict"] == expected, doc["reason"]
    assert [w["outcome"] for w in doc["windows"]] == outcomes
    if "break" in outcomes and expected == "fail":
        assert "TimeToWake: p99 < 2s" in doc["reason"]
    json.dumps(doc)  # serialisable as is


def test_document_holds_ramp_drift_and_headline():
    vs = [
        verdict(0, "pass", wake_p99=100),
        verdict(1, "pass", wake_p99=120),
        verdict(2, "pass", level=1.5, wake_p99=300),
        verdict(3, "break", level=2.0, wake_p99=3000, missed=True),
    ]
    doc = gate_document(
        vs, abort_reason=None, run_status="completed", run={"name": "n", "tag": "t"}
    )
    assert doc["ramp"] == {"last_held_level": 1.5, "first_broken_level": 2.0}
    assert doc["drift"]["TimeToWake.p99"] == pytest.approx(20.0)
    assert doc["headline"]["TimeToWake"]["p99"] == 120  # worst of the first level
    assert doc["run"] == {"name": "n", "tag": "t"}
    assert doc["windows"][3]["missed"] == ["TimeToWake: p99 < 2s"]


def test_worst_headline_takes_the_worse_direction():
    h = worst_headline(
        [
            verdict(0, "pass", rps=2.0, failure_ratio=0.01),
            verdict(1, "pass", rps=1.5, failure_ratio=0.0),
            verdict(2, "void", rps=0.0, failure_ratio=0.9),
        ]
    )
    assert h["requests"] == {"failure_ratio": 0.01, "achieved_rps": 1.5}


def test_a_void_run_stays_void_whatever_the_comparison_says():
    base = gate_runs.gate_of(seconds(p50_ms=40, seconds=600, seed=1))
    slow = gate_runs.gate_of(seconds(p50_ms=200, seconds=600, seed=2), outcomes=("pass", "void"))
    doc = with_baseline(slow, StoredRun.of("base", base), 0.2)
    assert doc["baseline"]["regressions"]  # the figures did move ...
    assert doc["verdict"] == "void"  # ... but a void window's run is never a fail
    assert "window 1 is void: generator saturated" in doc["reason"]


def test_a_baseline_that_measured_nothing_is_refused_in_one_line():
    run = gate_runs.gate_of(seconds(p50_ms=40, seconds=60))
    for outcomes, word in ((("void",), "void"), (("break",), "fail")):
        bad = gate_runs.gate_of(seconds(p50_ms=40, seconds=60), outcomes=outcomes)
        refused = f"baseline there: not a baseline: its verdict is {word}"
        with pytest.raises(GateInputError, match=refused):
            with_baseline(run, StoredRun.of("there", bad), 0.2)


def test_a_baseline_with_other_parameters_is_not_comparable_and_names_them():
    run = gate_runs.gate_of(seconds(p50_ms=40, seconds=60))
    other = gate_runs.gate_of(
        seconds(p50_ms=40, seconds=60),
        script="coding-session",
        population={**gate_runs.PARAMS["population"], "target_rps": 5},
    )
    doc = with_baseline(run, StoredRun.of("other", other), 0.2)
    assert doc["baseline"]["status"] == "not comparable" and doc["baseline"]["metrics"] == []
    assert doc["baseline"]["differences"] == [
        "population.target_rps: 5 → 2",
        "script: 'coding-session' → 'smoke'",
    ]
    assert doc["verdict"] == "pass"
    assert "baseline not comparable (population.target_rps: 5 → 2, script:" in doc["reason"]


def write_run(path: Path, vs, *, status="completed", gate=True) -> Path:
    path.mkdir(parents=True)
    (path / "windows.jsonl").write_text(windows_jsonl(vs))
    (path / "status.json").write_text(json.dumps({"status": status, "abort_reason": None}))
    if gate:
        doc = gate_document(vs, abort_reason=None, run_status=status)
        (path / "gate.json").write_text(json.dumps(doc))
    RunDir(path).write_manifest()  # sealed, as a finished run is (a gate believes no other)
    return path


def test_load_run_reads_gate_and_windows_or_rebuilds_the_gate(tmp_path):
    vs = [verdict(0, "pass"), verdict(1, "break", missed=True)]
    loaded = load_run(str(write_run(tmp_path / "a", vs)))
    assert loaded.gate.verdict == "fail" and loaded.gate_json["verdict"] == "fail"
    assert loaded.windows == vs
    assert loaded.status == {"status": "completed", "abort_reason": None}
    rebuilt = load_run(str(write_run(tmp_path / "b", vs, gate=False)))
    assert rebuilt.gate.verdict == "fail"
    assert load_run(f"file://{tmp_path / 'a' / 'gate.json'}").location == str(tmp_path / "a")


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        (lambda p: None, "no such run directory"),
        (lambda p: p.mkdir(), "neither gate.json nor windows.jsonl"),
        (lambda p: (p.mkdir(), (p / "gate.json").write_text("{nope")), "gate.json: not valid JSON"),
        (lambda p: (p.mkdir(), (p / "gate.json").write_text("[]")), "expected a JSON object"),
        (
            lambda p: (p.mkdir(), (p / "windows.jsonl").write_text('{"index": 0}\n')),
            "windows.jsonl line 1",
        ),
    ],
)
def test_unusable_runs_are_named(tmp_path, setup, fragment):
    run = tmp_path / "run"
    setup(run)
    if run.is_dir():
        RunDir(run).write_manifest()  # sealed: what refuses it is the file, not the manifest
    with pytest.raises(GateInputError) as info:
        load_run(str(run))
    assert fragment in str(info.value) and str(run) in str(info.value)
    assert info.value.exit_code == 2


def test_s3_prefixes_read_through_the_upload_module(tmp_path, monkeypatch):
    from agentsession_core.output import upload  # first-party: a broken import must fail

    run = write_run(tmp_path / "run", [verdict(0, "break", missed=True)], gate=False)
    asked = []

    def head_object(url, **_):
        key = url.removeprefix("s3://bucket/runs/x/")
        if not (run / key).exists():
            return None
        return {"size": (run / key).stat().st_size, "sha256": None, "checksum_sha256": None}

    def read_object(url, **_):
        asked.append(url)
        return (run / url.removeprefix("s3://bucket/runs/x/")).read_bytes()

    monkeypatch.setattr(upload, "head_object", head_object)
    monkeypatch.setattr(upload, "read_object", read_object)
    loaded = load_run("s3://bucket/runs/x/", verify=False)
    assert loaded.gate.verdict == "fail"  # rebuilt from windows.jsonl: no gate.json
    assert "s3://bucket/runs/x/windows.jsonl" in asked

    def broken(url, **_):
        raise upload.UploadError(f"{url}: Could not connect to the endpoint URL")

    monkeypatch.setattr(upload, "head_object", broken)
    with pytest.raises(GateInputError, match="cannot read"):
        load_run("s3://bucket/runs/x", verify=False)


def test_cli_exit_codes_and_baseline(tmp_path, capsys):
    fast = write_run(tmp_path / "fast", [verdict(0, "pass", wake_p99=100)])
    broke = write_run(tmp_path / "broke", [verdict(0, "break", missed=True)])
    void = write_run(tmp_path / "void", [verdict(0, "void")])

    assert main(["gate", str(fast)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "pass"
    assert main(["gate", str(broke)]) == 1
    assert main(["gate", str(void)]) == 2
    assert main(["gate", str(tmp_path / "missing")]) == 2
    assert "no such run directory" in capsys.readouterr().err

    base = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=600, seed=1))
    slow = gate_runs.write_run(tmp_path, 2, seconds(p50_ms=200, seconds=600, seed=2))
    assert main(["gate", str(slow), "--baseline", str(base)]) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert "TimeToWake.p50" in doc["baseline"]["regressions"]
    assert "regression against the baseline: TimeToWake.p50 +" in captured.err
    assert main(["gate", str(slow), "--baseline", str(base), "--max-regression", "1.5"]) == 0
    assert main(["gate", str(base), "--baseline", str(slow)]) == 0  # faster is fine
    assert main(["gate", str(slow), "--baseline", str(void)]) == 2  # a void baseline
    assert "not a baseline: its verdict is void" in capsys.readouterr().err


def test_gate_write_stores_the_comparison_and_the_run_still_verifies(tmp_path, capsys):
    base = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=600, seed=1))
    slow = gate_runs.write_run(tmp_path, 2, seconds(p50_ms=200, seconds=600, seed=2))
    RunDir(slow).write_manifest()
    assert main(["gate", str(slow), "--baseline", str(base), "--write"]) == 1
    stored = json.loads((slow / "gate.json").read_text())
    assert stored["verdict"] == "fail" and stored["baseline"]["location"] == str(base)
    assert verify_manifest(slow) == []
    capsys.readouterr()
    assert main(["gate", str(slow)]) == 1  # what is stored is what a later gate reads


def test_baseline_auto_takes_the_last_good_comparable_runs(tmp_path, capsys):
    good = [
        gate_runs.write_run(tmp_path, ts, seconds(p50_ms=40 + ts, seconds=300, seed=ts))
        for ts in range(1, 7)
    ]
    gate_runs.write_run(tmp_path, 7, seconds(p50_ms=40, seconds=300), outcomes=("void",))
    gate_runs.write_run(tmp_path, 8, seconds(p50_ms=40, seconds=300), think_scale=0.5)
    current = gate_runs.write_run(tmp_path, 9, seconds(p50_ms=44, seconds=300, seed=9))
    gate_runs.write_run(tmp_path, 10, seconds(p50_ms=44, seconds=300, seed=10))  # later
    assert main(["gate", str(current), "--baseline", "auto", "--history", "4"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the void night, the night with another think scale and the later night are left out
    assert doc["baseline"]["locations"] == [str(p) for p in good[-4:]]
    assert doc["baseline"]["spread_from"] == "measured over 4 runs"
    first = gate_runs.write_run(tmp_path / "fresh", 1, seconds(p50_ms=40, seconds=60))
    assert main(["gate", str(first), "--baseline", "auto"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"]["status"] == "none" and "no earlier comparable run" in doc["reason"]


def test_cli_rejects_a_bad_max_regression(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["gate", str(tmp_path), "--max-regression", "-1"])
    assert info.value.code == 2
    assert "--max-regression" in capsys.readouterr().err
