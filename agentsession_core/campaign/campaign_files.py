"""The files a campaign adds to its run directory when it ends (docs/SPEC.md §6): windows.jsonl
(one judged row per window), hold_seconds.jsonl (the seconds behind the headline, both arms'
in a paired run), gate.json (the verdict, the figures, the comparisons with a baseline and
with the reference arm, the capacity search) and, after a density search, density.csv.

Written by the campaign's `Run.finalizer` (in a thread), so they exist before the manifest is
sealed, also when the campaign failed or was cancelled half-way.
"""

from __future__ import annotations

from typing import Any, Protocol

from agentsession_core.campaign.params import CampaignParams, WindowPlan
from agentsession_core.judge.artifacts import windows_jsonl
from agentsession_core.judge.baselines import AUTO, spread_history
from agentsession_core.judge.conditions import conditions
from agentsession_core.judge.gate import gate_document, with_baseline, without_baseline
from agentsession_core.judge.hold_seconds import (
    HOLD_SECONDS_FILE,
    HoldSeconds,
    saturated_seconds,
    second_records,
)
from agentsession_core.judge.hold_seconds import render as render_seconds
from agentsession_core.judge.paired import paired_comparison
from agentsession_core.judge.stored_run import StoredRun
from agentsession_core.judge.uncertainty import figures
from agentsession_core.judge.verdict import WindowVerdict
from agentsession_core.measure.stats import CANDIDATE, REFERENCE
from agentsession_core.output.stats_files import DENSITY_CSV, render_density_csv
from agentsession_core.run.run import Run


class Judged(Protocol):
    """What the files read of a campaign (campaign.py `Campaign`; declared here so that the
    campaign and its files do not import each other)."""

    params: CampaignParams
    run: Run
    plan: list[WindowPlan]
    verdicts: list[WindowVerdict]
    spans: list[Any]
    baseline: list[StoredRun] | None
    stop_reason: str | None

    @property
    def location(self) -> str: ...
    def not_held(self, held: int) -> str: ...
    def hold_headline(self) -> dict[str, Any] | None: ...
    def headline_spans(self) -> list[tuple[int, int, int]]: ...
    def capacity(self) -> dict[str, Any] | None: ...


def write_campaign_files(campaign: Judged) -> dict[str, Any]:
    """windows.jsonl, hold_seconds.jsonl, gate.json (returned) and, after a density search,
    density.csv."""
    run = campaign.run
    run_dir = run.run_dir
    run_dir.write_text("windows.jsonl", windows_jsonl(campaign.verdicts))
    described: dict[str, Any] = {
        "name": campaign.params.name,
        "tag": campaign.params.tag,
        "location": campaign.location,
        "local_dir": str(run_dir.path),
        "windows_planned": len(campaign.plan),
    }
    if (stop := run.control.stop_line) is not None:  # gate.py: a void verdict, said why
        described["stopped"] = f"{stop}; {campaign.not_held(len(campaign.spans))}"
    hold = campaign.hold_headline()
    if hold is not None:
        described["headline"] = hold
    # The seconds behind the headline, kept so the figures' intervals (and any later
    # comparison) can be recomputed from the run's files alone; a paired run's keep
    # both arms' and which seconds the generator saturated in.
    spans = campaign.headline_spans()
    paired = run.load.paired
    saturated = _saturated(run, spans) if paired else None
    seconds = second_records(
        run.recorder, spans, arm=CANDIDATE if paired else None, saturated=saturated
    )
    theirs = (
        second_records(run.recorder, spans, arm=REFERENCE, saturated=saturated) if paired else []
    )
    run_dir.write_text(HOLD_SECONDS_FILE, render_seconds(seconds + theirs))
    settings = campaign.params.gate
    gate = gate_document(
        campaign.verdicts,
        abort_reason=campaign.stop_reason or run.reason,
        run_status=run.status,
        run=described,
        figures=figures(
            HoldSeconds.of_records(seconds),
            confidence=settings.confidence,
            seed=campaign.params.seed,
        ),
        confidence=settings.confidence,
        conditions=conditions(campaign.params.model_dump(mode="json")),
        capacity=campaign.capacity(),
        paired=_paired(campaign.params, seconds, theirs) if paired else None,
    )
    if campaign.baseline:
        gate = with_baseline(
            gate,
            campaign.baseline,
            campaign.params.max_regression,
            night_spread=settings.night_spread,
            rule=settings.rule,
            false_discovery=settings.false_discovery,
            spread_runs=_spread_runs(campaign),
        )
    elif campaign.baseline is not None:  # auto, and no earlier good run yet
        gate = without_baseline(gate, "no earlier comparable run of this campaign passed")
    run_dir.write_json("gate.json", gate)
    density = (gate.get("capacity") or {}).get("density")
    if density is not None:  # upstream's density row (docs/SPEC.md §6.7)
        run_dir.write_text(DENSITY_CSV, render_density_csv(density))
    return gate


def _spread_runs(campaign: Judged) -> list[StoredRun]:
    """A single baseline run's history (its campaign's good runs up to it): the run-to-run
    spread it cannot see alone is measured over them (docs/SPEC.md §6.3)."""
    params = campaign.params
    if params.baseline == AUTO or not campaign.baseline or len(campaign.baseline) != 1:
        return []
    return spread_history(
        campaign.baseline[0],
        history=params.gate.history,
        endpoint_url=params.upload.endpoint_url,
    )


def _saturated(run: Run, spans: list[tuple[int, int, int]]) -> dict[int, str]:
    """Every second of `spans` the generator saturated in, and why."""
    rec = run.recorder
    out: dict[int, str] = {}
    for _, start, end in spans:
        out.update(run.load.health.saturated_in(rec.second_of(start), rec.second_of(end)))
    return out


def _paired(params: CampaignParams, mine: list[dict], theirs: list[dict]) -> dict[str, Any]:
    """gate.json's `paired`: the candidate against the reference arm, block by block."""
    settings = params.gate
    return paired_comparison(
        HoldSeconds.of_records(mine),
        HoldSeconds.of_records(theirs, REFERENCE),
        saturated=saturated_seconds(mine),
        block_seconds=settings.block_seconds,
        min_blocks=settings.min_blocks,
        max_regression=params.max_regression,
        confidence=settings.confidence,
        rule=settings.paired_rule,
        seed=params.seed,
        min_beyond=settings.min_beyond,
        false_discovery=settings.false_discovery,
    )
