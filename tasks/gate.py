"""The verdict: read back from gate.json (the same file release gates read) and shown as
a markdown artifact, the summary `agentsession gate --summary` writes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import acreate_markdown_artifact
from prefect.cache_policies import NO_CACHE

from agentsession_core.judge.gate import summary
from agentsession_core.judge.gate_document import GateDocument
from agentsession_core.report.gate_summary import gate_summary
from tasks.publish import artifact_key, best_effort
from tasks.steps import Steps


def verdict_markdown(doc: dict[str, Any], upload: dict[str, Any]) -> str:
    """The verdict artifact: the same Markdown `agentsession gate --summary` writes
    (report/gate_summary.py), pointing at where the upload put the run's files, or at the
    local copy when it failed."""
    ok = bool(upload.get("ok"))
    where = upload.get("location") if ok else upload.get("local_dir")
    error = None if ok else str(upload.get("error") or "no reason given")
    gate = GateDocument.read(doc, "gate.json")
    return gate_summary(gate, location=str(where) if where else None, upload_error=error)


async def read_gate(run_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(
        await asyncio.to_thread((Path(run_dir) / "gate.json").read_bytes)
    )
    return doc


@task(name="gate", cache_policy=NO_CACHE, persist_result=False)
async def gate(run_dir: Path, name: str, upload: dict[str, Any], steps: Steps) -> dict[str, Any]:
    doc = await steps.once("gate", lambda: read_gate(run_dir))
    await best_effort(
        lambda: acreate_markdown_artifact(
            verdict_markdown(doc, upload), key=artifact_key(name, "gate"), description=summary(doc)
        )
    )
    return doc
