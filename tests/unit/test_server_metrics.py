"""Server-side figures (docs/SPEC.md §5.9): the store's series and windows, `server.` rules,
the parameters that name a source, campaign.json, and the local substrate's counters."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import RunParams
from agentsession_core.errors import UsageError
from agentsession_core.judge.thresholds import parse_threshold
from agentsession_core.judge.verdict import ThresholdResult, evaluate, judge_window
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.server_metrics import (
    COUNTER,
    GAUGE,
    Series,
    ServerMetricsStore,
    ServerWindow,
    series_name,
    split_figure,
)
from agentsession_core.run.files import campaign_document
from local_substrate.metrics import SubstrateCounters
from local_substrate.protocol import WireError

EXPOSITION = """\
# HELP agentsession_substrate_actors Actors by state
# TYPE agentsession_substrate_actors gauge
agentsession_substrate_actors{state="RUNNING"} 3.0
agentsession_substrate_actors{state="SUSPENDED"} 9.0
# HELP agentsession_substrate_snapshot_bytes_written_total Bytes written
# TYPE agentsession_substrate_snapshot_bytes_written_total counter
agentsession_substrate_snapshot_bytes_written_total %d
# HELP agentsession_substrate_worker_rss_bytes RSS
# TYPE agentsession_substrate_worker_rss_bytes gauge
agentsession_substrate_worker_rss_bytes{worker="w1.2"} 100.0
# HELP python_gc_objects_collected_total not ours
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 5.0
# HELP agentsession_substrate_wake_seconds a histogram: left out
# TYPE agentsession_substrate_wake_seconds histogram
agentsession_substrate_wake_seconds_bucket{le="+Inf"} 1.0
agentsession_substrate_wake_seconds_sum 0.5
agentsession_substrate_wake_seconds_count 1.0
"""


def scrape(store: ServerMetricsStore, t: float, written: int) -> None:
    store.book_scrape(t, text_string_to_metric_families(EXPOSITION % written))


def test_series_are_named_short_per_label_set_with_the_family_sum() -> None:
    store = ServerMetricsStore()
    scrape(store, 100.0, 0)
    assert sorted(store.series) == [
        "actors",
        "actors_running",
        "actors_suspended",
        "snapshot_bytes_written",
        "worker_rss_bytes",
        "worker_rss_bytes_w1_2",
    ]
    assert store.series["actors"].v[0] == 12.0 and store.series["actors"].aggregate
    assert store.series["snapshot_bytes_written"].kind == COUNTER
    assert store.series["actors_running"].describe() == {
        "metric": "agentsession_substrate_actors",
        "labels": {"state": "RUNNING"},
        "kind": GAUGE,
        "help": "Actors by state",
    }
    assert series_name("requests", {"wire": "ate", "api": "Control"}) == "requests_control_ate"
    assert split_figure("snapshot_bytes_written_rate") == ("snapshot_bytes_written", "rate")
    assert split_figure("parked_requests_max") == ("parked_requests", "max")
    assert split_figure("parked_requests") is None


def test_counter_windows_interpolate_at_their_edges_and_tile_the_hold() -> None:
    store = ServerMetricsStore()
    # 1000 bytes/s, sampled every 2 s; the counter restarts from zero between 106 and 108.
    values = {100: 0, 102: 2000, 104: 4000, 106: 6000, 108: 1000, 110: 3000}
    for t, value in values.items():
        scrape(store, float(t), value)
    first = store.cut(101.0, 105.0).figures["snapshot_bytes_written"]
    second = store.cut(105.0, 109.0).figures["snapshot_bytes_written"]
    steady = store.cut(101.0, 109.0).figures["snapshot_bytes_written"]
    assert first["increase"] == pytest.approx(4000.0)
    assert first["rate"] == pytest.approx(1000.0)
    assert first["samples"] == 2  # t=102, 104
    # As PromQL's increase(): across the reset, what the counter shows after it (1000).
    assert second["increase"] == pytest.approx(0.5 * 2000 + 1000 + 0.5 * 2000)
    assert first["increase"] + second["increase"] == pytest.approx(steady["increase"])
    assert steady["start"] == pytest.approx(1000.0)


def test_gauge_windows_and_windows_without_samples() -> None:
    store = ServerMetricsStore()
    series = store.series["parked"] = Series("parked", {}, GAUGE)
    for t, value in [(10.0, 1.0), (12.0, 5.0), (14.0, 3.0), (16.0, 0.0)]:
        series.add(t, value)
    series.add(15.0, 99.0)  # out of order: dropped
    series.add(17.0, float("nan"))  # not a measurement: dropped
    window = store.cut(11.0, 15.0, index=2, level=1.5)
    assert window.figures["parked"] == {
        "start": 5.0,
        "end": 3.0,
        "min": 3.0,
        "max": 5.0,
        "mean": 4.0,
        "samples": 2,
    }
    # The sample that closed the window (just after its end) belongs to its gauges.
    assert store.cut(11.0, 15.0, gauge_end=16.0).figures["parked"]["end"] == 0.0
    assert store.cut(20.0, 30.0).figures == {}
    assert window.to_dict()["index"] == 2 and window.to_dict()["level"] == 1.5


def test_server_rules_parse_or_are_refused_naming_the_problem() -> None:
    rule = parse_threshold("server.snapshot_bytes_written_rate < 200Mi")
    assert (rule.server, rule.op, rule.value) == ("snapshot_bytes_written_rate", "<", 200 << 20)
    assert parse_threshold("server.wakes_rate >= 0.9 * target").bound(5.0) == pytest.approx(4.5)
    assert parse_threshold("server.parked_requests_max <= 8 (min 3)").min_samples == 3
    for bad, why in [
        ("server.parked_requests <= 8", "does not end in a figure"),
        ("server.parked_requests_max == 8", "operator"),
        ("server.parked_requests_max < 8 (abort)", "cannot abort"),
        ("server.parked_requests_max < lots", "not a number or a size"),
        ("server.wakes_rate > 1 * level", "only '* target'"),
    ]:
        with pytest.raises(UsageError, match=re.escape(why)):
            parse_threshold(bad, where="thresholds[0]")
    with pytest.raises(UsageError, match="cannot abort"):
        parse_threshold("server.wakes_rate > 1", abort=True)


def test_server_rules_are_judged_on_the_window_figures() -> None:
    figures = {"wakes": {"rate": 2.5, "increase": 25.0, "samples": 5}}
    server = ServerWindow(0.0, 10.0, 5, figures)
    empty = Recorder().window(0, 10**9)  # no requests: a server rule reads none of them

    def judged(rule: str, server: ServerWindow | None, target: float | None) -> ThresholdResult:
        return evaluate(parse_threshold(rule), empty, target, server)

    held = judged("server.wakes_rate >= 0.9 * target", server, 2.0)
    assert (held.passed, held.observed, held.samples, held.bound) == (True, 2.5, 5, 1.8)
    missed = judged("server.wakes_increase < 10", server, None)
    assert missed.passed is False and "server wakes_increase = 25" in missed.detail
    few = judged("server.wakes_rate > 1 (min 9)", server, None)
    assert few.passed is None and "5 samples < min 9" in few.detail
    absent = judged("server.parked_requests_max < 1", server, None)
    assert absent.passed is None and "no figure parked_requests_max" in absent.detail
    none = judged("server.wakes_rate > 1", None, None)
    assert none.passed is None and "no server figures" in none.detail
    window = Recorder().window(0, 10**9)
    rules = [parse_threshold("server.wakes_increase < 10")]
    verdict = judge_window(window, rules, index=0, level=1.0, target=1.0, server=server)
    assert verdict.outcome == "break"


def _campaign(**values: Any) -> CampaignParams:
    return CampaignParams(**{"script": "smoke", "hold_minutes": 1, "window_seconds": 60, **values})


def test_a_server_rule_needs_a_source_and_a_series_the_local_substrate_exports() -> None:
    rule = ["server.snapshot_bytes_written_rate < 1e9"]
    assert _campaign(thresholds=rule).server_metrics_source  # embedded: its own /metrics
    remote = {"substrate": "http://substrate.test"}
    with pytest.raises(ValueError, match="judges a server figure but the run has none"):
        _campaign(thresholds=rule, target=remote)
    with pytest.raises(ValueError, match="judges a server figure"):
        _campaign(thresholds=rule, server={"enabled": False})
    _campaign(thresholds=rule, target={**remote, "metrics_url": "http://substrate.test/metrics"})
    with pytest.raises(ValueError, match="exports no such series"):
        _campaign(thresholds=["server.snapshot_byte_written_rate < 1e9"])
    _campaign(
        thresholds=["server.actors_suspended_max < 100", "server.worker_rss_bytes_w0_max > 0"]
    )


def test_server_parameters_from_flags_text_and_their_pairing() -> None:
    params = RunParams.model_validate(
        {
            "target": {"prometheus_url": "http://prom.test:9090"},
            "server": {"series": "agentsession_*, node_*", "queries": "{cpu: 'sum(rate(x[1m]))'}"},
        }
    )
    assert params.server.series == ["agentsession_*", "node_*"]
    assert params.server.queries == {"cpu": "sum(rate(x[1m]))"}
    with pytest.raises(ValueError, match=r"need target\.prometheus_url"):
        RunParams.model_validate({"server": {"queries": {"cpu": "up"}}})
    with pytest.raises(ValueError, match=r"needs server\.queries"):
        RunParams.model_validate({"target": {"prometheus_url": "http://prom.test"}})
    with pytest.raises(ValueError, match="query name"):
        RunParams.model_validate(
            {"target": {"prometheus_url": "http://p.test"}, "server": {"queries": {"A b": "up"}}}
        )


def test_campaign_json_holds_every_campaign_parameter_with_credentials_redacted() -> None:
    params = _campaign(
        levels=[1, 2],
        thresholds=["TimeToWake: p99 < 2s", "server.wakes_rate > 0"],
        abort={"rules": ["Step_*: failure_ratio < 0.5"], "delay_seconds": 5},
        upload={"attempts": 2},
        target={
            "substrate": "https://sub.test",
            "token": "s3cr3t-token",
            "metrics_url": "https://TOKENVALUE@sub.test/metrics?access_token=abc&x=1",
            "prometheus_url": "https://bench:hunter2@prom.test:9090",
        },
        server={"queries": {"cpu": "sum(rate(process_cpu_seconds_total[1m]))"}},
    )
    run = SimpleNamespace(params=params, atespace="a", script=None, started_unix=1.0)
    document = campaign_document(run)  # type: ignore[arg-type]
    dumped = document["params"]
    assert document["params_model"] == "CampaignParams"
    expected = params.model_dump(mode="json")
    assert set(dumped) == set(expected)
    for section in ("abort", "upload", "server", "population", "cleanup"):
        assert dumped[section] == expected[section], section
    assert dumped["levels"] == [1.0, 2.0] and dumped["window_seconds"] == 60.0
    assert dumped["thresholds"] == ["TimeToWake: p99 < 2s", "server.wakes_rate > 0"]
    target = dumped["target"]
    assert target["token"] == "***"
    assert target["prometheus_url"] == "https://bench:***@prom.test:9090"
    assert target["metrics_url"] == "https://***@sub.test/metrics?access_token=***&x=1"
    assert "s3cr3t" not in str(document) and "hunter2" not in str(document)
    assert "TOKENVALUE" not in str(document)


def test_substrate_counters_count_snapshots_by_the_worker_call_that_moved_them() -> None:
    counts = SubstrateCounters()
    counts.worker_answered("save", {"snapshot": "/s"}, {"bytes": 100})
    counts.worker_answered("spill", {"snapshot": "/s"}, {"bytes": 50})
    counts.worker_answered("load", {"snapshot": "/s"}, {"bytes": 70})
    counts.worker_answered("load", {"snapshot": None}, {"bytes": 0})  # a new actor: no read
    counts.worker_answered("pause", {}, {"bytes": 30})
    counts.worker_answered("state", {}, {"bytes": 30})
    assert (counts.snapshots_written, counts.bytes_written) == (2, 150)
    assert (counts.snapshots_read, counts.bytes_read) == (1, 70)
    assert counts.pauses == 1
    with counts.waking(router=True):
        assert counts.parked == 1
    with pytest.raises(WireError), counts.waking(router=False):
        assert counts.parked == 0
        raise WireError("RESOURCE_EXHAUSTED", "no worker")
    assert counts.parked == 0 and counts.wake_failures == {"RESOURCE_EXHAUSTED": 1}
    counts.request("ate", "router", False)
    assert counts.requests[("ate", "router", "error")] == 1
