"""The capacity search's density frontier (docs/SPEC.md §6.7): how many actors the substrate
held at the search's frontier, in the platform's own figures — actors per worker ("pod") at
p50/p90/p99, per node, per vCPU, per GiB of RAM — and how close the search came to the
frontier the template's memory predicts.

The figures come from the substrate's worker listing (`Substrate.list_workers`: each
worker's capacity, its allocated count and its memory), sampled at the end of each probe's
judged window and once at the first level before the first probe, while the load is still
at that level. They count the actors the workers hold, never the sessions: a session is not
an actor per user, and a worker holds many (the platform's multi-actor workers).

A node's resources are not in the listing: `NodeResources` says what they are and where
they came from (the embedded local substrate runs on this machine: os.cpu_count() and the
physical memory; a remote target's are stated in search.nodes, search.node_vcpus and
search.node_memory, or unknown).

A substrate without a listing (SubstrateError UNIMPLEMENTED) gives `no worker listing`; the
search runs on unchanged. Everything here but `DensityFrontier.sample` is pure.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentsession_core.script.quantity import format_quantity
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.interface import WorkerInfo

GIB = 1 << 30
# Upstream's names for the density row of its trial summary (the notes, §2); "pod" is the
# platform's word for a worker, "gb_ram" counts GiB (2^30 bytes) of the nodes' memory.
ACTORS_PER_NODE = "actors_per_node"
ACTORS_PER_VCPU = "actors_per_vcpu"
ACTORS_PER_GB_RAM = "actors_per_gb_ram"
POD_PERCENTILES = {
    "actors_per_pod_p50": 0.50,
    "actors_per_pod_p90": 0.90,
    "actors_per_pod_p99": 0.99,
}
DENSITY_COLUMNS = (ACTORS_PER_NODE, ACTORS_PER_VCPU, ACTORS_PER_GB_RAM, *POD_PERCENTILES)
NO_LISTING = "no worker listing"
UNIMPLEMENTED = "UNIMPLEMENTED"


# --------------------------------------------------------------------------- the node
@dataclass(frozen=True)
class NodeResources:
    """The nodes the substrate's workers run on: how many, and each one's vCPUs and memory
    (None: unknown), with where each figure came from."""

    nodes: int | None
    vcpus: float | None  # per node
    memory_bytes: int | None  # per node
    source: dict[str, str] = field(default_factory=dict)

    @property
    def total_vcpus(self) -> float | None:
        return self.nodes * self.vcpus if self.nodes and self.vcpus else None

    @property
    def total_gib(self) -> float | None:
        return self.nodes * self.memory_bytes / GIB if self.nodes and self.memory_bytes else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "vcpus_per_node": self.vcpus,
            "memory_bytes_per_node": self.memory_bytes,
            "source": dict(self.source),
        }


def machine_memory_bytes() -> int | None:
    """This machine's physical memory (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def node_resources(
    nodes: int | None,
    vcpus: float | None,
    memory_bytes: int | None,
    *,
    embedded: bool,
) -> NodeResources:
    """What was stated, and for the embedded local substrate (one node: this machine) the
    rest from this machine; a remote target's unstated figures stay unknown, since this
    machine is not its node."""
    source: dict[str, str] = {}
    if nodes is not None:
        source["nodes"] = "search.nodes"
    elif embedded:
        nodes, source["nodes"] = 1, "the embedded local substrate: this machine"
    else:
        source["nodes"] = "unknown: state search.nodes for a remote target"
    if vcpus is not None:
        source["vcpus"] = "search.node_vcpus"
    elif embedded and (count := os.cpu_count()):
        vcpus, source["vcpus"] = float(count), "this machine: os.cpu_count()"
    else:
        source["vcpus"] = "unknown: state search.node_vcpus"
    if memory_bytes is not None:
        source["memory"] = "search.node_memory"
    elif embedded and (total := machine_memory_bytes()):
        memory_bytes, source["memory"] = total, "this machine's physical memory"
    else:
        source["memory"] = "unknown: state search.node_memory"
    return NodeResources(nodes, vcpus, memory_bytes, source)


