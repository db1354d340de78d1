"""Locust-format CSVs and stats.jsonl rendered from a recorder."""

import csv
import io

import orjson
import pytest

from agentsession_core.measure.recorder import NS_PER_S, Recorder
from agentsession_core.output.stats_files import (
    FAILURES_CSV_COLUMNS,
    HISTORY_CSV,
    HISTORY_CSV_COLUMNS,
    HISTORY_JSONL,
    STATS_CSV_COLUMNS,
    HistoryWriter,
    jsonl_row,
    render_failures_csv,
    render_stats_csv,
    render_stats_jsonl,
    stats_jsonl_rows,
)

WALL0 = 1_700_000_000.0
MONO0 = NS_PER_S
MS = 1_000_000

# Locust 2.x's own headers (locust/stats.py, StatsCSV and StatsCSVFileWriter).
LOCUST_STATS = (
    "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,"
    "Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,"
    "50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%"
)
LOCUST_HISTORY = (
    "Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,"
    "98%,99%,99.9%,99.99%,100%,Total Request Count,Total Failure Count,"
    "Total Median Response Time,Total Average Response Time,"
    "Total Min Response Time,Total Max Response Time,Total Average Content Size"
)


@pytest.fixture
def recorded():
    now = [MONO0]
    rec = Recorder(clock_ns=lambda: now[0], wall_clock=lambda: WALL0)
    step = rec.row("http", "Step_01_read_task")
    wake = rec.row("rps", "TimeToWake")
    for s in range(4):
        base = MONO0 + s * NS_PER_S
        for i in range(10):
            t = base + i * 50 * MS
            step.ok(t, t + 1 * MS, t + (10 + i) * MS, nbytes=200)
        wake.ok(base, base, base + 100 * MS)
    step.fail(MONO0, MONO0, MONO0 + 30 * MS, "op 1 fill_ram: UNAVAILABLE")
    step.fail(MONO0, MONO0, MONO0 + 30 * MS, "op 1 fill_ram: UNAVAILABLE")
    wake.fail(MONO0, MONO0, MONO0 + 5 * MS, 'ACTOR_NOT_FOUND "a,b"')
    rec.row("actor", "CrashCount").event(MONO0 + 2 * NS_PER_S)
    rec.row("generator", "LoopLag").ok(MONO0, MONO0, MONO0 + MS)
    now[0] = MONO0 + 5 * NS_PER_S
    rec.flush()
    return rec, now


def parse(text):
    return list(csv.reader(io.StringIO(text)))


def test_headers_are_locusts():
    assert ",".join(STATS_CSV_COLUMNS) == LOCUST_STATS
    assert ",".join(HISTORY_CSV_COLUMNS) == LOCUST_HISTORY
    assert FAILURES_CSV_COLUMNS == ["Method", "Name", "Error", "Occurrences"]


def test_stats_csv_rows_and_aggregated(recorded):
    rec, _ = recorded
    window = rec.window(MONO0, MONO0 + 4 * NS_PER_S)
    rows = list(csv.DictReader(io.StringIO(render_stats_csv(window))))
    names = [(r["Type"], r["Name"]) for r in rows]
    assert names == [
        ("actor", "CrashCount"),
        ("http", "Step_01_read_task"),
        ("rps", "TimeToWake"),
        ("", "Aggregated"),
    ]  # no generator rows
    step = rows[1]
    assert step["Request Count"] == "42" and step["Failure Count"] == "2"
    assert float(step["Requests/s"]) == pytest.approx(42 / 4)
    assert float(step["Failures/s"]) == pytest.approx(2 / 4)
    assert float(step["Min Response Time"]) == 10.0
    assert float(step["Max Response Time"]) == 30.0
    assert float(step["100%"]) == 30.0
    assert float(step["Average Content Size"]) == pytest.approx(200 * 40 / 42, abs=1e-3)
    crash = rows[0]
    assert crash["Request Count"] == "1" and crash["50%"] == "N/A"
    aggregated = rows[-1]
    assert aggregated["Request Count"] == str(42 + 5)  # requests; count-only rows stay out
    assert aggregated["Failure Count"] == "3"


def test_failures_csv(recorded):
    rec, _ = recorded
    rows = parse(render_failures_csv(rec.window(MONO0, MONO0 + 4 * NS_PER_S)))
    assert rows[0] == FAILURES_CSV_COLUMNS
    assert rows[1:] == [
        ["http", "Step_01_read_task", "op 1 fill_ram: UNAVAILABLE", "2"],
        ["rps", "TimeToWake", 'ACTOR_NOT_FOUND "a,b"', "1"],
    ]


