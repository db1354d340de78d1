"""The Grafana dashboard (deployments/grafana/agentsession.json) as the tests read it: its
panels and queries, the metric names each PromQL expression uses, and the metric names a
live Prometheus text exposition offers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

DASHBOARD = Path(__file__).resolve().parent.parent / "deployments" / "grafana" / "agentsession.json"

# PromQL words that look like identifiers but name no metric.
_PROMQL_WORDS = set(
    """sum avg min max count rate irate increase histogram_quantile by without on ignoring
    group_left group_right and or unless offset bool topk bottomk quantile stddev delta deriv
    abs clamp_min clamp_max label_replace vector scalar time inf nan""".split()
)
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def load() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' nested panels included."""
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def expressions(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: identifiers outside strings, label matchers
    `{...}`, range selectors `[...]`, grouping clauses `by (...)` and function calls."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges, $__rate_interval
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", text)  # grouping labels
    names = set()
    for match in _IDENT.finditer(text):
        word, after = match.group(), text[match.end() :].lstrip()
        if after.startswith("(") or word.lower() in _PROMQL_WORDS:
            continue
        names.add(word)
    return names


def exposed_names(text: str) -> set[str]:
    """Every metric name a Prometheus text exposition offers to PromQL (families without a
    sample yet included: a counter's `_total`, a histogram's `_bucket`/`_sum`/`_count`)."""
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.add(f"{family.name}_total")
        if family.type == "histogram":
            names.update(f"{family.name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
    return names
