"""gate.json's bytes for fixed inputs, as this version writes them: a run with its figures,
compared with one baseline and with a history of three (capacity included), re-judged with
another margin and rule, and a paired campaign's section, re-judged too. The golden file
was written by the code before gate.json's writers and readers were typed (issue 35); a
change to the bytes any writer produces shows here first. Regenerate it only for a change
meant to reach the file: `GATE_BYTES_REGENERATE=1 .venv/bin/python -m pytest
tests/unit/test_gate_bytes.py`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from agentsession_core.judge.gate import (
    gate_document,
    rejudge_paired,
    rejudge_regressions,
    with_baseline,
    without_baseline,
)
from agentsession_core.judge.hold_seconds import HoldSeconds
from agentsession_core.judge.paired import paired_comparison
from agentsession_core.judge.stored_run import StoredRun
from agentsession_core.measure.stats import REFERENCE
from tests.unit.gate_runs import gate_of, seconds, window

GOLDEN = Path(__file__).parent / "data" / "gate_bytes.json"


def _capacity(rate: float, broke: float) -> dict[str, Any]:
    return {
        "status": "found",
        "level": rate,
        "rate": rate,
        "broke_at_level": broke,
        "broke_at_rate": broke,
        "resolution": 0.1,
        "unit": "swaps/s",
        "reason": "test",
        "probes": [{"level": 1.0}],
    }


def _paired_section(p50_candidate: float, p50_reference: float) -> dict[str, Any]:
    records = seconds(p50_ms=p50_candidate, seconds=120, seed=4) + [
        {**r, "arm": REFERENCE} for r in seconds(p50_ms=p50_reference, seconds=120, seed=5)
    ]
    return paired_comparison(
        HoldSeconds.of_records(records),
        HoldSeconds.of_records(records, REFERENCE),
        saturated={1_003, 1_050},
        max_regression=0.1,
        seed=3,
        resamples=200,
    )


def documents() -> dict[str, Any]:
    base = gate_of(seconds(p50_ms=40, seconds=300, seed=1))
    base["capacity"] = _capacity(10.0, 11.0)
    slow = gate_of(seconds(p50_ms=70, seconds=300, seed=2))
    slow["capacity"] = _capacity(6.0, 6.6)
    nights = [gate_of(seconds(p50_ms=40 + i, seconds=300, seed=10 + i)) for i in range(3)]
    # The spread the golden file was written with (the default's is its own value).
    one = with_baseline(slow, StoredRun.of("base", base), 0.2, night_spread=0.1)
    history = with_baseline(
        slow, [StoredRun.of(f"night{i}", n) for i, n in enumerate(nights)], 0.2, night_spread=0.1
    )
    paired = gate_document(
        [window(0), window(1)],
        abort_reason=None,
        run_status="completed",
        run={"name": "paired"},
        paired=_paired_section(30, 20),
    )
    return {
        "one": one,
        "history": history,
        "rejudged": rejudge_regressions(one, 2.0, "margin-test"),
        "none": without_baseline(slow, "no earlier comparable run of this campaign"),
        "paired": paired,
        "paired_rejudged": rejudge_paired(paired, 2.0, "whole-interval"),
    }


def test_gate_json_bytes_are_what_they_were() -> None:
    written = orjson.dumps(documents(), option=orjson.OPT_INDENT_2) + b"\n"
    if os.environ.get("GATE_BYTES_REGENERATE"):
        GOLDEN.write_bytes(written)
    assert written == GOLDEN.read_bytes()
