"""The campaign on the engine's side: judged hold windows on one long-lived `Run`.

No Prefect here: the flow (flows/campaign.py) calls `hold_window` once per window and the
same code runs under any orchestrator. The load never pauses between windows: each window is
one `Run.hold` on the same engine, cut out of the recorder afterwards and judged alone.
During every window the abort rules are checked once a second on a sliding window (after a
warm-up delay); a trip — or a dead substrate, or a signal — ends the window at once and no
further window starts.

Files the campaign adds to the run directory are written by a `Run.finalizer`
(campaign_files.py), so they exist before the manifest is sealed, also when the campaign
failed or was cancelled half-way: windows.jsonl (one judged row per window) and gate.json
(docs/SPEC.md §6); the Run then writes report.html with the campaign's thresholds drawn on
it (`Run.report_rules`); one `step_window` row per window goes to stats.jsonl through
`Run.extra_rows`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentsession_core.campaign.campaign_files import write_campaign_files
from agentsession_core.campaign.capacity import CapacitySearch, ProbeRecord
from agentsession_core.campaign.params import CampaignParams, WindowPlan
from agentsession_core.engine.context import now_ns
from agentsession_core.engine.population_params import TurnoverParams
from agentsession_core.errors import AgentsessionError
from agentsession_core.judge.abort import AbortMonitor
from agentsession_core.judge.acceptance import load_named_baseline
from agentsession_core.judge.artifacts import step_window_row
from agentsession_core.judge.baselines import AUTO, last_good_runs
from agentsession_core.judge.conditions import conditions
from agentsession_core.judge.gate import baseline_refusal
from agentsession_core.judge.gate_document import GateInputError
from agentsession_core.judge.stored_run import StoredRun
from agentsession_core.judge.verdict import WindowVerdict, headline, intended_rate, judge_window
from agentsession_core.measure.health import exhausted_reason
from agentsession_core.measure.stats import CANDIDATE, Window
from agentsession_core.output.upload import is_s3, run_location
from agentsession_core.run.run import Run

# A window that starts this long after the last one ended started late (its task did).
LATE_START_NS = 1_000_000_000
log = logging.getLogger("agentsession")


class CampaignError(AgentsessionError):
    """The campaign did not reach a verdict (refused, failed, cancelled)."""

    def __init__(self, message: str, run_dir: Path | None = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir


@dataclass
class Span:
    start_ns: int
    end_ns: int


def load_baseline(params: CampaignParams) -> list[StoredRun] | None:
    """The baseline run(s), read before any actor exists so a bad one is refused early: a
    run that cannot be read, or that measured nothing to compare against (void, failed,
    refused), ends the campaign before it starts, with the parameter named. `auto`: the last
    good comparable runs of this campaign (none on its first nights: [])."""
    if not params.baseline:
        return None
    try:
        if params.baseline == AUTO:
            root = params.destination if is_s3(params.destination) else params.out
            return last_good_runs(
                root,
                params.name,
                conditions=conditions(params.model_dump(mode="json")),
                history=params.gate.history,
                endpoint_url=params.upload.endpoint_url,
            )
        run = load_named_baseline(params.baseline, endpoint_url=params.upload.endpoint_url)
        line = baseline_refusal(run)
        if line is not None:
            raise GateInputError(line)
    except AgentsessionError as exc:
        raise CampaignError(f"parameter baseline: {exc}") from None
    return [run]


class Campaign:
    """Windows, verdicts and the campaign's files for one Run (enter the Run first)."""

    def __init__(
        self, params: CampaignParams, run: Run, *, baseline: list[StoredRun] | None = None
    ) -> None:
        self.params = params
        self.run = run
        self.plan: list[WindowPlan] = params.windows()
        self.thresholds = list(params.thresholds)  # parsed when the params were validated
        self.search: CapacitySearch | None = None
        if params.search.enabled:
            # The SLO is judged in every window, the hold's too: the hold is the search's
            # first level (docs/SPEC.md §6.7).
            slo = params.search.threshold
            assert slo is not None  # enabled means a threshold (SearchParams.enabled)
            if slo.text not in {t.text for t in self.thresholds}:
                self.thresholds.append(slo)
            self.search = CapacitySearch.of(params, slo)
        population = params.population
        self.awake = population.awake if isinstance(population, TurnoverParams) else 0
        self.abort_rules = params.abort_rules
        self.baseline = baseline
        self.verdicts: list[WindowVerdict] = []
        self.spans: list[Span] = []  # of the planned windows, as self.verdicts
        self.held_until_ns: int | None = None  # where the last hold ended: the next starts there
        self.load_level: float | None = None  # the rate's level the last hold ran at
        self.level = self.plan[0].level if self.plan else 1.0
        self.stop_reason: str | None = None
        self.monitor: AbortMonitor | None = None
        self.gate: dict[str, Any] | None = None
        run.finalizers.append(self.write_files)
        run.report_rules = self.thresholds  # the Run writes report.html after the finalizers

    # ------------------------------------------------------------ the hold
    def references(self, window: Window) -> dict[str, float | None]:
        """What `* target` and `* awake` scale by in `window` (judge/thresholds.py): target is
        the rate achieved_rps is judged against, in its unit (docs/SPEC.md §6) — turnover:
        target_rps × level; closed and turns: the steps or turns the load model put due in
        the window; awake: turnover's resident set (none for other populations)."""
        population = self.run.params.population
        if population.kind == "cold-resume":  # resumes per second, as turnover's swaps
            return {"target": population.target_rps * self.run.load.level, "awake": None}
        if population.kind == "turnover":  # the level now: a live change moves the target too
            rate_level = self.plan[0].level if self.params.search.dimension == "awake" else None
            target = population.target_rps * (rate_level if rate_level else self.run.load.level)
            return {"target": target, "awake": self.awake}
        return {"target": intended_rate(window), "awake": None}

    @property
    def stopped(self) -> bool:
        """No (further) window: one ended the campaign, or the run was refused at start."""
        return (
            self.stop_reason is not None
            or self.run.refusal is not None
            or self.run.control.stop is not None  # stopped by hand (docs/SPEC.md §5.10)
        )

    async def hold_window(self, index: int) -> WindowVerdict | None:
        """Hold and judge window `index`; None when the campaign already stopped."""
        if self.stopped:
            return None
        plan = self.plan[index]
        verdict, reason, span = await self._judged(plan.index, plan.level, plan.seconds)
        self.verdicts.append(verdict)
        self.spans.append(span)
        self.run.extra_rows.append(
            step_window_row(verdict, tag=self.params.tag, test_name=self.params.name)
        )
        self._ended(reason, verdict, f"window {plan.index}")
        return verdict

    def _monitor(self) -> AbortMonitor:
        if self.monitor is None:  # the warm-up delay counts from the start of the hold
            self.monitor = AbortMonitor(
                self.run.recorder,
                self.abort_rules,
                sliding_s=self.params.abort.sliding_seconds,
                delay_s=self.params.abort.delay_seconds,
                target=self.references,
            )
        return self.monitor

    async def _judged(
        self, index: int, level: float, seconds: float, *, rate_level: float | None = None
    ) -> tuple[WindowVerdict, str | None, Span]:
        """Hold `seconds` at `level` from where the last window ended and judge them; the
        reason the hold ended early, if it did. `rate_level`: the rate's level when `level`
        is not it (a density probe holds the rate and moves the resident set)."""
        start, end, reason = await self._hold(index, level, seconds, rate_level)
        return await self._judge(index, level, start, end, reason), reason, Span(start, end)

    async def _hold(
        self, index: int, level: float, seconds: float, rate_level: float | None
    ) -> tuple[int, int, str | None]:
        self.level = level
        # What GET /v1/status says of the window (docs/SPEC.md §5.10).
        self.run.current_window = {
            "index": index,
            "level": level,
            "seconds": seconds,
            "started_unix": time.time(),
        }
        load_level = level if rate_level is None else rate_level
        # Windows tile the hold, unless this one moves the load's level and starts late: the
        # seconds since the last window ended ran at the old level and must not be judged
        # against the new level's target (an orchestrator slow to start the window's task,
        # or one lost, flows/orchestrator.py); the window then starts when its level does.
        late = self.held_until_ns is not None and now_ns() - self.held_until_ns > LATE_START_NS
        tiles = not late or load_level == self.load_level
        try:
            start, end, reason = await self.run.hold(
                seconds,
                level=load_level,
                should_stop=self._monitor().check,
                start_ns=self.held_until_ns if tiles else None,
            )
        finally:
            self.run.current_window = None
        self.held_until_ns, self.load_level = end, load_level
        return start, end, reason

    async def _judge(
        self, index: int, level: float, start: int, end: int, reason: str | None
    ) -> WindowVerdict:
        window, saturated = self._window(start, end)
        load = self.run.load
        server = load.server  # server-side figures of the window (docs/SPEC.md §5.9)
        figures = await server.cut(start, end, index=index, level=level) if server else None
        if load.reference_server is not None:  # the reference arm's own
            await load.reference_server.cut(start, end, index=index, level=level)
        void: str | None
        if reason is not None and self.run.cut_short(reason):
            # Cut short by SIGINT/SIGTERM, our own disk or a lost shard: not judgeable, and not the
            # substrate's fault.
            void, aborted = f"cut short: {reason}", None
        elif reason is None and (manual := self.manual_void(start, end)) is not None:
            void, aborted = manual, None  # the load was not the plan's (docs/SPEC.md §5.10)
        elif reason is None and (exhausted := self._exhausted(start, end)) is not None:
            void, aborted = exhausted, None  # a cold-resume's fleet ran out (§4.7)
        else:
            void = self._void_reason(window, saturated) if reason is None else None
            aborted = reason
        return judge_window(
            window,
            self.thresholds,
            index=index,
            level=level,
            target=self.references(window),
            void_reason=void,
            abort_reason=aborted,
            server=figures,
            saturated_seconds=saturated,
        )

    def _window(self, start: int, end: int) -> tuple[Window, int]:
        """The window to judge and how many of its seconds the generator saturated in. A
        paired campaign judges it without them (both arms were disturbed alike, docs/SPEC.md
        §6.8); an unpaired one judges them all and voids past the void rule's allowance."""
        rec = self.run.recorder
        rec.flush()
        first, last = rec.second_of(start), rec.second_of(end)
        saturated = frozenset(t for t, _ in self.run.load.health.saturated_in(first, last))
        if not self.run.load.paired:
            return rec.window_seconds(first, last), len(saturated)
        window = rec.window_seconds(first, last, leave_out=saturated).arm(CANDIDATE)
        return window, len(saturated)

    def _exhausted(self, start: int, end: int) -> str | None:
        rec = self.run.recorder
        return exhausted_reason(rec, rec.second_of(start), rec.second_of(end))

    def _void_reason(self, window: Window, saturated: int) -> str | None:
        if not self.run.load.paired:
            return self.run.load.health.void_reason(window)
        if saturated and window.duration_s <= 0:
            return f"the load generator was saturated in every one of its {saturated} s"
        return None

    def _ended(self, reason: str | None, verdict: WindowVerdict, what: str) -> None:
        if reason is not None:
            self.stop_reason = reason
            if verdict.void_reason is None:  # an abort rule or a dead substrate: news
                log.error("%s ended early: %s", what, reason)
            else:  # a signal or a full disk, said once already
                log.info("%s ended early (void)", what)
        else:
            log.info("%s at %.2gx: %s", what, verdict.level, verdict.outcome)

    # ------------------------------------------------------------ the capacity search
    @property
    def searching(self) -> bool:
        """A probe is (still) to come: call `probe` (docs/SPEC.md §6.7)."""
        search = self.search
        if search is None or self.stopped:
            if search is not None and self.stop_reason is not None:
                search.stop(self.stop_reason)
            return False
        if search.anchor is None and search.not_run is None:
            search.start(*self._anchor())
        # Decided now (the decision is pure: `probe` asks again), so no empty probe task runs.
        return search.next_level() is not None

    def _anchor(self) -> tuple[float | None, str | None]:
        """The first level, when every one of its judged windows held."""
        first = self.plan[0].level
        mine = [v for v in self.verdicts if v.level == first]
        if not mine or any(v.outcome != "pass" for v in mine):
            outcomes = ", ".join(v.outcome for v in mine) or "none judged"
            return None, f"the first level ({first:g}x) did not hold ({outcomes}): no search"
        return first, None

    async def probe(self, number: int) -> ProbeRecord | None:
        """Settle at the search's next level, then hold and judge one probe window; None
        when the search is over (its end is in `self.search.end`). A probe that an abort
        rule ends, settling or judged, is `aborted`: the search ends at the last level that
        held and the campaign's verdict stays the hold's (docs/SPEC.md §6.7). The found
        level's confirmation and its step down are probes too (`record.stage`)."""
        search = self.search
        if search is None or not self.searching or (level := search.next_level()) is None:
            return None
        index = len(self.plan) + number
        if number == 0:  # the load is still the first level's: its density, before it moves
            await self._sample_density(search.anchor, None)
        rate_level = self._set_probe_load(level)
        settle = self.params.search.settle_seconds
        reason: str | None = None
        if settle > 0:
            start, end, reason = await self._hold(index, level, settle, rate_level)
        if reason is None:
            start, end, reason = await self._hold(
                index, level, self.params.search_window_seconds, rate_level
            )
        verdict = await self._judge(index, level, start, end, reason)
        # Cut short by the run's own stop (the substrate unreachable, a signal, a full disk):
        # an outage is not a break, whatever the cut window's figures say (issue 29).
        stopped = reason if reason is not None and not self._substrate_side(reason) else None
        if stopped is None:  # a substrate already dead when the probe began (issue 38)
            stopped = self.run.load.silent_since(start)
        if stopped is None:  # still at the probe's load: the listing at its end
            await self._sample_density(level, index)
        record = search.record(level, verdict, stopped=stopped)
        what = (
            f"probe {number}{record.stage_note} at {level:.3g}x "
            f"({record.rate:g} {search.dimension.unit})"
        )
        if reason is not None and stopped is None:
            log.error("%s ended early: %s", what, reason)
            search.stop(f"an abort rule tripped at {level:g}x: {reason}")
        elif reason is not None:
            self._ended(reason, verdict, what)
            if self.stop_reason is not None:
                search.stop(self.stop_reason)
        else:  # the search's word for the probe, not the window's: a thin pass is void
            why = f" ({record.why})" if record.why else ""
            log.info("%s: %s%s", what, record.outcome, why)
        return record

    async def _sample_density(self, level: float | None, probe: int | None) -> None:
        """The worker listing at `level` (campaign/density.py); a substrate without one
        says so once and the search goes on without it."""
        density = self.search.density if self.search is not None else None
        if density is None or level is None or not density.sampling:
            return
        substrate, template_bytes = self.run.load.density_target()
        await density.sample(substrate, level=level, probe=probe, template_bytes=template_bytes)
        if not density.sampling:
            log.info("capacity search: %s; the density frontier is not measured", density.missing)

    def _substrate_side(self, reason: str) -> bool:
        """An abort rule tripped (not a signal, a full disk or a dead substrate)."""
        return self.run.stop_reason() is None and not self.run.cut_short(reason)

    def _set_probe_load(self, level: float) -> float | None:
        """A density probe resizes turnover's resident set and keeps the rate of the first
        level (returned); a rate probe only needs its level (None)."""
        if self.params.search.dimension != "awake":
            return None
        assert self.search is not None
        residents = int(self.search.dimension.load(level))
        self.awake = residents
        self.run.load.set_awake(residents)
        return self.plan[0].level

    def manual_void(self, start_ns: int, end_ns: int) -> str | None:
        """Why a window is void when a change by hand fell in it (or a pause covered it);
        a stop by hand adds which planned windows were never held."""
        reason = self.run.control.void_reason(start_ns, end_ns)
        if reason is not None and self.run.control.stop is not None:
            reason += f"; {self.not_held(len(self.spans) + 1)}"  # + the window being judged
        return reason

    def not_held(self, held: int) -> str:
        """`windows 3–5 not held`: what a stop by hand left unjudged after `held` windows."""
        planned = len(self.plan)
        if held >= planned:
            return "no planned window left unheld"
        first, last = self.plan[held].index, self.plan[-1].index
        return f"window {first} not held" if first == last else f"windows {first}–{last} not held"

    def finish(self) -> None:
        """The body reached its end: completed, or aborted by a rule or a stop."""
        if self.stop_reason is None:
            self.run.finish("completed")
        else:
            self.run.finish("aborted", self.stop_reason)

    # ------------------------------------------------------------ after the run
    @property
    def location(self) -> str:
        return run_location(self.params.destination, self.run.run_dir.path, self.params.out)

    def headline_spans(self) -> list[tuple[int, int, int]]:
        """(window index, start, end) of the first level's judged windows: what the headline,
        its figures and a baseline comparison cover (void and aborted windows left out)."""
        return [
            (v.index, s.start_ns, s.end_ns)
            for s, v in zip(self.spans, self.verdicts, strict=True)
            if v.level == self.plan[0].level and v.outcome in ("pass", "break")
        ]

    def hold_headline(self) -> dict[str, Any] | None:
        """The whole first-level hold's headline (a baseline compares against this)."""
        spans = self.headline_spans()
        if not spans:
            return None
        return headline(self.run.recorder.window(spans[0][1], spans[-1][2]))

    def capacity(self) -> dict[str, Any] | None:
        """gate.json's `capacity`: the search's result, or why it did not run."""
        search = self.search
        if search is None:
            return None
        if search.anchor is None and search.not_run is None:
            stopped = self.stop_reason or self.run.reason or self.run.stop_reason()
            if stopped:
                search.stop(f"the campaign stopped before the search: {stopped}")
            else:
                search.start(*self._anchor())
        elif search.running:  # ended between probes (a signal, a lost substrate)
            search.stop(self.stop_reason or self.run.reason or "the campaign ended mid-search")
        return search.document()

    def write_files(self) -> None:
        """Run.finalizer: windows.jsonl, hold_seconds.jsonl and gate.json (in a thread,
        campaign_files.py); the Run then draws report.html from them."""
        self.gate = write_campaign_files(self)

    @property
    def reached_verdict(self) -> bool:
        """Judged to its end, stopped by an abort rule, or refused before any actor existed
        (a refusal is a verdict too: void, docs/SPEC.md §6); not crashed or cancelled."""
        result = self.run.result
        if result is None or self.gate is None:
            return False
        # void: a shard was lost; refused: the run could not start (both judged void)
        if result.status in ("completed", "aborted", "void", "refused"):
            return True
        # A substrate that died mid-hold is a verdict (fail), not a broken campaign; a run
        # directory that stopped taking writes is our failure, not a verdict.
        return (
            result.status == "failed"
            and self.stop_reason is not None
            and self.run.write_failure is None
            and bool(self.verdicts)
        )
