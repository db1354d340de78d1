"""`verdict-report`: the example reaction to a failed campaign (deployments/prefect.yaml).

Its deployment's trigger runs it for every `agentsession.campaign.verdict` event whose
verdict is `fail`, with the event's fields as parameters. It writes one markdown artifact,
`<campaign>-failed`, and logs the failure in one line. When it can read the run's gate.json
where the event says the files are (a directory on this box, or an s3:// prefix through
boto3's usual chain), the artifact is the gate's own summary (report/gate_summary.py, what
`agentsession gate --summary` and the campaign's verdict artifact show: the judged figures,
their change and interval, the windows); otherwise it is built from the event's fields alone,
with why the run could not be read. Replace it (a webhook, a ticket, a rerun at a lower
level) by pointing the trigger at another deployment.
"""

from __future__ import annotations

import asyncio

from prefect import flow, get_run_logger
from prefect.artifacts import acreate_markdown_artifact

from agentsession_core.errors import AgentsessionError
from agentsession_core.judge.stored_run import load_run
from agentsession_core.report.gate_summary import gate_summary, md_code, md_text
from tasks.publish import artifact_key


def report_markdown(
    campaign: str, tag: str, reason: str, regressions: list[str], location: str, unread: str = ""
) -> str:
    """The artifact from the event's fields alone; `unread`: why the run's gate.json could
    not be read (every field is escaped: a reason may quote a user's text)."""
    lines = [
        f"## {md_text(campaign)}/{md_text(tag)}: fail",
        "",
        md_text(reason or "(no reason given)"),
    ]
    if regressions:
        lines += ["", "Regressions against the baseline: " + ", ".join(map(md_text, regressions))]
    lines += ["", f"Run files: {md_code(location)} (gate.json, report.html)"]
    if unread:
        lines += ["", f"(The gate's summary is not shown: {md_text(unread)})"]
    return "\n".join(lines)


def run_summary(location: str) -> str:
    """The gate's summary of the run at `location` (its files verified as every reader
    verifies them); AgentsessionError when it cannot be read from here."""
    if not location:
        raise AgentsessionError("the event names no location")
    return gate_summary(load_run(location).gate, location=location)


@flow(name="verdict-report", log_prints=False, persist_result=False)
async def verdict_report(
    campaign: str,
    tag: str = "",
    reason: str = "",
    regressions: list[str] | None = None,
    location: str = "",
) -> str:
    """Report a campaign whose verdict was fail; returns the markdown."""
    try:
        # Reading and verifying the run's files is file or boto3 work: in a thread.
        text = await asyncio.to_thread(run_summary, location)
    except AgentsessionError as exc:
        text = report_markdown(campaign, tag, reason, list(regressions or []), location, str(exc))
    await acreate_markdown_artifact(
        text, key=artifact_key(campaign, "failed"), description=f"{campaign}/{tag} failed"
    )
    get_run_logger().warning(
        "campaign %s/%s failed: %s (files: %s)", campaign, tag, reason, location
    )
    return text
