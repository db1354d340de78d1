"""The campaign's verdict as a Prefect event, `agentsession.campaign.verdict` (docs/SPEC.md §6).

Release pipelines and automations react to it instead of polling artifacts: the event carries
what gate.json says (the same file `agentsession gate` and tasks/gate.py read) and where the
run's files are. Every campaign that wrote a gate.json emits it — pass, fail or void, a
refused or cancelled campaign too.

Prefect 3.9's event triggers match resource labels, not payload fields, so the verdict is
also a label of the resource (`agentsession.verdict`): an automation can then react to
`fail` alone (deployments/prefect.yaml, `verdict-report`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from agentsession_core.output.upload import UploadResult
from flows.target_limit import slug

VERDICT_EVENT = "agentsession.campaign.verdict"


def campaign_resource_id(name: str) -> str:
    return f"agentsession.campaign.{name}"


def target_resource_id(target: str) -> str:
    return f"agentsession.target.{slug(target)}"


def verdict_event(
    doc: dict[str, Any], *, name: str, tag: str, target: str, run_dir: Path, upload: UploadResult
) -> dict[str, Any]:
    """emit_event's keyword arguments for one gate.json."""
    verdict = str(doc.get("verdict", "void"))
    # Where the files are: the destination once uploaded, else the local copy that stayed.
    location = upload.location if upload.ok else upload.local_dir
    return {
        "event": VERDICT_EVENT,
        "resource": {
            "prefect.resource.id": campaign_resource_id(name),
            "prefect.resource.name": name,
            "agentsession.target": target,
            "agentsession.verdict": verdict,
        },
        "related": [
            {
                "prefect.resource.id": target_resource_id(target),
                "prefect.resource.role": "target",
                "prefect.resource.name": target,
            }
        ],
        "payload": {
            "verdict": verdict,
            "reason": doc.get("reason", ""),
            "regressions": list((doc.get("baseline") or {}).get("regressions") or []),
            "location": location,
            "uploaded": upload.ok,
            "run_dir": str(run_dir),
            "tag": tag,
            # A paired campaign's candidate against its reference arm (docs/SPEC.md §6.8).
            **({"paired": paired_payload(doc["paired"])} if doc.get("paired") else {}),
        },
    }


def paired_payload(paired: dict[str, Any]) -> dict[str, Any]:
    """What a reaction needs of the paired comparison: its status, blocks, rule and each
    figure's ratio, interval and status (not the whole section)."""
    return {
        "status": paired.get("status"),
        "why": paired.get("why"),
        "blocks": paired.get("blocks"),
        "blocks_dropped": paired.get("blocks_dropped"),
        "rule": paired.get("rule"),
        "max_regression": paired.get("max_regression"),
        "regressions": list(paired.get("regressions") or []),
        "metrics": [
            {k: m.get(k) for k in ("metric", "status", "ratio", "change", "interval")}
            for m in paired.get("metrics") or []
        ],
    }


async def announce_verdict(
    run_dir: Path, *, name: str, tag: str, target: str, upload: UploadResult
) -> dict[str, Any] | None:
    """Emit the verdict event when the run wrote gate.json; returns the event's payload.

    emit_event only queues the event for Prefect's events worker (a thread), so the flow's
    loop is not held up by the API; the worker is drained before the process leaves."""
    from prefect.events import emit_event

    path = Path(run_dir) / "gate.json"
    try:
        doc = json.loads(await asyncio.to_thread(path.read_bytes))
    except FileNotFoundError:  # crashed before judging: nothing to announce
        return None
    except (OSError, ValueError) as exc:  # the files are sealed already; say why, go on
        logging.getLogger("agentsession").warning("no verdict event: %s: %s", path, exc)
        return None
    event = verdict_event(doc, name=name, tag=tag, target=target, run_dir=run_dir, upload=upload)
    emit_event(**event)
    payload: dict[str, Any] = event["payload"]
    return payload
