"""A run's headline figures as one flat table, {metric: Figure}, from either gate.json schema.

Schema 2 carries each headline figure with its uncertainty under a top-level ``figures`` key
(``{"TimeToWake.p99": {"value", "low", "high", "n", "beyond", "estimable", "unit"}}``);
schema 1 (the runs written before it) has only ``headline`` (``{"TimeToWake": {"p50": …},
"requests": {"failure_ratio": …, "achieved_rps": …}}``), read as values without an interval.
The headline metrics are TimeToWake, WakeFirstTouch and Step_* (whichever the run has) at
p50, p90, p99 and p99_9, plus requests.failure_ratio and requests.achieved_rps; a mix of
scripts adds each script's TimeToWake/<script> and Step_*/<script> at the same percentiles.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agentsession_core.judge.gate_document import GateDocument
from agentsession_core.judge.uncertainty import COMPARED_LATENCIES
from agentsession_core.judge.verdict import HEADLINE_ROWS
from agentsession_core.measure.stats import row_script

LATENCY_SECTIONS = tuple(HEADLINE_ROWS)
LATENCY_FIGURES = COMPARED_LATENCIES  # the gate compares these (judge/uncertainty.py)
REQUEST_FIGURES = {"failure_ratio": "ratio", "achieved_rps": "1/s"}
LATENCY_UNIT = "ms"


@dataclass(frozen=True)
class Figure:
    value: float
    low: float | None = None
    high: float | None = None
    n: int | None = None
    beyond: int | None = None
    estimable: bool | None = None
    unit: str = ""
    se_log: float | None = None  # the comparison's scale (judge/uncertainty.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def headline_metrics() -> list[str]:
    """Every headline metric name, in the order pages and documents list them."""
    names = [f"{s}.{f}" for s in LATENCY_SECTIONS for f in LATENCY_FIGURES]
    return names + [f"requests.{k}" for k in REQUEST_FIGURES]


def is_latency(metric: str) -> bool:
    """A latency figure: of a headline section, or of a mix's per-script one
    (`TimeToWake/coding-session.p99`)."""
    return row_script(metric.split(".", 1)[0])[0] in LATENCY_SECTIONS


def unit_of(metric: str) -> str:
    if is_latency(metric):
        return LATENCY_UNIT
    return REQUEST_FIGURES.get(metric.split(".", 1)[-1], "")


def _from_headline(headline: dict[str, dict[str, float | None]]) -> dict[str, Figure]:
    out: dict[str, Figure] = {}
    for section in LATENCY_SECTIONS:
        values = headline.get(section) or {}
        count = values.get("count")
        for key in LATENCY_FIGURES:
            value = values.get(key)
            if value is not None:
                out[f"{section}.{key}"] = Figure(
                    value, n=None if count is None else int(count), unit=LATENCY_UNIT
                )
    requests = headline.get("requests") or {}
    count = requests.get("count")
    for key, unit in REQUEST_FIGURES.items():
        value = requests.get(key)
        if value is not None:
            out[f"requests.{key}"] = Figure(
                value, n=None if count is None else int(count), unit=unit
            )
    return out


def figures_of(gate: GateDocument) -> dict[str, Figure]:
    """{metric: Figure} of a gate document: its schema-2 ``figures`` where present, and for
    any headline metric they lack (a schema-1 run has no ``figures`` at all) the plain value
    from ``headline``."""
    out = _from_headline(gate.headline or {})
    for metric, f in (gate.figures or {}).items():
        out[metric] = Figure(
            value=f.value,
            low=f.low,
            high=f.high,
            n=f.n,
            beyond=f.beyond,
            estimable=f.estimable,
            unit=f.unit or unit_of(metric),
            se_log=f.se_log,
        )
    order = {name: i for i, name in enumerate(headline_metrics())}
    return dict(sorted(out.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


__all__ = [
    "LATENCY_FIGURES",
    "Figure",
    "figures_of",
    "headline_metrics",
    "is_latency",
    "unit_of",
]
