"""The wake split's arithmetic (measure/wake_split.py) and the agent-substrate preset as
parameters (engine/server_params.py): percentiles from bucket increases, a saturated one read
as the mean, windows merged by adding counts, the reconciliation's reading, and the preset's
queries merged with a user's (the user's win)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from agentsession_core.engine.params import RunParams
from agentsession_core.measure.agent_substrate import PHASES, WINDOW, preset_queries
from agentsession_core.measure.server_metrics import ServerMetricsStore
from agentsession_core.measure.wake_split import (
    Asked,
    bucket_quantile,
    merged_split,
    phase_figures,
    reconcile,
    window_split,
)

INF = math.inf


def test_a_percentile_interpolates_inside_its_bucket() -> None:
    buckets = [(0.1, 50.0), (0.2, 100.0), (INF, 100.0)]
    assert bucket_quantile(buckets, 0.5) == (pytest.approx(0.1), False)
    assert bucket_quantile(buckets, 0.75) == (pytest.approx(0.15), False)
    assert bucket_quantile([(0.1, 0.0), (INF, 0.0)], 0.5) is None


def test_a_percentile_past_the_last_bucket_is_saturated_and_reads_the_mean() -> None:
    buckets = [(1.0, 90.0), (2.5, 95.0), (INF, 100.0)]  # 5 observations above 2.5 s
    assert bucket_quantile(buckets, 0.99) == (2.5, True)
    figures = phase_figures(buckets, seconds=150.0)
    assert figures is not None
    assert figures["saturated"] == ["p99"] and figures["p99"] == figures["mean"] == 1.5
    assert figures["p50"] == pytest.approx(0.5 * 1.0 / 0.9) and figures["last_bound"] == 2.5


def test_the_reconciliation_names_lost_telemetry() -> None:
    lost = reconcile(480.4, 500)
    assert lost is not None and lost["missing"] == 20 and lost["missing_share"] == 0.04
    assert lost["said"] == (
        "server saw 480 resumes, client 500 wakes: 4% of wakes missing from the server's telemetry"
    )
    assert "every wake recorded" in (reconcile(500.2, 500) or {})["said"]
    assert "more resumes" in (reconcile(510, 500) or {})["said"]
    assert reconcile(None, 500) is None


def _answer(store: ServerMetricsStore, name: str, rows: list[tuple[dict[str, str], float]]) -> None:
    query = preset_queries("agent-substrate")[name]
    store.book_query(name, query, [(labels, [(10.0, v)]) for labels, v in rows])


def test_a_window_split_from_the_presets_answers_and_two_windows_merged() -> None:
    store = ServerMetricsStore()
    resume = [({"le": "0.1"}, 2.0), ({"le": "0.5"}, 8.0), ({"le": "+Inf"}, 10.0)]
    _answer(store, "resume_bucket", resume)
    _answer(store, "resume_seconds", [({}, 3.0)])
    parking = [
        ({"le": "0.5", "outcome": "resumed"}, 9.0),
        ({"le": "+Inf", "outcome": "resumed"}, 9.0),
        ({"le": "0.5", "outcome": "timeout"}, 0.0),
        ({"le": "+Inf", "outcome": "timeout"}, 1.0),
    ]
    _answer(store, "parking_bucket", parking)
    _answer(store, "no_free_worker", [({}, 3.0)])
    asked = Asked(store.series, preset_queries("agent-substrate"))
    split = window_split(asked, 5.0, 10.0, {"wakes": 12.0})
    assert split is not None
    rows = {p["row"]: p for p in split["phases"]}
    assert set(rows) == {"resume", "parking_resumed", "parking_timeout"}  # outcomes kept apart
    assert rows["resume"]["count"] == 10 and rows["resume"]["mean"] == pytest.approx(0.3)
    assert rows["parking_timeout"]["saturated"] == ["p50", "p90", "p99"]
    assert split["counts"]["no_free_worker"]["total"] == 3
    assert split["reconciliation"]["missing"] == 2
    assert window_split(asked, 10.0, 15.0, None) is None  # this answer belongs to [5, 10]
    both = merged_split([split, split], {"wakes": 24.0})
    assert both is not None
    merged = {p["row"]: p for p in both["phases"]}["resume"]
    assert merged["count"] == 20 and merged["mean"] == pytest.approx(0.3)
    assert merged["p50"] == rows["resume"]["p50"]
    assert both["reconciliation"]["missing"] == 4


def test_an_answer_stamped_past_its_windows_end_is_not_the_next_windows() -> None:
    # The query time goes out in whole milliseconds: window 0 ends at 13.0015736, its answer
    # comes back stamped 13.002, after window 1's start (the same instant as window 0's end).
    store = ServerMetricsStore()
    query = preset_queries("agent-substrate")["no_free_worker"]
    end0, end1 = 13.0015736, 16.0018122
    store.book_query("no_free_worker", query, [({}, [(round(end0, 3), 3.0)])])
    store.book_query("no_free_worker", query, [({}, [(round(end1, 3), 5.0)])])
    asked = Asked(store.series, preset_queries("agent-substrate"))
    first, second = window_split(asked, 10.0, end0, None), window_split(asked, end0, end1, None)
    assert first is not None and second is not None
    assert first["counts"]["no_free_worker"]["total"] == 3
    assert second["counts"]["no_free_worker"]["total"] == 5


def _params(**server: object) -> RunParams:
    return RunParams(target={"prometheus_url": "http://127.0.0.1:9090"}, server=server)


def test_the_preset_expands_and_a_users_query_of_the_same_name_wins() -> None:
    params = _params(preset="agent-substrate", queries={"resume_seconds": "vector(1)", "x": "up"})
    queries = params.server.all_queries
    assert queries["resume_seconds"] == "vector(1)" and queries["x"] == "up"
    assert params.server.overridden == ["resume_seconds"]
    for phase in PHASES:
        assert WINDOW in queries[phase.bucket_key] and phase.family in queries[phase.bucket_key]
    assert 'error_type=""' in queries["resume_bucket"]  # failures left out
    assert "sum by (le, outcome)" in queries["parking_bucket"]
    assert RunParams.model_validate(params.model_dump()).server.all_queries == queries


def test_the_preset_needs_prometheus_and_a_known_name() -> None:
    with pytest.raises(ValidationError, match=r"server\.preset agent-substrate reads Prometheus"):
        RunParams(server={"preset": "agent-substrate"})
    with pytest.raises(ValidationError, match="preset"):
        _params(preset="agent-platform")
    assert _params(preset="agent-substrate").server.queries == {}


def test_the_report_nests_the_phases_marks_saturation_and_lost_telemetry() -> None:
    from agentsession_core.report.wake_split import wake_split

    store = ServerMetricsStore()
    _answer(store, "resume_bucket", [({"le": "1.0"}, 90.0), ({"le": "+Inf"}, 100.0)])
    _answer(store, "resume_seconds", [({}, 60.0)])
    _answer(store, "restore_bucket", [({"le": "1.0"}, 100.0), ({"le": "+Inf"}, 100.0)])
    asked = Asked(store.series, preset_queries("agent-substrate"))
    client = {"wakes": 125.0, "failed": 0.0, "p50": 0.4, "p99": 1.2, "mean": 0.5}
    split = window_split(asked, 5.0, 10.0, client)
    html = wake_split({"windows": [{"index": 0, "level": 1.0, "wake_split": split}]})
    assert "client TimeToWake" in html and "window w0" in html
    assert "(mean; saturated past 1,000 ms)" in html  # resume's p99 is past its last bucket
    # restore sits inside resume, inside parking, inside the router's wake: three levels in.
    assert f"<td>{'&nbsp;' * 12}<code>restore</code>" in html
    assert "server saw 100 resumes, client 125 wakes: 20% of wakes missing" in html
    assert wake_split({"windows": [{"index": 0, "figures": {}}]}) == ""  # no preset, no part
