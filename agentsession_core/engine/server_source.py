"""The run's server-side figures (docs/SPEC.md §5.9): which source the parameters name, opened
with the run and closed before its substrate stops.

- `target.metrics_url`, or, for the embedded local substrate, its own `/metrics`: scraped
  every `server.interval_seconds` on the run's loop;
- `target.prometheus_url` with `server.queries`: each query over each window, when it ends.

The run's bearer token goes with a scrape only to the substrate it was given for (the same
scheme, host and port as `target.substrate` or `target.router`, or the embedded substrate): a
metrics URL elsewhere gets no secret it was not meant to see. A Prometheus URL carries its own
credentials, if any, as `https://user:password@host` (redacted in campaign.json).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from agentsession_core.engine.params import RunParams
from agentsession_core.measure.agent_substrate import preset_queries
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.server_metrics import ServerMetricsStore
from agentsession_core.measure.server_sources import PrometheusRange, Scraper, ServerMetrics
from agentsession_core.measure.wake_split import time_to_wake
from agentsession_core.redaction import redact
from agentsession_core.substrate.protocol import METRICS_PATH

log = logging.getLogger("agentsession")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port


def embedded_url(substrate: Any) -> str | None:
    """The embedded local substrate's HTTP URL, from the client the run made for it: its
    router speaks to that port on either wire (docs/SPEC.md §2.4; engine/target.py)."""
    return getattr(getattr(substrate, "router", None), "base_url", None)


def metrics_url(params: RunParams, embedded: str | None) -> str | None:
    """The endpoint to scrape: the one given, or the embedded substrate's own /metrics."""
    if params.target.metrics_url:
        return params.target.metrics_url
    if params.target.substrate is None and embedded:
        return embedded.rstrip("/") + METRICS_PATH
    return None


def _headers(params: RunParams, url: str, embedded: str | None) -> dict[str, str]:
    target = params.target
    own = [u for u in (embedded, target.substrate, target.router) if u]
    if not target.token or _origin(url) not in {_origin(u) for u in own}:
        return {}
    return {"Authorization": f"Bearer {target.token}"}


def _preset(name: str, overridden: list[str]) -> dict[str, Any]:
    """What server_summary.json says of the preset; a user's query that replaced one of the
    preset's is said once in the log too (docs/SPEC.md §5.9)."""
    if overridden:
        log.warning(
            "server.queries %s replace server.preset %s's queries of the same name",
            ", ".join(overridden),
            name,
        )
    own = [q for q in preset_queries(name) if q not in overridden]
    return {"name": name, "queries": own, "overridden": overridden}


@contextlib.asynccontextmanager
async def open_server_metrics(
    params: RunParams, recorder: Recorder, embedded: str | None
) -> AsyncIterator[ServerMetrics | None]:
    """The sampler for `params` (None when there is no source or it is off); `embedded` is the
    HTTP URL of the local substrate the run started itself (None otherwise)."""
    server, target = params.server, params.target
    scrape = metrics_url(params, embedded) if server.enabled else None
    query = target.prometheus_url if server.enabled else None
    if scrape is None and query is None:
        yield None
        return
    store = ServerMetricsStore(server.series)
    source: dict[str, Any] = {"interval_seconds": server.interval_seconds}
    scraper = prometheus = None
    if scrape is not None:
        scraper = Scraper(
            scrape,
            store,
            lambda: recorder.unix_s(recorder.now_ns()),
            headers=_headers(params, scrape, embedded),
            timeout=max(5.0, 2 * server.interval_seconds),
            shown=redact(scrape),
        )
        source.update(kind="scrape", url=redact(scrape), series=list(server.series))
    if query is not None:
        queries = server.all_queries
        prometheus = PrometheusRange(query, queries)
        source.update(prometheus_url=redact(query), queries=queries)
        source["kind"] = "scrape+prometheus" if scraper is not None else "prometheus"
        if server.preset:
            source["preset"] = _preset(server.preset, server.overridden)
    sampler = ServerMetrics(
        store,
        to_unix=recorder.unix_s,
        interval=server.interval_seconds,
        scraper=scraper,
        prometheus=prometheus,
        source=source,
        client=lambda start, end: time_to_wake(recorder.window(start, end)),
    )
    try:
        await sampler.start()
        log.info("server metrics: %s", ", ".join(redact(v) for v in (scrape, query) if v))
        yield sampler
    finally:
        await sampler.stop()
