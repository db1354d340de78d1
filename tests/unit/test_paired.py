"""A paired campaign's judging: candidate against reference over paired blocks, saturated
blocks dropped from both arms, the decision rules, and the arms in one recorder."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from agentsession_core.judge.decision import classify
from agentsession_core.judge.gate import decide, gate_document, rejudge_paired
from agentsession_core.judge.hold_seconds import HoldSeconds, saturated_seconds, second_records
from agentsession_core.judge.paired import kept_blocks, paired_comparison
from agentsession_core.judge.uncertainty import figures
from agentsession_core.measure.arm_recorder import ArmRecorder
from agentsession_core.measure.histogram import LogHistogram
from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.measure.stats import REFERENCE, TIME_TO_WAKE_ROW, arm_row, row_arm
from tests.unit.gate_runs import window


def arm_records(
    p50_ms: float,
    *,
    seconds: int = 300,
    per_second: int = 4,
    seed: int = 1,
    common: np.ndarray | None = None,
    arm: str | None = None,
) -> list[dict[str, Any]]:
    """hold_seconds.jsonl records of one arm: lognormal wakes around p50_ms, each second's
    times multiplied by `common[t]` (what disturbs the machine disturbs both arms)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(seconds):
        hist = LogHistogram()
        scale = common[t] if common is not None else 1.0
        hist.add_many(rng.lognormal(np.log(p50_ms * scale), 0.3, size=per_second))
        record: dict[str, Any] = {
            "t": 1_000 + t,
            "window": 0,
            "sections": {"TimeToWake": {**hist.to_dict(), "failures": 0}},
            "requests": per_second,
            "request_failures": 0,
            "achieved": per_second,
        }
        if arm is not None:
            record["arm"] = arm
        out.append(record)
    return out


def compared(candidate: list[dict], reference: list[dict], **kwargs: Any) -> dict[str, Any]:
    records = candidate + [{**r, "arm": REFERENCE} for r in reference]
    options: dict[str, Any] = {"max_regression": 0.1, "seed": 3, **kwargs}
    return paired_comparison(
        HoldSeconds.of_records(records),
        HoldSeconds.of_records(records, REFERENCE),
        saturated=kwargs.pop("saturated", saturated_seconds(records)),
        **{k: v for k, v in options.items() if k != "saturated"},
    )


def metric(section: dict[str, Any], name: str) -> dict[str, Any]:
    return next(m for m in section["metrics"] if m["metric"] == name)


def test_the_same_build_on_both_arms_is_unchanged() -> None:
    section = compared(arm_records(20, seed=1), arm_records(20, seed=2))
    wake = metric(section, "TimeToWake.p50")
    assert section["status"] == "compared" and section["blocks"] == 60
    assert wake["status"] == "unchanged" and wake["interval"][0] < 0 < wake["interval"][1]
    assert section["regressions"] == []


def test_a_slower_candidate_regresses_and_its_ratio_is_the_arms_values() -> None:
    section = compared(arm_records(30, seed=1), arm_records(20, seed=2))
    wake = metric(section, "TimeToWake.p50")
    assert wake["status"] == "regressed" and "TimeToWake.p50" in section["regressions"]
    assert wake["ratio"] == pytest.approx((wake["candidate"] + 1) / (wake["reference"] + 1))
    low, high = wake["ratio_interval"]
    assert low < wake["ratio"] < high and low > 1.0
    assert wake["change"] == pytest.approx(math.expm1(wake["log_change"]))


def test_pairing_cancels_what_disturbs_both_arms() -> None:
    """A machine that slows everything 3x in stretches: the arms' own intervals (what
    comparing two separate runs has) are wide; the paired difference's is narrow, and a
    +25 % candidate is called by the paired rule while the unpaired intervals overlap."""
    rng = np.random.default_rng(11)
    common = np.repeat(np.where(rng.random(30) < 0.4, 3.0, 1.0), 10)
    mine = arm_records(25, seed=1, common=common)
    theirs = arm_records(20, seed=2, common=common)
    section = compared(mine, theirs)
    wake = metric(section, "TimeToWake.p50")
    apart = [figures(HoldSeconds.of_records(r), seed=3)["TimeToWake.p50"] for r in (mine, theirs)]
    unpaired_se = math.hypot(apart[0]["se_log"], apart[1]["se_log"])
    assert wake["se_log"] < unpaired_se / 2
    assert wake["status"] == "regressed"
    assert apart[0]["low"] < apart[1]["high"]  # the two runs' own intervals overlap


def test_a_saturated_second_drops_its_block_from_both_arms() -> None:
    mine, theirs = arm_records(20, seed=1, seconds=60), arm_records(20, seed=2, seconds=60)
    for records in (mine, theirs):
        records[12]["saturated"] = "loop lag p99 80 ms > 50 ms"  # second 12: block 2 of 5 s
        # Whatever the saturated second booked must not reach either arm's figures.
        big = LogHistogram()
        big.add_many([5_000.0] * 40)
        records[12]["sections"]["TimeToWake"] = {**big.to_dict(), "failures": 0}
    section = compared(mine, theirs, min_blocks=4)
    assert (section["blocks_planned"], section["blocks_dropped"], section["blocks"]) == (12, 1, 11)
    assert section["saturated_seconds"] == 1 and section["seconds"] == 55
    wake = metric(section, "TimeToWake.p99")
    assert wake["candidate"] < 1_000 and wake["reference"] < 1_000


