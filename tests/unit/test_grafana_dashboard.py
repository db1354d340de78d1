"""deployments/grafana/agentsession.json is a dashboard Grafana imports: the top-level keys of
its dashboard model, panels with a type, unique ids and a place on the 24-column grid, and
Prometheus targets with an expression and a data source. That every query names a metric the
run exports is checked against live scrapes in tests/integration/test_server_metrics.py."""

from __future__ import annotations

from tests import grafana

REQUIRED = {"title", "uid", "panels", "schemaVersion", "time", "templating", "editable"}


def test_the_dashboard_has_the_keys_grafana_needs() -> None:
    dashboard = grafana.load()
    assert REQUIRED <= set(dashboard)
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 30
    assert dashboard["uid"] == "agentsession" and dashboard["title"]
    assert {"from", "to"} <= set(dashboard["time"])
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"


def test_panels_have_types_unique_ids_and_places_that_do_not_overlap() -> None:
    panels = grafana.panels(grafana.load())
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids)
    taken: set[tuple[int, int]] = set()
    for panel in panels:
        assert panel["type"] in ("row", "timeseries", "stat", "gauge", "table"), panel["title"]
        assert panel["title"]
        place = panel["gridPos"]
        assert set(place) == {"h", "w", "x", "y"}
        assert (
            place["w"] > 0 and place["h"] > 0 and 0 <= place["x"] and place["x"] + place["w"] <= 24
        )
        cells = {
            (x, y)
            for x in range(place["x"], place["x"] + place["w"])
            for y in range(place["y"], place["y"] + place["h"])
        }
        assert not cells & taken, f"panel {panel['title']!r} overlaps another"
        taken |= cells


def test_every_target_is_a_prometheus_query_on_the_chosen_data_source() -> None:
    panels = [p for p in grafana.panels(grafana.load()) if p["type"] != "row"]
    assert len(panels) >= 12
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids))
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            assert target["expr"].strip()
            names = grafana.metric_names(target["expr"])
            assert names and all(n.startswith("agentsession_") for n in names), target["expr"]


def test_metric_names_are_read_out_of_promql() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, name) (rate(agentsession_request_duration_seconds"
        '_bucket{type="http", name=~"Step_.*"}[$__rate_interval])))'
    )
    assert grafana.metric_names(expr) == {"agentsession_request_duration_seconds_bucket"}
    both = "rate(a_total[5m]) / on (x) group_left sum without (y) (b)"
    assert grafana.metric_names(both) == {"a_total", "b"}