def test_history_renders_one_line_per_second_per_row(recorded):
    rec, now = recorded
    writer = HistoryWriter()
    text = writer.render_closed(rec, user_count=lambda second: 7)
    assert writer.render_closed(rec) == ""  # nothing new: nothing to append
    rows = list(csv.DictReader(io.StringIO(text)))
    seconds = sorted({int(r["Timestamp"]) for r in rows})
    assert seconds == [int(WALL0) + s for s in range(5)]
    first_step = next(r for r in rows if r["Name"] == "Step_01_read_task")
    assert first_step["User Count"] == "7"
    assert float(first_step["Requests/s"]) == 12.0  # 10 ok + 2 failed in the first second
    assert first_step["Total Request Count"] == "12"
    last_agg = [r for r in rows if r["Name"] == "Aggregated"][-1]
    assert last_agg["Type"] == ""
    assert last_agg["Total Request Count"] == str(42 + 5)  # requests only, no events
    # Later seconds append after the header, never a second header.
    rec.row("http", "Step_01_read_task").ok(now[0], now[0], now[0] + MS)
    now[0] += NS_PER_S
    rec.flush()
    text += writer.render_closed(rec)
    assert text.count("Timestamp") == 1
    assert f"{int(WALL0) + 5},0,http,Step_01_read_task" in text


def test_stats_jsonl_rows_and_extra_rows(recorded):
    rec, _ = recorded
    window = rec.window(MONO0, MONO0 + 4 * NS_PER_S)
    rows = stats_jsonl_rows(window, tag="nightly", test_name="coding-session")
    metrics = [r["metric"] for r in rows]
    assert "http_Step_01_read_task" in metrics and "generator_LoopLag" in metrics
    step = rows[metrics.index("http_Step_01_read_task")]
    assert set(step) == {"timestamp", "tag", "test_name", "metric", "measurements"}
    m = step["measurements"]
    for key in ("p50", "p66", "p75", "p80", "p90", "p95", "p98", "p99", "p99_9"):
        assert key in m
    assert m["request_count"] == 42 and m["failure_count"] == 2
    assert all(k == k.lower() and " " not in k for k in m)
    extra = jsonl_row(
        "turnover_window",
        {"request_count": 5, "requests_per_s": 1.25},
        tag="nightly",
        test_name="coding-session",
        timestamp=WALL0,
    )
    text = render_stats_jsonl(window, tag="nightly", test_name="coding-session", extra_rows=[extra])
    lines = [orjson.loads(line) for line in text.splitlines()]
    assert len(lines) == len(rows) + 1
    assert lines[-1] == {
        "timestamp": WALL0,
        "tag": "nightly",
        "test_name": "coding-session",
        "metric": "turnover_window",
        "measurements": {"request_count": 5, "requests_per_s": 1.25},
    }


def test_history_jsonl_holds_what_the_csv_cannot(recorded):
    rec, _ = recorded
    files = HistoryWriter().render_closed_files(rec, 7)
    assert files[HISTORY_CSV].startswith("Timestamp,")
    lines = [orjson.loads(line) for line in files[HISTORY_JSONL].splitlines()]
    first = [r for r in lines if r["t"] == int(WALL0)]
    by_row = {(r["type"], r["name"]): r for r in first}
    step = by_row[("http", "Step_01_read_task")]
    assert step["count"] == 12 and step["failures"] == 2
    assert step["errors"] == {"op 1 fill_ram: UNAVAILABLE": 2}
    assert set(step["service"]) == set(step["start_lag"]) == {"p50", "p90", "p99"}
    assert step["start_lag"]["p50"] == pytest.approx(1.0, rel=0.02)  # intended -> sent
    assert step["service"]["p99"] == pytest.approx(30.0, rel=0.02)  # sent -> done (failures)
    # the generator rows the CSV leaves out, with their own lag; the Aggregated line
    assert by_row[("generator", "LoopLag")]["response"]["p99"] == pytest.approx(1.0, rel=0.02)
    assert "service" not in by_row[("generator", "LoopLag")]
    assert by_row[("", "Aggregated")]["count"] == 12 + 2  # requests of that second
    crash = next(r for r in lines if r["name"] == "CrashCount")
    assert crash["events"] == 1 and crash["count"] == 0
