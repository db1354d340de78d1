"""`baseline-accept`: accepting an intended change from Prefect, as `agentsession baseline
accept RUN --reason TEXT [--by NAME] [--endpoint-url URL]` does from the command line
(docs/SPEC.md §6.3, "Accepting a change"; deployments/prefect.yaml).

It calls the command's own `accept_run` (judge/acceptance.py), so it reads the run as a gate
does and refuses what the command refuses, in the same one line: the flow run then ends
Failed with that line as its message, said once in its logs, no traceback (a Python caller
of the flow gets the AcceptanceError itself). An accepted run gets acceptance.json beside its
files, the flow run logs the command's lines, writes a `<campaign>-accepted` markdown
artifact (what was accepted, by whom, why, the run's verdict and regressions, whose
acceptance it replaced) and returns the same as a dict. The campaign flow reads the record
through `baseline: auto` like every other reader.

The S3 endpoint is a parameter handed to every read and write (the command sets
AWS_ENDPOINT_URL in its own one-shot process; a flow run's process may serve other flow
runs, so the flow leaves the environment alone).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import acreate_markdown_artifact
from prefect.states import Failed, State

from agentsession_core.cli.baseline import accept_lines, when
from agentsession_core.errors import AgentsessionError
from agentsession_core.judge.acceptance import Acceptance, accept_run, default_by
from agentsession_core.output.run_reader import read_json_file
from agentsession_core.report.gate_summary import md_code, md_text
from tasks.publish import artifact_key, best_effort

# The artifact's key when the run's campaign name cannot be read or is no Prefect key part.
NO_CAMPAIGN = "baseline"
_KEY_PART = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def prefect_by() -> str:
    """Who accepts when `by` is not given: `prefect:<flow-run-name>`. Prefect's open-source
    API records no creator for a flow run, and the user and host of the process running it
    (the command's default) would name the worker's account on the load-generator box, the
    same whoever filled the form, as if it were a person; the flow run's name says the
    acceptance came through Prefect and finds the run (its parameters, when) in the UI.
    Outside a flow run (the flow's function called directly): the command's `user@host`."""
    from prefect.runtime import flow_run

    name = flow_run.get_name()
    return f"prefect:{name}" if name else default_by()


def campaign_name(location: str, endpoint_url: str | None) -> str:
    """The accepted run's campaign name (gate.json's `run.name`, else campaign.json's), for
    the artifact's key; NO_CAMPAIGN when neither names one that can be part of a key."""
    try:
        for name, path in (("gate.json", ("run", "name")), ("campaign.json", ("params", "name"))):
            value: Any = read_json_file(location, name, endpoint_url=endpoint_url)
            for part in path:
                value = value.get(part) if isinstance(value, dict) else None
            if isinstance(value, str) and _KEY_PART.match(value):
                return value
    except AgentsessionError:
        pass  # only the artifact's key: the acceptance itself is written and believed
    return NO_CAMPAIGN


def _accept(
    run: str, reason: str, by: str, endpoint_url: str | None
) -> tuple[Acceptance, Acceptance | None, str]:
    done, previous = accept_run(run, reason, by=by, endpoint_url=endpoint_url)
    return done, previous, campaign_name(done.location, endpoint_url)


def accepted_markdown(done: Acceptance, previous: Acceptance | None) -> str:
    """The artifact: every piece of text from the record or the run escaped (a reason is a
    user's text; report/gate_summary.py `md_text`)."""
    regressed = (
        "regressed: " + ", ".join(md_text(r) for r in done.regressions)
        if done.regressions
        else "no regression recorded"
    )
    lines = [
        f"## Accepted: {md_code(done.location)}",
        "",
        f"By {md_text(done.by)}, {when(done.accepted_unix)}: {md_text(done.reason)}",
        "",
        f"The run's verdict: **{md_text(done.verdict)}** ({regressed}).",
        "",
        "From now on `baseline: auto` compares this campaign's comparable runs only with runs "
        "from this one on, this one the first of them.",
        "",
    ]
    if previous is None:
        lines.append("No earlier acceptance of this run was replaced.")
    else:
        lines.append(
            f"Replaces the acceptance of {when(previous.accepted_unix)} by "
            f"{md_text(previous.by)}: {md_text(previous.reason)}"
        )
    lines += ["", f"Record: {md_code(done.record)}"]
    return "\n".join(lines)


def _summary(acceptance: Acceptance) -> dict[str, Any]:
    """The record as `baseline list --json` shows it, less its path (the run's own)."""
    return {k: v for k, v in acceptance.to_dict().items() if k != "record"}


@flow(name="baseline-accept", log_prints=False, persist_result=False)
async def baseline_accept(
    run: str,
    reason: str,
    by: str | None = None,
    endpoint_url: str | None = None,
) -> dict[str, Any] | State:
    """Accept a run as the level `baseline: auto` compares with from now on. Returns what
    was accepted: location, verdict, regressions, by, reason, accepted_unix, record (the
    record's path) and replaced (the acceptance it replaced, or None).

    Args:
        run: the run's directory or s3:// prefix (sealed and unaltered, passed or failed)
        reason: why the change is accepted: one line, at most 500 characters
        by: who accepts (default: prefect:<flow-run-name>)
        endpoint_url: S3-compatible endpoint (default: AWS_ENDPOINT_URL where the flow runs, or AWS)
    """
    log = get_run_logger()
    who = prefect_by() if by is None else by
    try:
        # Reading and hashing the run's files and writing the record is file and boto3 work:
        # in a thread, so the loop (Prefect's heartbeats and logs) never waits on it.
        done, previous, name = await asyncio.to_thread(_accept, run, reason, who, endpoint_url)
    except AgentsessionError as exc:
        # Refused (unsealed, altered, void, not a run, a bad reason): the command's one line,
        # said once; the Failed state carries the error for a Python caller.
        log.error("%s", exc)
        return Failed(message=str(exc), data=exc)
    for line in accept_lines(done, previous):
        log.info("%s", line)
    # The acceptance is written and stands without its view in the UI (tasks/publish.py).
    await best_effort(
        lambda: acreate_markdown_artifact(
            accepted_markdown(done, previous),
            key=artifact_key(name, "accepted"),
            description=f"{done.location} accepted by {done.by}",
        )
    )
    return {
        "location": done.location,
        **done.to_dict(),
        "replaced": None if previous is None else _summary(previous),
    }


__all__ = ["NO_CAMPAIGN", "accepted_markdown", "baseline_accept", "campaign_name", "prefect_by"]
