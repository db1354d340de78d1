"""ServerParams, the `server` section of RunParams: server-side figures (docs/SPEC.md §5.9).
Where they come from is the target's (`target.metrics_url`, `target.prometheus_url`);
RunParams checks that the two fit together."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import yaml
from pydantic import BeforeValidator, Field, field_validator

from agentsession_core.engine.param_types import MAX_TEXT, Flag, Seconds, Section
from agentsession_core.errors import clip
from agentsession_core.measure.agent_substrate import PRESET, preset_queries
from agentsession_core.script.yaml_places import NoAliasLoader

MAX_FIGURES = 64  # series patterns or named queries: a dashboard's worth, not a dump


def _listed(value: Any) -> Any:
    """A list also given as comma-separated text (a flag)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _mapping(value: Any) -> Any:
    """A mapping also given as YAML/JSON text (a flag: `--server-queries '{a: expr}'`)."""
    if isinstance(value, str):
        if len(value) > MAX_TEXT * MAX_FIGURES:
            raise ValueError(f"{len(value)} characters of queries is more than any run needs")
        try:  # no anchors or aliases: a YAML bomb is refused, never expanded (issue #11)
            return yaml.load(value, Loader=NoAliasLoader) if value.strip() else {}
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
        max_length=MAX_FIGURES,
        description="metric families kept from a scrape (fnmatch patterns)",
    )
    queries: Annotated[dict[str, str], BeforeValidator(_mapping), Flag("--server-queries")] = Field(
        default_factory=dict,
        max_length=MAX_FIGURES,
        description="name: PromQL, run against target.prometheus_url over each window",
    )

    preset: Annotated[Literal["agent-substrate"] | None, Flag("--server-preset")] = Field(
        None,
        description=(
            f"{PRESET}: the platform's wake-phase series as server.queries (the wake split; "
            "docs/guide/server-metrics.md); a query of your own with the same name wins"
        ),
    )

    @property
    def all_queries(self) -> dict[str, str]:
        """The queries the run asks: the preset's, then the user's (a same name: the user's)."""
        own = preset_queries(self.preset) if self.preset else {}
        return own | self.queries

    @property
    def overridden(self) -> list[str]:
        """The preset's queries a user's query of the same name replaced."""
        return sorted(set(preset_queries(self.preset)) & set(self.queries)) if self.preset else []

    @field_validator("queries")
    @classmethod
    def _queries(cls, value: dict[str, str]) -> dict[str, str]:
        for name, query in value.items():
            if not _FIGURE_NAME.match(name) or len(name) > 100:
                raise ValueError(f"query name {clip(name)} must match {_FIGURE_NAME.pattern}")
            if not str(query).strip():
                raise ValueError(f"query {name!r} is empty")
            if len(query) > MAX_TEXT:
                raise ValueError(f"query {name!r}: {len(query)} characters (at most {MAX_TEXT})")
        return value
