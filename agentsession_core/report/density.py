"""The density frontier in report.html's capacity section (gate.json's `capacity.density`,
docs/SPEC.md §6.7): upstream's figures at the frontier — actors per worker ("pod") p50, p90,
p99, per node, per vCPU, per GiB — where the node's resources came from, the memory's
prediction against what the search found, and every worker listing the search took. It
draws what gate.json says; a run written before the density frontier shows nothing."""

from __future__ import annotations

from typing import Any

from agentsession_core.judge.gate_document import Capacity, Density, Frontier, NodeResources
from agentsession_core.report.data import number
from agentsession_core.report.svg_chart import esc
from agentsession_core.report.tables import table

# (the frontier's field, the table's label); the fields are upstream's column names.
FIGURES = (
    ("actors", "actors the workers held"),
    ("workers", "workers listed"),
    ("actors_per_pod_p50", "actors per worker p50"),
    ("actors_per_pod_p90", "actors per worker p90"),
    ("actors_per_pod_p99", "actors per worker p99"),
    ("actors_per_node", "actors per node"),
    ("actors_per_vcpu", "actors per vCPU"),
    ("actors_per_gb_ram", "actors per GiB of RAM"),
)


def _num(value: Any) -> str:
    known = number(value)
    return "–" if known is None else f"{known:.4g}"


def _gib(value: Any) -> str:
    known = number(value)
    return "–" if known is None else f"{known / (1 << 30):.3g} GiB"


def _figure_rows(density: Density) -> list[str]:
    frontier = density.frontier or Frontier()
    rows = [
        f"<tr><td>{esc(label)}</td><td>{_num(getattr(frontier, k))}</td></tr>"
        for k, label in FIGURES
    ]
    node = density.node or NodeResources()
    source = node.source or {}
    for key, label, shown in (
        ("nodes", "nodes", _num(node.nodes)),
        ("vcpus", "vCPUs per node", _num(node.vcpus_per_node)),
        ("memory", "memory per node", _gib(node.memory_bytes_per_node)),
    ):
        rows.append(
            f"<tr><td>{label}</td><td>{shown}</td>"
            f'<td class="why">{esc(source.get(key) or "")}</td></tr>'
        )
    prediction = density.prediction
    if prediction is not None:
        close = prediction.within_resolution
        verdict = "" if close is None else (" (within resolution)" if close else " (outside)")
        rows.append(
            f"<tr><td>the memory predicts</td><td>{_num(prediction.actors)}</td>"
            f'<td class="why">{esc(prediction.bound)}-bound: {esc(prediction.why)}</td></tr>'
            f"<tr><td>found</td><td>{_num(prediction.found)}</td>"
            f'<td class="why">from {esc(prediction.found_from)}{verdict}</td></tr>'
        )
    return rows


def _sample_rows(density: Density) -> list[str]:
    rows = []
    for s in density.samples:
        probe = "first level" if s.probe is None else str(s.probe)
        rows.append(
            f"<tr><td>{esc(probe)}</td><td>{_num(s.level)}x</td>"
            f"<td>{_num(s.workers)}</td><td>{_num(s.actors)}</td>"
            f"<td>{_num(s.capacity)}</td><td>{_num(s.actors_per_pod_p50)}</td>"
            f"<td>{_num(s.actors_per_pod_p90)}</td><td>{_num(s.actors_per_pod_p99)}</td>"
            f'<td class="why">{esc(s.error or "")}</td></tr>'
        )
    return rows


def density_block(capacity: Capacity) -> str:
    """The density part of the capacity section ("" when gate.json has none)."""
    density = capacity.density
    if density is None:
        return ""
    head = f"<h3>Density at the frontier</h3><p>{esc(density.line or '')}</p>"
    if density.status != "measured":
        return head
    samples = _sample_rows(density)
    return (
        head
        + table(["figure", "value", "where it came from"], _figure_rows(density), "wide")
        + (
            table(
                ["listing at", "level", "workers", "actors", "capacity", "p50", "p90", "p99", ""],
                samples,
                "wide",
            )
            if samples
            else ""
        )
    )


__all__ = ["density_block"]
