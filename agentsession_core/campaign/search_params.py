"""The capacity search's parameters (docs/SPEC.md §6.7), and the bound a search must fit.

`search:` in a campaign: after the first level's judged hold, probe ever higher levels until
the SLO breaks, then bisect to the knee (campaign/search.py). Its worst case must fit in a
week and in MAX_PROBES probes (one Prefect task each); `check_search_bound` refuses it, in one
line, before anything starts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from agentsession_core.campaign.bounds import (
    MAX_NODE_MEMORY,
    MAX_NODE_VCPUS,
    MAX_NODES,
    MAX_PROBES,
    MAX_SEARCH_SECONDS,
    MAX_WINDOW_SECONDS,
)
from agentsession_core.campaign.rules import Rule, parse_rule
from agentsession_core.campaign.search import SearchPlan, most_probes
from agentsession_core.engine.param_types import SIZE
from agentsession_core.engine.params import Number, Seconds, Section
from agentsession_core.run.live_control import MAX_LEVEL

SearchDimension = Literal["rate", "awake"]


class SearchParams(Section):
    """The capacity search (docs/SPEC.md §6.7): after the first level's judged hold, probe
    ever higher levels until the SLO breaks, then bisect to the knee (campaign/search.py).
    No threshold: no search."""

    threshold: Rule | None = Field(
        None,
        description="the SLO, e.g. 'TimeToWake: p99 < 2s' (none: no search); a probe also "
        "breaks on any judged threshold",
    )
    start: Number | None = Field(
        None,
        gt=0,
        le=MAX_LEVEL,
        description="first probe's level (default: factor × the first level)",
    )
    factor: Number = Field(2.0, le=MAX_LEVEL, description="growth while the SLO holds (> 1)")
    resolution: Number = Field(
        0.1, le=10, description="relative width the knee is bracketed to (> 0; 0.1 = 10 %)"
    )
    max_level: Number = Field(16.0, gt=0, le=MAX_LEVEL, description="highest level probed")
    settle_seconds: Seconds = Field(
        30.0, ge=0, le=MAX_WINDOW_SECONDS, description="after each level change, not judged"
    )
    window_seconds: Seconds | None = Field(
        None,
        ge=1,
        le=MAX_WINDOW_SECONDS,
        description="each probe's judged window (default: the campaign's window_seconds)",
    )
    dimension: SearchDimension = Field(
        "rate",
        description="rate: the population's rate (as levels); awake: turnover's resident set",
    )
    # The nodes the substrate's workers run on, for the density frontier's per-node, per-vCPU
    # and per-GiB figures (campaign/density.py): the worker listing does not say them.
    nodes: int | None = Field(
        None,
        ge=1,
        le=MAX_NODES,
        description="nodes the substrate's workers run on, for the density frontier "
        "(default: 1 for the embedded local substrate, unknown for a remote target)",
    )
    node_vcpus: Number | None = Field(
        None,
        gt=0,
        le=MAX_NODE_VCPUS,
        description="vCPUs of each node (default: this machine's os.cpu_count() for the "
        "embedded local substrate, unknown for a remote target)",
    )
    node_memory: Annotated[int | None, SIZE] = Field(
        None,
        gt=0,
        le=MAX_NODE_MEMORY,
        description="memory of each node, a size such as 64Gi (default: this machine's "
        "physical memory for the embedded local substrate, unknown for a remote target)",
    )

    @field_validator("factor")
    @classmethod
    def _factor(cls, value: float) -> float:
        if not value > 1:
            raise ValueError(f"{value:g}: the growth factor must be > 1")
        return value

    @field_validator("resolution")
    @classmethod
    def _resolution(cls, value: float) -> float:
        if not value > 0:
            raise ValueError(f"{value:g}: must be > 0 (a relative width, 0.1 = 10 %)")
        return value

    @field_validator("threshold", mode="before")
    @classmethod
    def _parsed(cls, value: Any) -> Any:
        """The rule parsed once, here. `--set search.threshold=TimeToWake: p99 < 2s` reads
        as YAML, i.e. a one-entry mapping: it is the rule it was typed as."""
        if isinstance(value, dict) and len(value) == 1:
            ((rows, rule),) = value.items()
            if isinstance(rows, str) and isinstance(rule, str):
                value = f"{rows}: {rule}"
        if isinstance(value, str):
            return parse_rule(value, "search.threshold") if value.strip() else None
        return value

    @model_validator(mode="after")
    def _start_below_max(self) -> SearchParams:
        if self.start is not None and self.start > self.max_level:
            raise ValueError(f"start {self.start:g} is above max_level {self.max_level:g}")
        return self

    @property
    def enabled(self) -> bool:
        return self.threshold is not None


def search_bound(search: SearchParams, first_level: float, window: float) -> tuple[int, float]:
    """(the most probes a search from `first_level` makes, how long they take at most)."""
    start = search.start if search.start is not None else search.factor * first_level
    plan = SearchPlan(
        min(start, search.max_level), search.factor, search.resolution, search.max_level
    )
    probes = most_probes(plan, first_level)
    return probes, probes * (search.settle_seconds + (search.window_seconds or window))


def check_search_bound(search: SearchParams, first_level: float, window: float) -> None:
    """Refuse a search that may not finish within its bound: how many probes, how long, and
    which fields to change (a ValueError, for the `search` field's validator)."""
    probes, seconds = search_bound(search, first_level, window)
    if probes <= MAX_PROBES and seconds <= MAX_SEARCH_SECONDS:
        return
    settle = search.settle_seconds
    each = f"{settle:g} s settle + {search.window_seconds or window:g} s window"
    raise ValueError(
        f"search.factor {search.factor:g}, search.resolution {search.resolution:g} and "
        f"max_level {search.max_level:g}x make up to {_count(probes)} probes of {each}: "
        f"{_span(seconds)}; a search may take at most {MAX_PROBES:,} probes and "
        f"{_span(MAX_SEARCH_SECONDS)}: raise search.factor or search.resolution, lower "
        "search.max_level, or shorten search.window_seconds or search.settle_seconds"
    )


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**12 else f"about {n:.2g}"


def _span(seconds: float) -> str:
    """A duration as a person reads it: 48 min, 5.3 h, 202 days."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86_400:
        return f"{seconds / 3600:.1f} h"
    days = seconds / 86_400
    return f"{days:,.0f} days" if days < 1e9 else f"about {days:.2g} days"
