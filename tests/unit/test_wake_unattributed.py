"""The wake split's `unattributed` row (measure/wake_unattributed.py): the client's wake less
its innermost answered phases (the only ones that add), by means (which add) and, beside it,
by p50s (upstream's reading, which is no percentile); floored and flagged when the phases
exceed the wake; judgeable as `server.unattributed_mean`; drawn by the report."""

from __future__ import annotations

import math
from typing import Any

import pytest

from agentsession_core.measure.agent_substrate import preset_queries
from agentsession_core.measure.server_metrics import ServerMetricsStore
from agentsession_core.measure.wake_split import (
    Asked,
    bucket_quantile,
    merged_split,
    phase_figures,
    phase_rows_figures,
    window_split,
)
from agentsession_core.measure.wake_unattributed import (
    in_wake,
    innermost,
    row_name,
    unattributed,
)

INF = math.inf


def phase(name: str, buckets: list[tuple[float, float]], seconds: float, **extra: Any) -> dict:
    figures = phase_figures(buckets, seconds)
    assert figures is not None
    return {"row": name, "phase": name, "within": None, "labels": {}, **figures, **extra}


def rows(found: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    assert found is not None
    return {r["statistic"]: r for r in found["rows"]}


def test_only_the_innermost_wake_phases_add() -> None:
    assert innermost({"wake_router", "parking", "resume", "scheduling", "restore"}) == [
        "scheduling",
        "restore",
    ]
    assert innermost({"wake_router", "resume"}) == ["resume"]
    assert innermost({"parking", "checkpoint"}) == ["parking", "checkpoint"]  # filtered below
    assert in_wake("restore") and in_wake("wake_router") and not in_wake("checkpoint")
    assert row_name("mean") == "phase_client_wake_all_mean_ok_unattributed"


def test_the_mean_row_is_the_wake_less_its_disjoint_parts() -> None:
    # Upstream's reported case in miniature: a 3.37 s wake, 1.06 s + 0.21 s named.
    scheduling = phase("scheduling", [(2.0, 100.0), (INF, 100.0)], seconds=106.0)
    restore = phase("restore", [(0.5, 100.0), (INF, 100.0)], seconds=21.0)
    resume = phase("resume", [(5.0, 100.0), (INF, 100.0)], seconds=200.0)
    checkpoint = phase("checkpoint", [(5.0, 100.0), (INF, 100.0)], seconds=400.0)
    client = {"wakes": 100.0, "mean": 3.37, "p50": 3.2}
    found = unattributed([resume, scheduling, restore, checkpoint], client, bucket_quantile)
    assert found is not None and found["named_phases"] == ["scheduling", "restore"]
    mean = rows(found)["mean"]
    assert mean["row"] == "phase_client_wake_all_mean_ok_unattributed"
    assert mean["named"] == pytest.approx(1.06 + 0.21)
    assert mean["value"] == pytest.approx(3.37 - 1.27) and not mean["negative"]
    assert mean["share"] == pytest.approx((3.37 - 1.27) / 3.37)
    # The p50 row is the difference of the p50s: 1.0 s and 0.25 s (the buckets' midpoints).
    p50 = rows(found)["p50"]
    assert p50["named"] == pytest.approx(1.0 + 0.25)
    assert p50["value"] == pytest.approx(3.2 - 1.25) and p50["saturated"] is False
    assert (
        found["said"] == "2100 ms (62%) of the client's mean wake of 3370 ms is outside "
        "scheduling + restore"
    )


def test_percentiles_do_not_add_but_means_do() -> None:
    """Two disjoint parts, each fast in most wakes and slow in a few, the slow ones in
    different wakes: every wake's total is the same 1.1 s. The mean row finds nothing left
    over, as it must; the p50s' difference invents 0.9 s — why the mean is the figure."""
    # Part A: 0.1 s in half the wakes, 1.0 s in the other half; part B the other way round
    # (one more fast one, so its p50 lands in the fast bucket too).
    a = phase("scheduling", [(0.1, 50.0), (1.0, 100.0), (INF, 100.0)], seconds=55.0)
    b = phase("restore", [(0.1, 51.0), (1.0, 100.0), (INF, 100.0)], seconds=55.0)
    client = {"wakes": 100.0, "mean": 1.1, "p50": 1.1}
    found = rows(unattributed([a, b], client, bucket_quantile))
    assert found["mean"]["value"] == pytest.approx(0.0, abs=1e-9)
    assert found["p50"]["value"] > 0.8  # the p50s sum to ~0.2 s: an invented remainder


def test_phases_longer_than_the_wake_are_floored_and_flagged() -> None:
    resume = phase("resume", [(1.0, 10.0), (INF, 10.0)], seconds=8.0)  # mean 0.8 s
    found = unattributed([resume], {"wakes": 5.0, "mean": 0.5, "p50": 0.45}, bucket_quantile)
    mean = rows(found)["mean"]
    assert mean["negative"] and mean["raw"] == pytest.approx(-0.3) and mean["value"] == 0.0
    assert found is not None and "floored at 0" in found["said"]


def test_a_saturated_phase_marks_the_p50_row_and_a_labelled_phase_counts_once() -> None:
    # Only the parking answered (kept apart by outcome): its rows are one phase here.
    resumed = phase("parking", [(0.5, 9.0), (INF, 9.0)], seconds=2.7, row="parking_resumed")
    timeout = phase("parking", [(0.5, 0.0), (INF, 1.0)], seconds=5.0, row="parking_timeout")
    found = unattributed([resumed, timeout], {"mean": 1.0, "p50": 0.5}, bucket_quantile)
    assert found is not None and found["named_phases"] == ["parking"]
    assert found["parts"]["parking"]["mean"] == pytest.approx((2.7 + 5.0) / 10)
    assert rows(found)["mean"]["value"] == pytest.approx(1.0 - 0.77)
    slow = phase("resume", [(0.1, 10.0), (0.5, 10.0), (INF, 100.0)], seconds=300.0)
    found = unattributed([slow], {"mean": 4.0, "p50": 3.5}, bucket_quantile)
    p50 = rows(found)["p50"]
    assert p50["saturated"] and p50["named"] == pytest.approx(3.0)  # read as the mean


def test_without_the_client_or_a_wake_phase_there_is_no_row() -> None:
    checkpoint = phase("checkpoint", [(1.0, 10.0), (INF, 10.0)], seconds=5.0)
    assert unattributed([checkpoint], {"mean": 1.0, "p50": 1.0}, bucket_quantile) is None
    resume = phase("resume", [(1.0, 10.0), (INF, 10.0)], seconds=5.0)
    assert unattributed([resume], None, bucket_quantile) is None
    # No sum answered: no mean, so only the p50 row.
    no_sum = phase("resume", [(1.0, 10.0), (INF, 10.0)], seconds=5.0) | {"mean": None}
    found = unattributed([no_sum], {"mean": 1.0, "p50": 0.9}, bucket_quantile)
    assert set(rows(found)) == {"p50"}


def _answer(store: ServerMetricsStore, name: str, answers: list[tuple[dict[str, str], float]]):
    store.book_query(
        name,
        preset_queries("agent-substrate")[name],
        [(labels, [(10.0, v)]) for labels, v in answers],
    )


def test_the_split_carries_the_row_merges_it_afresh_and_a_rule_can_judge_it() -> None:
    store = ServerMetricsStore()
    _answer(store, "resume_bucket", [({"le": "0.5"}, 8.0), ({"le": "+Inf"}, 10.0)])
    _answer(store, "resume_seconds", [({}, 4.0)])
    asked = Asked(store.series, preset_queries("agent-substrate"))
    client = {"wakes": 10.0, "failed": 0.0, "p50": 0.5, "p99": 1.0, "mean": 0.6}
    split = window_split(asked, 5.0, 10.0, client)
    assert split is not None
    assert rows(split["unattributed"])["mean"]["value"] == pytest.approx(0.2)
    figures = phase_rows_figures(split)
    assert figures["unattributed"]["mean"] == pytest.approx(0.2)
    both = merged_split([split, split], dict(client, mean=0.7))
    assert both is not None and rows(both["unattributed"])["mean"]["value"] == pytest.approx(0.3)

    from agentsession_core.report.wake_split import wake_split

    html = wake_split({"windows": [{"index": 0, "level": 1.0, "wake_split": split}]})
    assert "<code>phase_client_wake_all_mean_ok_unattributed</code>" in html
    assert "<code>phase_client_wake_all_p50_ok_unattributed</code>" in html
    assert "200 ms" in html and "a difference of p50s" in html
