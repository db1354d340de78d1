"""Judged runs against a real local substrate (subprocess, real sockets):

* a threshold the substrate cannot meet yields `break`, gate.json says fail and
  `agentsession gate` exits 1; the report is written;
* an abort rule trips within seconds of the substrate being killed, ends the hold at once,
  and the run still writes complete artifacts.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.run import Run
from agentsession_core.judge.abort import AbortMonitor
from agentsession_core.judge.artifacts import step_window_row, windows_jsonl
from agentsession_core.judge.gate import gate_document
from agentsession_core.judge.thresholds import parse_thresholds
from agentsession_core.judge.verdict import WindowVerdict, judge_window
from agentsession_core.output.report import write_report
from agentsession_core.output.run_dir import verify_manifest
from agentsession_core.substrate.local.launcher import LocalSubstrate

pytestmark = pytest.mark.timeout(180)


def params(url: str, out: Path, name: str) -> RunParams:
    return RunParams(
        target={"substrate": url, "request_timeout_seconds": 5.0},
        script="smoke",
        population={
            "kind": "turnover",
            "sessions": 8,
            "awake": 3,
            "target_rps": 2.0,
            "registration_quiet_seconds": 1.0,
        },
        think_scale=0.05,
        seed=7,
        name=name,
        tag="test",
        out=str(out),
        cleanup={"timeout_seconds": 20.0, "stop_grace_seconds": 2.0},
    )


def add_judged_artifacts(
    run: Run,
    verdicts: list[WindowVerdict],
    abort_reason: str | None,
) -> None:
    """What a campaign adds: step_window rows now, windows/gate/report at the end."""
    p = run.params
    run.extra_rows.extend(step_window_row(v, tag=p.tag, test_name=p.name) for v in verdicts)

    def finalize(run: Run) -> None:
        run.run_dir.write_text("windows.jsonl", windows_jsonl(verdicts))
        run.run_dir.write_json(
            "gate.json",
            gate_document(
                verdicts,
                abort_reason=abort_reason,
                run_status=run.status,
                run={"name": p.name, "tag": p.tag},
            ),
        )
        write_report(run.run_dir.path)

    run.finalizers.append(finalize)


def gate_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentsession_core", "gate", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_an_unmeetable_threshold_breaks_and_the_gate_exits_1(tmp_path: Path) -> None:
    thresholds = parse_thresholds(
        [
            "TimeToWake: p99 < 0.001ms",  # no wake is that fast
            "Step_*: failure_ratio < 0.5",
        ]
    )
    async with LocalSubstrate(workers=3, store=tmp_path / "store") as local:
        p = params(local.url, tmp_path / "out", "unmeetable")
        run = Run(p, handle_signals=False)
        verdicts: list[WindowVerdict] = []
        async with run:
            await run.preflight()
            await run.register()
            await run.fill()
            for index in range(2):
                start, end, reason = await run.hold(4.0)
                assert reason is None
                # Generator health is not consulted here: on a shared 2-core box it may void
                # a short window, and this test is about the substrate's miss.
                verdicts.append(
                    judge_window(
                        run.recorder.window(start, end),
                        thresholds,
                        index=index,
                        level=1.0,
                        target=p.population.target_rps,
                    )
                )
            add_judged_artifacts(run, verdicts, None)
            run.finish()
    assert run.result is not None and run.result.status == "completed"
    assert [v.outcome for v in verdicts] == ["break", "break"]
    wake = verdicts[0].results[0]
    assert wake.passed is False and wake.samples > 0 and wake.observed > 0.001
    assert verdicts[0].results[1].passed is True

    run_dir = run.result.run_dir
    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == "fail"
    assert [w["outcome"] for w in gate["windows"]] == ["break", "break"]
    lines = (run_dir / "windows.jsonl").read_text().splitlines()
    assert len(lines) == 2
    step_rows = [
        json.loads(line)
        for line in (run_dir / "stats.jsonl").read_text().splitlines()
        if '"step_window"' in line
    ]
    assert [r["measurements"]["outcome"] for r in step_rows] == ["break", "break"]
    report = (run_dir / "report.html").read_text()
    assert "FAIL" in report and "<svg" in report and "<script" not in report
    assert verify_manifest(run_dir / "manifest.json") == []

    done = gate_cli(str(run_dir))
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["verdict"] == "fail"
    assert "FAIL" in done.stderr and "TimeToWake: p99 < 0.001ms" in done.stderr


async def test_an_abort_rule_trips_within_seconds_of_the_substrate_being_killed(
    tmp_path: Path,
) -> None:
    rules = parse_thresholds(
        [
            "achieved_rps >= 0.5 * target",
            "TimeToWake: failure_ratio < 0.5 (min 3)",
        ],
        where="abort",
        abort=True,
    )
    async with LocalSubstrate(workers=3, store=tmp_path / "store") as local:
        p = params(local.url, tmp_path / "out", "killed")
        run = Run(p, handle_signals=False)
        verdicts: list[WindowVerdict] = []
        async with run:
            await run.preflight()
            await run.register()
            await run.fill()
            monitor = AbortMonitor(
                run.recorder, rules, sliding_s=3, delay_s=2, target=lambda: p.population.target_rps
            )
            hold = asyncio.create_task(run.hold(120.0, should_stop=monitor.check))
            await asyncio.sleep(6.0)
            assert not hold.done(), monitor.reason  # healthy so far: no false trip
            local.kill()
            killed_at = time.monotonic()
            start, end, reason = await asyncio.wait_for(hold, 30.0)
            stopped_after = time.monotonic() - killed_at
            verdicts.append(
                judge_window(
                    run.recorder.window(start, end),
                    [],
                    index=0,
                    level=1.0,
                    target=p.population.target_rps,
                    abort_reason=reason,
                )
            )
            add_judged_artifacts(run, verdicts, reason)
            run.finish("aborted", reason)
    assert reason is not None and reason.startswith("abort rule"), reason
    # The substrate watchdog would need ~10 s; the abort rule must be quicker than that.
    print(f"abort: hold stopped {stopped_after:.2f}s after the kill: {reason}")
    assert stopped_after < 8.0, f"hold stopped {stopped_after:.1f}s after the kill"
    assert run.result is not None and run.result.status == "aborted"
    run_dir = run.result.run_dir
    status = json.loads((run_dir / "status.json").read_text())
    assert status["abort_reason"] == reason and status["stats_generated"] is True
    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == "fail" and gate["windows"][0]["outcome"] == "aborted"
    for name in (
        "stats.csv",
        "stats_history.csv",
        "stats.jsonl",
        "windows.jsonl",
        "report.html",
        "manifest.json",
    ):
        assert (run_dir / name).is_file(), name
    assert verify_manifest(run_dir / "manifest.json") == []
    assert gate_cli(str(run_dir)).returncode == 1