# --------------------------------------------------------------------------- the figures
def nearest_rank(values: Sequence[int], q: float) -> int | None:
    """The q-quantile by nearest rank: a count some worker really held (no interpolation
    between workers' counts)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _ratio(actors: int, per: float | None) -> float | None:
    return round(actors / per, 6) if per else None


@dataclass(frozen=True)
class WorkerSample:
    """One worker listing, taken at a level of the search."""

    level: float
    unix: float
    probe: int | None  # the probe's index; None: the first level, before the first probe
    workers: tuple[WorkerInfo, ...] = ()
    error: str | None = None  # the listing failed (not UNIMPLEMENTED): this sample says nothing

    @property
    def actors(self) -> int:
        return sum(w.allocated for w in self.workers)

    @property
    def capacity(self) -> int:
        return sum(w.capacity for w in self.workers)

    def figures(self, node: NodeResources) -> dict[str, Any]:
        """Upstream's density row of this listing (docs/SPEC.md §6.7)."""
        counts = [w.allocated for w in self.workers]
        actors = self.actors
        out: dict[str, Any] = {
            ACTORS_PER_NODE: _ratio(actors, node.nodes),
            ACTORS_PER_VCPU: _ratio(actors, node.total_vcpus),
            ACTORS_PER_GB_RAM: _ratio(actors, node.total_gib),
        }
        out.update({key: nearest_rank(counts, q) for key, q in POD_PERCENTILES.items()})
        return out

    def to_dict(self) -> dict[str, Any]:
        counts = [w.allocated for w in self.workers]
        return {
            "probe": self.probe,
            "level": self.level,
            "unix": round(self.unix, 3),
            "workers": len(self.workers),
            "capacity": self.capacity,
            "actors": self.actors,
            **{key: nearest_rank(counts, q) for key, q in POD_PERCENTILES.items()},
            "error": self.error,
        }


# --------------------------------------------------------------------------- the prediction
@dataclass(frozen=True)
class Prediction:
    """The most actors the listed workers can hold: each active worker min(its capacity,
    ⌊its memory / the template's memory limit⌋); a draining worker takes no placement."""

    actors: int
    bound: str  # "memory", "capacity", or "memory and capacity" (some workers each)
    why: str


def memory_prediction(
    workers: Sequence[WorkerInfo], template_bytes: int | None
) -> Prediction | None:
    active = [w for w in workers if w.state != "draining"]
    if not active:
        return None
    by_memory = 0
    total = 0
    parts: dict[tuple[int, int | None, int], int] = {}
    for w in active:
        fits = w.capacity
        memory_fit = None
        if template_bytes and w.memory_limit_bytes:
            memory_fit = w.memory_limit_bytes // template_bytes
            if memory_fit < fits:
                fits, by_memory = memory_fit, by_memory + 1
        total += fits
        key = (w.capacity, w.memory_limit_bytes, fits)
        parts[key] = parts.get(key, 0) + 1
    bound = (
        "memory"
        if by_memory == len(active)
        else ("capacity" if by_memory == 0 else "memory and capacity")
    )
    terms = []
    for (capacity, memory, fits), n in sorted(parts.items(), key=lambda kv: kv[0]):
        if template_bytes and memory:
            each = (
                f"min(capacity {capacity}, {format_quantity(memory)} / "
                f"{format_quantity(template_bytes)}) = {fits}"
            )
        else:
            each = f"capacity {capacity}"
        terms.append(f"{n} worker{'s' if n != 1 else ''} × {each}")
    why = " + ".join(terms)
    if not template_bytes:
        why += " (the template states no memory limit: capacity alone)"
    elif not any(w.memory_limit_bytes for w in active):
        why += " (the workers state no memory: capacity alone)"
    return Prediction(total, bound, why)


def closeness(found: float, predicted: int, resolution: float, *, whole: bool) -> dict[str, Any]:
    """How close the search's frontier came to the prediction: within the search's
    resolution of it (a count of residents also within one whole step, which is as fine
    as a count moves)."""
    allowed = resolution * predicted + (1 if whole else 0)
    return {
        "found": found,
        "ratio": round(found / predicted, 6) if predicted else None,
        "within_resolution": abs(found - predicted) <= allowed + 1e-9,
    }


