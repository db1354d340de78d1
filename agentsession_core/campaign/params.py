"""CampaignParams: one model for every way a campaign is started.

The Prefect UI form (the flow's parameter schema), `deployments/prefect.yaml`, the presets in
`deployments/presets/` and `agentsession campaign --set key=value` all produce this model.
A CampaignParams IS the engine's RunParams (same fields, same sections, same rules) plus the
campaign's own fields, so `Run(campaign_params)` runs it. It validates everything a campaign
can get wrong before any actor exists — hold and window arithmetic, the script, every
threshold and abort rule.

A campaign holds the load for `hold_minutes` at the first level of `levels`, then for
`ramp_minutes` (default: `hold_minutes`) at each further level, cut into windows of
`window_seconds`; each window is judged on its own. Load never pauses between windows.

Defaults documented where they differ: a campaign's population is a turnover of 1000
sessions, 100 awake, 5 swaps/s (`agentsession run`: closed, 10 sessions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from agentsession_core.campaign.bounds import (
    MAX_HOLD_MINUTES,
    MAX_LEVELS,
    MAX_RULES,
    MAX_WINDOW_SECONDS,
    MAX_WINDOWS,
)
from agentsession_core.campaign.rules import (
    DEFAULT_THRESHOLDS,
    DEFAULT_THRESHOLDS_BY_KIND,
    Thresholds,
    parse_rules,
)
from agentsession_core.campaign.search_params import SearchParams, check_search_bound, search_bound
from agentsession_core.campaign.sections import (
    AbortParams,
    CampaignTargetParams,
    GateParams,
    UploadParams,
    campaign_population,
    with_campaign_defaults,
)
from agentsession_core.engine.params import (
    MAX_TEXT,
    Number,
    Population,
    RunParams,
    Seconds,
    form_position,
    reference_value,
    union_form_position,
)
from agentsession_core.judge.thresholds import Threshold
from agentsession_core.run.live_control import MAX_LEVEL  # a live change's bound too
from agentsession_core.script.mix import ScriptSpec

# Float arithmetic must not turn 0.3 min / 6 s into 2.9999 windows.
_WHOLE = 1e-9


@dataclass(frozen=True)
class WindowPlan:
    index: int
    level: float
    seconds: float


class CampaignParams(RunParams):
    """A benchmark campaign: a run (target, population, cleanup), its hold and ramp, judging,
    and where the artifacts go afterwards."""

    dest: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="where the run goes afterwards: s3://bucket/prefix; none: it stays in out "
        "(a local path or file:// URL here is where it is written, i.e. sets out)",
        json_schema_extra=form_position(2),
    )
    hold_minutes: Number = Field(
        60.0,
        gt=0,
        le=MAX_HOLD_MINUTES,
        description="hold at the first level",
        json_schema_extra=form_position(7),
    )
    window_seconds: Seconds = Field(
        600.0,
        ge=1,  # the recorder keeps one interval per second: a window is whole seconds
        le=MAX_WINDOW_SECONDS,
        description="each window is judged alone",
        json_schema_extra=form_position(8),
    )
    levels: list[Number] = Field(
        default_factory=lambda: [1.0],
        min_length=1,
        max_length=MAX_LEVELS,
        description="ramp of load multipliers",
        json_schema_extra=form_position(9),
    )
    ramp_minutes: Number | None = Field(
        None,
        gt=0,
        le=MAX_HOLD_MINUTES,
        description="hold at each level after the first (default: hold_minutes)",
        json_schema_extra=form_position(10),
    )
    thresholds: Thresholds = Field(
        default_factory=lambda: parse_rules(DEFAULT_THRESHOLDS, "thresholds"),
        max_length=MAX_RULES,
        description="judged per window, e.g. 'TimeToWake: p99 < 2s' (default: per population "
        "kind, listed in the parameter reference)",
        json_schema_extra=form_position(11),
    )
    baseline: str | None = Field(
        None,
        max_length=MAX_TEXT,
        description="earlier run (directory or s3:// prefix) to compare against, or 'auto': "
        "the last comparable runs of this name under dest/out",
        json_schema_extra=form_position(12),
    )
    max_regression: Number = Field(
        0.2,
        ge=0,
        le=100,
        description="allowed headline change vs baseline",
        json_schema_extra=form_position(13),
    )
    target: CampaignTargetParams = Field(
        default_factory=CampaignTargetParams, json_schema_extra=form_position(15)
    )
    reference: Annotated[CampaignTargetParams | None, BeforeValidator(reference_value)] = Field(
        None,
        description="a paired campaign's reference arm (the release in production), run side "
        "by side with target (the candidate) and judged against it: the same fields as "
        "target, or 'embedded' for a local substrate of its own",
        json_schema_extra=form_position(15),
    )
    population: Population = Field(
        default=campaign_population(),
        description="who wakes when: one of the kinds, each with its own fields (campaign "
        "defaults: turnover, 1000 sessions, 100 awake, 5 swaps/s; run: closed, 10 sessions)",
        json_schema_extra=union_form_position(16),
    )
    abort: AbortParams = Field(default_factory=AbortParams, json_schema_extra=form_position(18))
    upload: UploadParams = Field(default_factory=UploadParams, json_schema_extra=form_position(19))
    gate: GateParams = Field(default_factory=GateParams, json_schema_extra=form_position(22))
    search: SearchParams = Field(default_factory=SearchParams, json_schema_extra=form_position(23))

    @field_validator("search")
    @classmethod
    def _search_bound(cls, search: SearchParams, info: ValidationInfo) -> SearchParams:
        """A search that may not finish within its own bound is refused here, before
        anything starts, in one line: how many probes, how long, which fields to change.
        (A field validator, so the line names `search`; levels and window_seconds, the
        start's and the window's defaults, come before it.)"""
        levels, window = info.data.get("levels"), info.data.get("window_seconds")
        if search.enabled and levels and window is not None:
            check_search_bound(search, levels[0], window)
        return search

    @model_validator(mode="before")
    @classmethod
    def _local_dest(cls, values: Any) -> Any:
        """A local dest (path or file:// URL) is where the run is written: it sets out."""
        if not isinstance(values, dict):
            return values
        dest = values.get("dest")
        if not isinstance(dest, str) or not _is_local(dest):
            return values
        out = values.get("out")
        if out is None:
            return {**values, "out": dest}
        if out != dest:
            raise ValueError(
                f"dest {dest!r} is local, so the run is written there; it cannot differ from "
                f"out {out!r} (set one of them)"
            )
        return values

    @model_validator(mode="before")
    @classmethod
    def _population_defaults(cls, values: Any) -> Any:
        """The campaign's population defaults (sections.py CAMPAIGN_POPULATION), each where
        the chosen kind has the field and it was left out."""
        if not isinstance(values, dict):
            return values
        return {**values, "population": with_campaign_defaults(values.get("population"))}

    @model_validator(mode="before")
    @classmethod
    def _kind_thresholds(cls, values: Any) -> Any:
        """No thresholds given: the population kind's defaults (DEFAULT_THRESHOLDS_BY_KIND)."""
        if not isinstance(values, dict) or "thresholds" in values:
            return values
        population = values.get("population")
        if isinstance(population, dict):
            kind = population.get("kind")
        else:
            kind = getattr(population, "kind", None)
        defaults = DEFAULT_THRESHOLDS_BY_KIND.get(str(kind), DEFAULT_THRESHOLDS)
        return {**values, "thresholds": list(defaults)}

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: list[float]) -> list[float]:
        for i, level in enumerate(value):
            if not (level > 0 and math.isfinite(level)):
                raise ValueError(f"levels[{i}] = {level}: must be a positive multiplier")
            if level > MAX_LEVEL:
                raise ValueError(f"levels[{i}] = {level:g}: at most {MAX_LEVEL:g}x")
        return value

    @field_validator("script")
    @classmethod
    def _script(cls, value: ScriptSpec) -> ScriptSpec:
        from agentsession_core.script import ScriptError
        from agentsession_core.script.mix import load_mix

        try:
            load_mix(value)
        except ScriptError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("dest")
    @classmethod
    def _dest(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value:
            raise ValueError("empty; use a local path, file:// URL or s3://bucket/prefix")
        if value.startswith("s3://"):
            if not value[len("s3://") :].split("/", 1)[0]:
                raise ValueError(f"{value!r} names no bucket (s3://bucket/prefix)")
        elif "://" in value and not value.startswith("file://"):
            raise ValueError(f"{value!r}: unsupported scheme (local path, file:// or s3://)")
        return value

    @model_validator(mode="after")
    def _whole(self) -> CampaignParams:
        per_hold, per_level = self.windows_per_hold(), self.windows_per_ramp_level()
        total = per_hold + per_level * (len(self.levels) - 1)
        if total > MAX_WINDOWS:
            raise ValueError(
                f"hold_minutes, ramp_minutes, levels and window_seconds make {total} windows; "
                f"at most {MAX_WINDOWS} per campaign (use longer windows)"
            )
        self._server_rules(self.thresholds, "thresholds")
        self._cohort_rules()
        self._search()
        return self

    def _cohort_rules(self) -> None:
        """A spawn or burst has no rate to achieve, and no search dimension: refused in one
        line rather than judged as a meaningless pass (docs/SPEC.md §4.5)."""
        population = self.population
        if not population.cohorts:
            return
        for i, rule in enumerate(self.thresholds):
            if rule.stat == "achieved_rps":
                raise ValueError(
                    f"thresholds[{i}] {rule.text!r}: a {population.kind} population has no "
                    "rate to achieve; judge its cohorts (TimeToAllReady: count >= 1, "
                    "TimeToAllResumed: count >= 1)"
                )
        if self.search.enabled:
            raise ValueError(
                f"search.enabled: the capacity search moves a rate or a resident set; a "
                f"{population.kind} population has neither (docs/limits.md)"
            )

    def _search(self) -> None:
        """What the search's fields can only get wrong together (each names its field)."""
        search = self.search
        if not search.enabled:
            return
        if self.reference is not None:
            raise ValueError(
                "search.enabled with reference: a paired capacity search is not built; "
                "search each arm in a campaign of its own (docs/limits.md)"
            )
        if search.threshold is not None:
            self._server_rules([search.threshold], "search.threshold", indexed=False)
        population = self.population
        if search.dimension == "awake":
            if population.kind != "turnover":
                raise ValueError(
                    f"search.dimension awake searches a turnover's resident set; the "
                    f"population is {population.kind}"
                )
            if self.generator.shards != 1:
                raise ValueError("search.dimension awake: one generator only (generator.shards 1)")
            most = round(population.awake * search.max_level)
            if most >= population.sessions:
                raise ValueError(
                    f"search.max_level {search.max_level:g}x makes {most} residents of "
                    f"population.sessions {population.sessions}: a swap needs parked ones"
                )

    @property
    def search_start(self) -> float:
        """The first probe's level: search.start, or factor × the first level."""
        if self.search.start is not None:
            return self.search.start
        return min(self.search.factor * self.levels[0], self.search.max_level)

    @property
    def search_window_seconds(self) -> float:
        return self.search.window_seconds or self.window_seconds

    def search_seconds_at_most(self) -> float:
        """The longest the capacity search may take after the hold (its bound, checked at
        validation): the most probes it can make × each probe's settle and window."""
        return search_bound(self.search, self.levels[0], self.window_seconds)[1]

    def _server_rules(
        self, thresholds: list[Threshold], field: str, *, indexed: bool = True
    ) -> None:
        """A `server.` rule needs a source of server figures; against the embedded local
        substrate its series must be one the substrate exports (docs/SPEC.md §5.9), so a typo
        is refused here rather than left "not judged" in every window."""
        from agentsession_core.measure.server_metrics import split_figure
        from local_substrate.metric_names import FAMILIES

        for i, rule in enumerate(thresholds):
            if rule.server is None:
                continue
            where = f"{field}[{i}]" if indexed else field
            if not self.server_metrics_source:
                raise ValueError(
                    f"{where} {rule.text!r} judges a server figure but the run has "
                    "none: set target.metrics_url, or target.prometheus_url with "
                    "server.queries (and server.enabled)"
                )
            target = self.target
            if target.substrate or target.metrics_url or target.prometheus_url:
                continue
            series = split_figure(rule.server)
            if series is None or not any(
                series[0] == f or series[0].startswith(f"{f}_") for f in FAMILIES
            ):
                raise ValueError(
                    f"{where} {rule.text!r}: the local substrate exports no such "
                    f"series (families: {', '.join(FAMILIES)})"
                )

    # ------------------------------------------------------------ the hold, in windows
    def windows_per_hold(self) -> int:
        # The count comes from arithmetic, never from a list (hold_minutes=1e7 once hung).
        return _whole_windows(self.hold_minutes, "hold_minutes", self.window_seconds)

    def windows_per_ramp_level(self) -> int:
        if self.ramp_minutes is None:
            return self.windows_per_hold()
        return _whole_windows(self.ramp_minutes, "ramp_minutes", self.window_seconds)

    def windows(self) -> list[WindowPlan]:
        """Every window of the campaign in order: its index, load level and length."""
        plan: list[WindowPlan] = []
        for position, level in enumerate(self.levels):
            count = self.windows_per_hold() if position == 0 else self.windows_per_ramp_level()
            for _ in range(count):
                plan.append(WindowPlan(len(plan), level, self.window_seconds))
        return plan

    @property
    def hold_seconds(self) -> float:
        return sum(w.seconds for w in self.windows())

    # ------------------------------------------------------------ judging
    @property
    def abort_rules(self) -> list[Threshold]:
        """`abort.rules` plus every threshold marked `(abort)` (each parsed at validation)."""
        return [*self.abort.rules, *(t for t in self.thresholds if t.abort)]

    # ------------------------------------------------------------ where the run goes
    @property
    def is_s3(self) -> bool:
        return self.dest is not None and self.dest.startswith("s3://")

    @property
    def destination(self) -> str:
        """Where the run ends up: dest, or out when the run stays where it was written."""
        return self.dest or self.out


def _is_local(dest: str) -> bool:
    return bool(dest) and ("://" not in dest or dest.startswith("file://"))


def _whole_windows(minutes: float, field: str, window_seconds: float) -> int:
    exact = minutes * 60.0 / window_seconds
    if not math.isfinite(exact) or exact > 1e12:  # far past MAX_WINDOWS: refused as such
        return 10**12
    count = round(exact)
    if count < 1 or abs(exact - count) > _WHOLE * max(1.0, exact):
        raise ValueError(
            f"{field} ({minutes:g} min) must be a whole number of windows of window_seconds "
            f"({window_seconds:g} s); it is {exact:.4g} windows"
        )
    return count
