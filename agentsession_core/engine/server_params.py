"""ServerParams, the `server` section of RunParams: server-side figures (docs/SPEC.md §5.9).
Where they come from is the target's (`target.metrics_url`, `target.prometheus_url`);
RunParams checks that the two fit together."""

from __future__ import annotations

import re
from typing import Annotated, Any

import yaml
from pydantic import BeforeValidator, Field, field_validator

from agentsession_core.engine.param_types import Flag, Seconds, Section


def _listed(value: Any) -> Any:
    """A list also given as comma-separated text (a flag)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _mapping(value: Any) -> Any:
    """A mapping also given as YAML/JSON text (a flag: `--server-queries '{a: expr}'`)."""
    if isinstance(value, str):
        try:
            return yaml.safe_load(value) if value.strip() else {}
        except yaml.YAMLError:
            raise ValueError("expected a mapping of name: PromQL") from None
    return value


_FIGURE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class ServerParams(Section):
    """Server-side figures (docs/SPEC.md §5.9): the substrate's own metrics, sampled during
    the run (target.metrics_url) or queried from Prometheus (target.prometheus_url), cut per
    window into server_summary.json and judged by `server.` thresholds."""

    enabled: Annotated[bool, Flag("--server-metrics")] = Field(
        True, description="sample server-side figures when a source is known"
    )
    interval_seconds: Annotated[Seconds, Flag("--server-interval-seconds")] = Field(
        2.0, ge=0.2, le=60, description="between two scrapes; the query step"
    )
    series: Annotated[list[str], BeforeValidator(_listed), Flag("--server-series")] = Field(
        default_factory=lambda: ["agentsession_substrate_*"],
        min_length=1,
        description="metric families kept from a scrape (fnmatch patterns)",
    )
    queries: Annotated[dict[str, str], BeforeValidator(_mapping), Flag("--server-queries")] = Field(
        default_factory=dict,
        description="name: PromQL, run against target.prometheus_url over each window",
    )

    @field_validator("queries")
    @classmethod
    def _queries(cls, value: dict[str, str]) -> dict[str, str]:
        for name, query in value.items():
            if not _FIGURE_NAME.match(name):
                raise ValueError(f"query name {name!r} must match {_FIGURE_NAME.pattern}")
            if not str(query).strip():
                raise ValueError(f"query {name!r} is empty")
        return value
