"""The Locust exporter's names on the run's /metrics (docs/SPEC.md §5.7), beside the
`agentsession_*` ones, so the upstream runner's live dashboards read a running agentsession
(docs/guide/server-metrics.md has the queries they run):

- `locust_requests_total{method, name, status, user_class}`: booked requests; `method` is the
  row's type (grpc, http, rps), `name` its name (ResumeActor, Step_<name>, TimeToWake),
  `status` success or failure, `user_class` the session type (the run's script);
- `locust_request_duration_milliseconds{method, name, status, user_class}`: their latency, a
  histogram in **milliseconds**, from the intended time as every figure here;
- `locust_users{user_class}`: the sessions the run drives;
- `locust_actors{user_class, state}`: the run's actors by the state the substrate's own
  listing gives them, in upstream's four states (hibernated, running, hibernate_pending,
  crashed; measure/actor_census.py), each shown, 0 included, once the first census is taken;
  absent before it and in a view with no census. (The sessions' own view of their states is
  `agentsession_sessions{state}`.)

Like the agentsession_* view it is read from the recorder at scrape time; only request rows
are requests (the load's own rows and the generator's health are left out, as in the Locust
CSVs). Cancelled operations are neither success nor failure and are not counted.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from agentsession_core.measure.actor_census import STATES, ActorCensus
from agentsession_core.measure.health import is_request_row
from agentsession_core.measure.histogram import LogHistogram
from agentsession_core.measure.recorder import Recorder

# Bucket bounds in milliseconds: 1 ms doubling to ~65 s, then two minutes.
LATENCY_BUCKETS_MS = (*(float(2**k) for k in range(17)), 120_000.0)
SUCCESS, FAILURE = "success", "failure"
SESSIONS_GAUGE = "sessions"


def _buckets(hist: LogHistogram) -> list[tuple[str, float]]:
    out = [(repr(b), float(hist.count_at_or_below(b))) for b in LATENCY_BUCKETS_MS]
    return [*out, ("+Inf", float(hist.count))]


class LocustCollector(Collector):
    """The Locust exporter's families, built from the recorder (and the last actor census)
    when scraped."""

    def __init__(
        self, recorder: Recorder, user_class: str, census: ActorCensus | None = None
    ) -> None:
        self.recorder = recorder
        self.user_class = user_class
        self.census = census

    def collect(self) -> Iterator:
        labels = ["method", "name", "status", "user_class"]
        requests = CounterMetricFamily(
            "locust_requests_total",
            "Requests by method, name, status and user class",
            labels=labels,
        )
        latency = HistogramMetricFamily(
            "locust_request_duration_milliseconds",
            "Request latency in milliseconds from the intended time",
            labels=labels,
        )
        for key, stats in sorted(self.recorder.totals().rows.items()):
            if not is_request_row(key) or not stats.count:
                continue
            method, name = key
            ok = stats.response.subtract(stats.failed_response)
            for status, hist, n in (
                (SUCCESS, ok, stats.count - stats.failures),
                (FAILURE, stats.failed_response, stats.failures),
            ):
                if n or status == SUCCESS:
                    series = [method, name, status, self.user_class]
                    requests.add_metric(series, n)
                    latency.add_metric(series, _buckets(hist), hist.total)
        yield requests
        yield latency
        yield self._users()
        if (census := self.census.last if self.census is not None else None) is not None:
            actors = GaugeMetricFamily(
                "locust_actors",
                "The run's actors by state, from the substrate's listing",
                labels=["user_class", "state"],
            )
            for state in STATES:
                actors.add_metric([self.user_class, state], census.counts[state])
            yield actors

    def _users(self) -> GaugeMetricFamily:
        sessions = sum(
            value
            for (name, _), value in self.recorder.current_gauges().items()
            if name == SESSIONS_GAUGE
        )
        users = GaugeMetricFamily("locust_users", "Sessions driven", labels=["user_class"])
        users.add_metric([self.user_class], sessions)
        return users


__all__ = ["LATENCY_BUCKETS_MS", "LocustCollector"]
