"""The gate's Markdown summary over real runs (docs/SPEC.md §6.1): two short campaigns against
one local substrate over the ate wire, the second with every wake slowed by the substrate's
`wake:latency` fault, then `agentsession gate B --baseline A --summary FILE` as a GitHub
Actions step runs it (a subprocess, `GITHUB_STEP_SUMMARY` naming a file an earlier step
wrote to):

* the summary's table, read back as a Markdown reader reads it, has a row per judged figure
  whose values, change, interval and status are gate.json's; the regression leads;
* the same Markdown is appended to the step summary, after what was there, once per call;
* a step summary that cannot be written (a directory at its name) is a warning and the exit
  code stays the verdict's (1: fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.run.run import run_on_fresh_loop
from local_substrate.launcher import LocalSubstrate
from tests.integration.test_gate_noise import SLOW_WAKE, campaign, params
from tests.unit.markdown_tables import number, table_after, unescape

pytestmark = pytest.mark.timeout(300)


async def two_runs(out: Path) -> dict[str, Path]:
    async with LocalSubstrate(workers=6, store=out / "store") as sub:
        a = await campaign(params(sub, out, "a"))
        await sub.set_faults([SLOW_WAKE])
        b = await campaign(params(sub, out, "b"))
        await sub.set_faults([])
    return {"a": a["dir"], "b": b["dir"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return run_on_fresh_loop(two_runs(tmp_path_factory.mktemp("gate-summary")))


def gate(step_summary: Path, *args: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(step_summary)}
    return subprocess.run(
        [sys.executable, "-m", "agentsession_core", "gate", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_the_summary_tabulates_the_judged_figures_and_is_appended_to_the_job_s(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    step = tmp_path / "step_summary.md"
    step.write_text("## build\n\nbuilt ok\n")  # an earlier step's
    out = tmp_path / "summary.md"
    done = gate(step, runs["b"], "--baseline", runs["a"], "--summary", out)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["verdict"] == "fail" and "TimeToWake.p50" in doc["baseline"]["regressions"]
    text = out.read_text()
    assert unescape(text.splitlines()[0]) == "### ❌ gate: FAIL — gatenoise/b"
    assert unescape(text.splitlines()[2]) == f"Reason: {doc['reason']}"

    rows = table_after(text, "**Against the baseline**")
    metrics = {m["metric"]: m for m in doc["baseline"]["metrics"]}
    assert sorted(r["figure"] for r in rows) == sorted(metrics)
    for row in rows:
        m = metrics[row["figure"]]
        assert number(row["baseline"]) == pytest.approx(m["baseline"], rel=0.01, abs=0.06)
        assert number(row["this run"]) == pytest.approx(m["current"], rel=0.01, abs=0.06)
        assert number(row["change (+ worse)"]) == pytest.approx(m["change"], abs=0.0006)
        if m.get("interval"):
            low, high = (number(x) for x in row["interval"].strip("[]").split(", "))
            assert (low, high) == pytest.approx(tuple(m["interval"]), abs=0.0006)
        assert row["status"].split(":")[0].strip("*") == m["status"], row
    assert rows[0]["figure"] in doc["baseline"]["regressions"]  # the regressions lead
    wake = next(r for r in rows if r["figure"] == "TimeToWake.p50")
    assert wake["status"] == "**regressed**" and wake["this run"].endswith(("ms", " s"))

    windows = table_after(text, "**Windows**")
    assert [(int(w["window"]), w["outcome"]) for w in windows] == [
        (w["index"], w["outcome"]) for w in doc["windows"]
    ]
    assert f"Report: `{runs['b']}/report.html`" in text

    # Appended after the earlier step's, never over it; a second call appends again.
    assert step.read_text() == "## build\n\nbuilt ok\n\n" + text
    again = gate(step, runs["b"], "--baseline", runs["a"])
    assert again.returncode == 1, again.stderr
    assert step.read_text() == "## build\n\nbuilt ok\n\n" + text + "\n" + text


def test_a_step_summary_that_cannot_be_written_leaves_the_verdict_s_exit_code(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    step = tmp_path / "step_summary"
    step.mkdir()
    out = tmp_path / "summary.md"
    done = gate(step, runs["b"], "--baseline", runs["a"], "--summary", out)
    assert done.returncode == 1, done.stderr
    warning = f"agentsession gate: warning: GITHUB_STEP_SUMMARY {step}: "
    assert [line for line in done.stderr.splitlines() if line.startswith(warning)], done.stderr
    assert out.read_text().startswith("### ❌ gate: FAIL")
    passed = gate(step, runs["a"])
    assert passed.returncode == 0, passed.stderr
    assert warning in passed.stderr