def test_too_few_blocks_left_make_the_comparison_and_the_campaign_void() -> None:
    mine, theirs = arm_records(20, seed=1, seconds=30), arm_records(20, seed=2, seconds=30)
    for t in range(0, 30, 5):  # a saturated second in every second block
        if t % 10 == 0:
            mine[t]["saturated"] = theirs[t]["saturated"] = "cpu 97% > 90%"
    section = compared(mine, theirs, min_blocks=4)
    assert section["status"] == "void" and section["blocks"] == 3
    assert "3 of 6 paired blocks" in section["why"] and "needs 4" in section["why"]
    doc = gate_document([window(0)], abort_reason=None, run_status="completed", paired=section)
    assert doc["verdict"] == "void" and "paired comparison is void" in doc["reason"]


def test_kept_blocks_cut_consecutive_seconds_and_keep_a_short_last_block() -> None:
    seconds = list(range(100, 112))
    assert kept_blocks(seconds, set(), 5) == (list(range(12)), 3, 0)
    assert kept_blocks(seconds, {106}, 5) == ([0, 1, 2, 3, 4, 10, 11], 3, 1)


def test_a_paired_regression_fails_a_run_that_would_pass_and_names_the_arm() -> None:
    section = compared(arm_records(30, seed=1), arm_records(20, seed=2))
    doc = gate_document([window(0)], abort_reason=None, run_status="completed", paired=section)
    assert doc["verdict"] == "fail"
    assert doc["reason"].startswith("the candidate regressed against the reference arm: ")
    assert "TimeToWake.p50 +" in doc["reason"] and "blocks)" in doc["reason"]
    # A broken window is the verdict's reason first; the comparison never turns void to fail.
    broke = gate_document(
        [window(0, "void")], abort_reason=None, run_status="completed", paired=section
    )
    assert broke["verdict"] == "void"
    # Re-judged with a margin the change does not exceed: unchanged, the run passes.
    wider = rejudge_paired(doc, 2.0, "significant")
    assert wider["verdict"] == "pass" and wider["paired"]["regressions"] == []
    assert decide(wider)[0] == "pass"


@pytest.mark.parametrize(
    ("d", "se", "expected"),
    [
        # +16 %, clearly non-zero, beyond a 10 % margin: significant calls it; its interval
        # [+9 %, +24 %] still reaches below the margin: the other two do not.
        (math.log(1.16), 0.025, {"significant"}),
        # +20 %: the one-sided test at the margin calls it, the whole two-sided interval
        # [+10 %, +31 %] still just reaches below the margin.
        (math.log(1.20), 0.0345, {"significant", "margin-test"}),
        # +30 % well known: every rule calls it.
        (math.log(1.30), 0.02, {"significant", "margin-test", "whole-interval"}),
        # +15 % from a noisy estimate: the interval includes no change: no rule calls it.
        (math.log(1.15), 0.08, set()),
        # +5 %, very precisely: real but below the margin, so no rule calls it.
        (math.log(1.05), 0.005, set()),
    ],
)
def test_the_decision_rules(d: float, se: float, expected: set[str]) -> None:
    z = 2.5758293035489004
    called = {
        rule
        for rule in ("significant", "margin-test", "whole-interval")
        if classify(
            d,
            d - z * se,
            d + z * se,
            se=se,
            margin=math.log1p(0.1),
            confidence=0.99,
            rule=rule,  # type: ignore[arg-type]
        )
        == "regressed"
    }
    assert called == expected


def test_an_arm_books_into_the_run_recorder_under_its_own_names() -> None:
    clock = [10 * NS_PER_S]
    rec = Recorder(clock_ns=lambda: clock[0], wall_clock=lambda: 1_000.0)
    reference = ArmRecorder(rec, REFERENCE)
    start = clock[0]
    rec.row(*TIME_TO_WAKE_ROW).ok(start, start, start + 10_000_000)
    reference.row(*TIME_TO_WAKE_ROW).ok(start, start, start + 30_000_000)
    reference.row("generator", "DispatchLag").ok(start, start, start)
    reference.gauge("sessions", {"state": "parked"}, 4)
    clock[0] += 2 * NS_PER_S
    rec.flush()
    assert (TIME_TO_WAKE_ROW[0], arm_row(TIME_TO_WAKE_ROW[1], REFERENCE)) in rec._rows
    assert ("generator", "DispatchLag") in rec._rows  # the one generator's: both arms'
    whole = rec.window(start, clock[0])
    assert row_arm(("rps", "TimeToWake:arm=reference")) == (TIME_TO_WAKE_ROW, REFERENCE)
    mine, theirs = whole.arm("candidate"), whole.arm(REFERENCE)
    assert mine.row(*TIME_TO_WAKE_ROW).response.max == pytest.approx(10, rel=0.02)
    assert theirs.row(*TIME_TO_WAKE_ROW).response.max == pytest.approx(30, rel=0.02)
    assert theirs.row("generator", "DispatchLag").count == 1
    assert [g[1:] for g in theirs.gauges][:1] == [({"state": "parked"}, "sessions", 4.0)]
    assert reference.window(start, clock[0]).row(*TIME_TO_WAKE_ROW).count == 1
    records = second_records(rec, [(0, start, clock[0])], arm=REFERENCE)
    assert records[0]["arm"] == REFERENCE and "TimeToWake" in records[0]["sections"]
    with pytest.raises(TypeError):
        reference.merge(rec)
