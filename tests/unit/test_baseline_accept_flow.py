"""The `baseline-accept` flow's parts that need no Prefect API (flows/baseline_accept.py):
its artifact's text, the campaign name its key comes from, and who accepts by default. The
flow itself runs under Prefect's test harness in
tests/integration/test_flow_baseline_accept.py."""

from __future__ import annotations

from pathlib import Path

from agentsession_core.cli.baseline import accept_lines
from agentsession_core.judge.acceptance import Acceptance, accept_run, default_by
from flows.baseline_accept import NO_CAMPAIGN, accepted_markdown, campaign_name, prefect_by
from tests.unit import gate_runs
from tests.unit.gate_runs import seconds


def acceptance(**fields: object) -> Acceptance:
    values: dict = {
        "location": "s3://b/runs/nightly/run_tag=x",
        "reason": "snapshot check on wake, by design",
        "by": "ci@box",
        "accepted_unix": 1_800_000_000.0,
        "verdict": "fail",
        "regressions": ("TimeToWake.p50",),
        "manifest_sha256": "0" * 64,
        **fields,
    }
    return Acceptance(**values)


def test_the_artifact_says_what_who_why_the_verdict_and_what_it_replaced() -> None:
    done = acceptance()
    text = accepted_markdown(done, None)
    assert text.startswith("## Accepted: `s3://b/runs/nightly/run_tag=x`")
    assert "By ci@box, 2027-01-15 08:00:00 UTC: snapshot check on wake, by design" in text
    assert "The run's verdict: **fail** (regressed: TimeToWake.p50)." in text
    assert "No earlier acceptance of this run was replaced." in text
    assert text.endswith("Record: `s3://b/runs/nightly/run_tag=x/acceptance.json`")
    older = acceptance(by="ops@box", reason="an older change", accepted_unix=1_700_000_000.0)
    replaced = accepted_markdown(acceptance(verdict="pass", regressions=()), older)
    assert "**pass** (no regression recorded)" in replaced
    assert "Replaces the acceptance of 2023-11-14 22:13:20 UTC by ops@box: an older change" in (
        replaced
    )


def test_a_reason_renders_as_its_text_not_as_markdown() -> None:
    """The reason and who are a user's text: escaped, so a link or a tag is shown as typed."""
    text = accepted_markdown(acceptance(reason="<b>x</b> [y](javascript:z) | *w*", by="a_b"), None)
    assert r"\<b\>x\</b\> \[y\](javascript:z) \| \*w\*" in text
    assert "By a\\_b," in text and "<b>" not in text


def test_the_flow_logs_the_commands_lines() -> None:
    done = acceptance()
    assert accept_lines(done, None) == [
        "accepted s3://b/runs/nightly/run_tag=x (fail; regressed: TimeToWake.p50) by ci@box: "
        "snapshot check on wake, by design",
        "s3://b/runs/nightly/run_tag=x/acceptance.json",
    ]
    older = acceptance(by="ops@box", reason="older", accepted_unix=1_700_000_000.0)
    assert accept_lines(done, older)[0] == (
        "replaces the acceptance of 2023-11-14 22:13:20 UTC by ops@box: older"
    )


def test_the_artifact_key_is_the_runs_campaign(tmp_path: Path) -> None:
    run = gate_runs.write_run(tmp_path, 1, seconds(p50_ms=40, seconds=60, seed=1))
    done, _ = accept_run(str(run), "accepted for the key")
    assert campaign_name(done.location, None) == "nightly"
    # A name that is no Prefect key part, or none at all: the fallback key.
    odd = gate_runs.write_run(tmp_path, 2, seconds(p50_ms=40, seconds=60, seed=2), name="Odd Name")
    assert campaign_name(str(odd), None) == NO_CAMPAIGN
    assert campaign_name(str(tmp_path / "nowhere"), None) == NO_CAMPAIGN


def test_outside_a_flow_run_who_accepts_is_the_commands_default() -> None:
    assert prefect_by() == default_by()
