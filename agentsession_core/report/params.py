"""The run's own description in report.html: its parameters and thresholds (campaign.json)
and links to every other file of the run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentsession_core.report.context import section
from agentsession_core.report.data import RunData
from agentsession_core.report.svg_chart import esc
from agentsession_core.report.tables import table


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        out: list[tuple[str, Any]] = []
        for key in sorted(value):
            out += _flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
        return out
    return [(prefix, value)]


def parameters(data: RunData) -> str:
    params = data.params
    if not params:
        return section("params", "Parameters", '<p class="nodata">no data: no campaign.json</p>')
    rules = [(t, "judged per window") for t in params.get("thresholds") or []]
    abort = params.get("abort")
    abort_rules = abort.get("rules") if isinstance(abort, dict) else None
    rules += [(t, "abort (sliding window)") for t in abort_rules or []]
    parts = []
    if rules:
        rows = [f"<tr><td><code>{esc(t)}</code></td><td>{esc(how)}</td></tr>" for t, how in rules]
        parts.append("<h3>Thresholds</h3>" + table(["rule", "how"], rows))
    groups: dict[str, list[tuple[str, Any]]] = {"run": []}
    for key, value in _flatten(params):
        if key in ("thresholds", "abort.rules"):
            continue
        head, _, rest = key.partition(".")
        if rest:
            groups.setdefault(head, []).append((rest, value))
        else:
            groups["run"].append((key, value))
    groups["versions"] = sorted((data.campaign.get("versions") or {}).items())
    tables = []
    for name, items in groups.items():
        if not items:
            continue
        rows = [f"<tr><td>{esc(k)}</td><td>{esc(_value(v))}</td></tr>" for k, v in items]
        tables.append(f'<div class="pgroup">{table([esc(name), "value"], rows, "params")}</div>')
    parts.append(f'<h3>Parameters (campaign.json)</h3><div class="pgrid">{"".join(tables)}</div>')
    return section("params", "Parameters and thresholds of this run", "".join(parts))


def _value(v: Any) -> str:
    if isinstance(v, list):
        return ", ".join(_value(x) for x in v) or "[]"
    if v is None:
        return "–"
    return f"{v:g}" if isinstance(v, float) else str(v)


# What each file of a run directory holds (docs/SPEC.md §7), beside its link.
FILES = {
    "acceptance.json": "an accepted change: who, when, why (baseline accept; not in the manifest)",
    "campaign.json": "parameters and versions",
    "density.csv": "the capacity search's density frontier (upstream's column names)",
    "failures.csv": "failures by row and error (Locust)",
    "gate.json": "the verdict, windows, ramp, drift, baseline",
    "gauges.jsonl": "sessions by state, CPU, per second",
    "hold_seconds.jsonl": "the judged hold's seconds, which the intervals are computed from",
    "logs.txt": "the run's log",
    "manifest.json": "every file with size and sha256",
    "report.html": "this page",
    "script.yaml": "the session script",
    "server_summary.json": "the substrate's own figures per window and over the hold",
    "stats.csv": "whole-run rows (Locust)",
    "stats.jsonl": "whole-run rows, turnover and step windows",
    "stats_history.csv": "per second per row (Locust)",
    "stats_history.jsonl": "per second: service time, start lag, failures by code, generator",
    "status.json": "how the run ended",
    "substrate.log": "the embedded local substrate's log",
    "windows.jsonl": "per window: level, outcome, thresholds, headline",
}


MIX_SCRIPT = "one script of the mix (docs/SPEC.md §1.6)"


def _is_mix_script(name: str) -> bool:
    return name.startswith("script-") and name.endswith(".yaml")


def artifacts(data: RunData, out_dir: Path | None) -> str:
    """Links to the run's files, relative to where the report is written; an s3 run's files
    are named, not linked (a link would leave the page)."""
    names = set(data.files) | {"manifest.json"}
    if data.local_dir is not None:
        names.add("report.html")
    items = []
    for name in sorted(names):
        said = FILES.get(name) or (MIX_SCRIPT if _is_mix_script(name) else None)
        about = f' <span class="dim">{esc(said)}</span>' if said else ""
        if data.local_dir is not None and out_dir is not None:
            href = Path(os.path.relpath(data.local_dir / name, out_dir)).as_posix()
            items.append(f'<li><a href="{esc(href)}">{esc(name)}</a>{about}</li>')
        else:
            items.append(f"<li><code>{esc(name)}</code>{about}</li>")
    where = f'<p class="meta">{esc(data.location)}</p>'
    return section("files", "Artifacts", f'{where}<ul class="files">{"".join(items)}</ul>')


__all__ = ["FILES", "artifacts", "parameters"]
