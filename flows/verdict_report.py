"""`verdict-report`: the example reaction to a failed campaign (deployments/prefect.yaml).

Its deployment's trigger runs it for every `agentsession.campaign.verdict` event whose
verdict is `fail`, with the event's fields as parameters. It needs nothing beyond the Prefect
API: it writes one markdown artifact, `<campaign>-failed`, that says what failed and where
the run's files are, and logs the same in one line. Replace it (a webhook, a ticket, a
rerun at a lower level) by pointing the trigger at another deployment.
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import acreate_markdown_artifact

from tasks.publish import artifact_key


def report_markdown(
    campaign: str, tag: str, reason: str, regressions: list[str], location: str
) -> str:
    lines = [f"## {campaign}/{tag}: fail", "", reason or "(no reason given)"]
    if regressions:
        lines += ["", "Regressions against the baseline: " + ", ".join(regressions)]
    lines += ["", f"Run files: `{location}` (gate.json, report.html)"]
    return "\n".join(lines)


@flow(name="verdict-report", log_prints=False, persist_result=False)
async def verdict_report(
    campaign: str,
    tag: str = "",
    reason: str = "",
    regressions: list[str] | None = None,
    location: str = "",
) -> str:
    """Report a campaign whose verdict was fail; returns the markdown."""
    text = report_markdown(campaign, tag, reason, list(regressions or []), location)
    await acreate_markdown_artifact(
        text, key=artifact_key(campaign, "failed"), description=f"{campaign}/{tag} failed"
    )
    get_run_logger().warning(
        "campaign %s/%s failed: %s (files: %s)", campaign, tag, reason, location
    )
    return text