# --------------------------------------------------------------------------- as the search runs
@dataclass
class DensityFrontier:
    """The listings a capacity search sampled, and gate.json's `capacity.density`."""

    node: NodeResources
    samples: list[WorkerSample] = field(default_factory=list)
    missing: str | None = None  # why there is no listing (UNIMPLEMENTED, no substrate)
    template_bytes: int | None = None

    @property
    def sampling(self) -> bool:
        return self.missing is None

    def has_first_level(self) -> bool:
        return any(s.probe is None for s in self.samples)

    async def sample(
        self, substrate: Any, *, level: float, probe: int | None, template_bytes: int | None
    ) -> WorkerSample | None:
        """Take one listing from `substrate` (None: no substrate client here). A substrate
        without a listing ends the sampling; any other failure is this sample's only."""
        if template_bytes is not None:
            self.template_bytes = template_bytes
        if not self.sampling:
            return None
        listing = getattr(substrate, "list_workers", None) if substrate is not None else None
        if listing is None:
            self.missing = f"{NO_LISTING}: this run has no substrate client to ask"
            return None
        try:
            workers = await listing()
        except SubstrateError as exc:
            if exc.code == UNIMPLEMENTED:
                self.missing = f"{NO_LISTING}: the substrate answered {exc}"
                return None
            sample = WorkerSample(level, time.time(), probe, error=str(exc))
        except NotImplementedError as exc:
            self.missing = f"{NO_LISTING}: {exc or 'the substrate client has none'}"
            return None
        else:
            if not isinstance(workers, list | tuple):
                self.missing = (
                    f"{NO_LISTING}: the substrate client returned {type(workers).__name__}"
                )
                return None
            sample = WorkerSample(level, time.time(), probe, tuple(workers))
        self.samples.append(sample)
        return sample

    def at(self, level: float | None) -> WorkerSample | None:
        """The last good listing taken at `level`."""
        if level is None:
            return None
        mine = [s for s in self.samples if s.error is None and abs(s.level - level) < 1e-9]
        return mine[-1] if mine else None

    def document(
        self,
        frontier_level: float | None,
        *,
        frontier_rate: float | None,
        unit: str,
        found_residents: float | None,
        resolution: float,
    ) -> dict[str, Any]:
        """gate.json's `capacity.density` (docs/SPEC.md §6.7). `frontier_level`: the
        capacity (else the highest level held); `found_residents`: the resident set the
        search found there when its levels are residents (dimension awake), else None and
        the listing's own count is compared with the prediction."""
        doc: dict[str, Any] = {
            "status": NO_LISTING if self.missing else "measured",
            "why": self.missing,
            "node": self.node.to_dict(),
            "template_memory_bytes": self.template_bytes,
            "frontier": None,
            "prediction": None,
            "peak": None,
            "samples": [s.to_dict() for s in self.samples],
            "line": self.missing or "",
        }
        good = [s for s in self.samples if s.error is None and s.workers]
        if self.missing is not None:
            return doc
        if not good:
            failed = [s.error for s in self.samples if s.error]
            doc["status"] = "not sampled"
            doc["why"] = doc["line"] = (
                f"no worker listing answered: {failed[-1]}" if failed else "no probe sampled"
            )
            return doc
        peak = max(good, key=lambda s: (s.actors, s.level))
        doc["peak"] = {"level": peak.level, "actors": peak.actors, "probe": peak.probe}
        sample = self.at(frontier_level)
        prediction = memory_prediction((sample or good[-1]).workers, self.template_bytes)
        if sample is not None:
            doc["frontier"] = {
                "level": frontier_level,
                "rate": frontier_rate,
                "unit": unit,
                "unix": round(sample.unix, 3),
                "workers": len(sample.workers),
                "capacity": sample.capacity,
                "actors": sample.actors,
                **sample.figures(self.node),
            }
        if prediction is not None:
            found = found_residents
            if found is None and sample is not None:
                found = float(sample.actors)
            doc["prediction"] = {
                "actors": prediction.actors,
                "bound": prediction.bound,
                "why": prediction.why,
                "found_from": "the search's capacity"
                if found_residents is not None
                else "the listing",
                **(
                    closeness(found, prediction.actors, resolution, whole=True)
                    if found is not None
                    else {"found": None, "ratio": None, "within_resolution": None}
                ),
            }
        doc["line"] = self._line(doc, frontier_level)
        return doc

    def _line(self, doc: dict[str, Any], level: float | None) -> str:
        frontier, prediction = doc["frontier"], doc["prediction"]
        parts = []
        if frontier is None:
            where = "no level held" if level is None else f"no listing at {level:g}x"
            parts.append(f"density: {where}")
        else:
            figures = ", ".join(
                f"{key} {_g(frontier[key])}" for key in DENSITY_COLUMNS if frontier[key] is not None
            )
            parts.append(
                f"density at {level:g}x: {frontier['actors']} actors on {frontier['workers']} "
                f"workers ({figures})"
            )
        if prediction is not None:
            said = f"the memory predicts {prediction['actors']} ({prediction['bound']}-bound)"
            if prediction["found"] is not None:
                off = prediction["found"] - prediction["actors"]
                closer = "within" if prediction["within_resolution"] else "outside"
                said += (
                    f"; found {_g(prediction['found'])} ({off:+g}, {closer} the resolution, "
                    f"from {prediction['found_from']})"
                )
            parts.append(said)
        return "; ".join(parts)


def _g(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


__all__ = [
    "ACTORS_PER_GB_RAM",
    "ACTORS_PER_NODE",
    "ACTORS_PER_VCPU",
    "DENSITY_COLUMNS",
    "NO_LISTING",
    "POD_PERCENTILES",
    "DensityFrontier",
    "NodeResources",
    "Prediction",
    "WorkerSample",
    "closeness",
    "machine_memory_bytes",
    "memory_prediction",
    "nearest_rank",
    "node_resources",
]
