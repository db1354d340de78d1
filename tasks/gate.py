"""The verdict: read back from gate.json (the same file release gates read) and shown as
a markdown artifact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import acreate_markdown_artifact
from prefect.cache_policies import NO_CACHE

from agentsession_core.judge.gate import summary
from tasks.publish import artifact_key, best_effort
from tasks.steps import Steps


def comparison_lines(comparison: dict[str, Any]) -> list[str]:
    """The baseline comparison as a table: every figure's change, interval and status."""
    status = comparison.get("status")
    if not status:
        return []
    if status != "compared":
        why = comparison.get("why") or ", ".join(comparison.get("differences") or [])
        return ["", f"Baseline {status}: {why}"]
    lines = [
        "",
        f"Against {comparison.get('runs')} baseline run(s), spread "
        f"{comparison.get('spread_from')}:",
        "",
        "| figure | baseline | this run | change | interval | samples | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in comparison.get("metrics") or []:
        interval = m.get("interval")
        span = f"{interval[0]:+.0%} … {interval[1]:+.0%}" if interval else m.get("why", "")
        samples = m.get("samples") or {}
        lines.append(
            f"| {m['metric']} | {m['baseline']:.4g} | {m['current']:.4g} | "
            f"{m['change']:+.0%} | {span} | {samples.get('baseline')} / "
            f"{samples.get('current')} | **{m['status']}** |"
        )
    return lines


def paired_lines(paired: dict[str, Any]) -> list[str]:
    """A paired campaign's candidate against its reference arm (docs/SPEC.md §6.8)."""
    if not paired:
        return []
    head = (
        f"Candidate against the reference arm: {paired.get('blocks')} paired blocks of "
        f"{paired.get('block_seconds')} s ({paired.get('blocks_dropped')} dropped), rule "
        f"{paired.get('rule')}, margin {paired.get('max_regression'):.0%}"
    )
    if paired.get("status") == "void":
        return ["", f"{head}: **void**: {paired.get('why')}"]
    lines = [
        "",
        head + ":",
        "",
        "| figure | reference | candidate | candidate / reference | change | interval | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in paired.get("metrics") or []:
        interval = m.get("interval")
        span = f"{interval[0]:+.0%} … {interval[1]:+.0%}" if interval else m.get("why", "")
        ratio = f"{m['ratio']:.3f}" if m.get("ratio") is not None else "–"
        lines.append(
            f"| {m['metric']} | {m['reference']:.4g} | {m['candidate']:.4g} | {ratio} | "
            f"{m['change']:+.0%} | {span} | **{m['status']}** |"
        )
    return lines


def verdict_markdown(doc: dict[str, Any], upload: dict[str, Any]) -> str:
    lines = [f"## {summary(doc)}", "", "| window | level | outcome | missed |", "|---|---|---|---|"]
    for w in doc.get("windows", []):
        missed = ", ".join(f"`{m}`" for m in w.get("missed", [])) or (
            w.get("abort_reason") or w.get("void_reason") or ""
        )
        lines.append(f"| {w['index']} | {w['level']:g}x | **{w['outcome']}** | {missed} |")
    if doc.get("abort_reason"):
        lines += ["", f"Aborted: {doc['abort_reason']}"]
    lines += paired_lines(doc.get("paired") or {})
    lines += comparison_lines(doc.get("baseline") or {})
    where = upload.get("location") if upload.get("ok") else upload.get("local_dir")
    state = (
        "Artifacts at"
        if upload.get("ok")
        else f"Upload failed ({upload.get('error')}); local copy at"
    )
    lines += ["", f"{state} `{where}`"]
    return "\n".join(lines)


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
