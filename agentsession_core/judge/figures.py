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

import math
from dataclasses import asdict, dataclass
from typing import Any

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


def _number(value: Any) -> float | None:
    # bool is an int: a stray true is not a figure.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _count(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _from_schema2(metric: str, raw: Any) -> Figure | None:
    if not isinstance(raw, dict):
        return None
    value = _number(raw.get("value"))
    if value is None:
        return None
    estimable = raw.get("estimable")
    return Figure(
        value=value,
        low=_number(raw.get("low")),
        high=_number(raw.get("high")),
        n=_count(raw.get("n")),
        beyond=_count(raw.get("beyond")),
        estimable=estimable if isinstance(estimable, bool) else None,
        unit=str(raw.get("unit") or unit_of(metric)),
        se_log=_number(raw.get("se_log")),
    )


def _from_headline(headline: dict) -> dict[str, Figure]:
    out: dict[str, Figure] = {}
    for section in LATENCY_SECTIONS:
        values = headline.get(section)
        if not isinstance(values, dict):
            continue
        for key in LATENCY_FIGURES:
            value = _number(values.get(key))
            if value is not None:
                count = _count(values.get("count"))
                out[f"{section}.{key}"] = Figure(value, n=count, unit=LATENCY_UNIT)
    requests = headline.get("requests")
    if isinstance(requests, dict):
        for key, unit in REQUEST_FIGURES.items():
            value = _number(requests.get(key))
            if value is not None:
                out[f"requests.{key}"] = Figure(value, n=_count(requests.get("count")), unit=unit)
    return out


def figures_of(gate: dict) -> dict[str, Figure]:
    """{metric: Figure} of a gate document: its schema-2 ``figures`` where present, and for
    any headline metric they lack (a schema-1 run has no ``figures`` at all) the plain value
    from ``headline``."""
    headline = gate.get("headline")
    out = _from_headline(headline) if isinstance(headline, dict) else {}
    figures = gate.get("figures")
    if isinstance(figures, dict):
        for metric, raw in figures.items():
            figure = _from_schema2(str(metric), raw)
            if figure is not None:
                out[str(metric)] = figure
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
