"""Where server-side figures come from (docs/SPEC.md §5.9), on the engine's event loop:

- `Scraper`: GET a Prometheus text endpoint (the local substrate's `/metrics`, or any
  substrate's `target.metrics_url`) every `interval` seconds, parse it with
  prometheus_client's parser in a worker thread (a big remote exposition must not stall the
  loop that times the load) and book it into the store;
- `PrometheusRange`: ask a Prometheus server (`target.prometheus_url`) for each PromQL query
  of `server.queries` over a window (`/api/v1/query_range`), after the window ends;
- `ServerMetrics`: both behind one object the Run opens and the campaign cuts windows from.

Nothing here may disturb the run: a failed scrape or query is counted, logged once in a
while and otherwise ignored; the figures of a window with no samples are simply absent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from agentsession_core.measure.server_metrics import (
    WINDOW,
    ServerMetricsStore,
    ServerWindow,
    summary_document,
)
from agentsession_core.measure.wake_split import (
    Asked,
    merged_split,
    phase_rows_figures,
    window_split,
)

log = logging.getLogger("agentsession")

QUERY_RANGE_PATH = "/api/v1/query_range"
MAX_POINTS = 10_000  # Prometheus refuses a range of more than 11,000 points per series
_LOG_EVERY = 30  # failures between two log lines after the first


class ServerMetricsError(Exception):
    """A scrape or a query that gave no usable answer."""


def _parse(text: str) -> list[Any]:
    return list(text_string_to_metric_families(text))


class Scraper:
    """One Prometheus text endpoint, sampled into `store`."""

    def __init__(
        self,
        url: str,
        store: ServerMetricsStore,
        clock: Callable[[], float],
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
        shown: str | None = None,
    ) -> None:
        self.url = url
        self.shown = shown or url  # for logs: the URL with its credentials redacted
        self.store = store
        self.clock = clock
        self._client = httpx.AsyncClient(headers=headers or {}, timeout=timeout)
        self._lock = asyncio.Lock()  # one scrape at a time: samples stay in time order

    async def scrape(self) -> float | None:
        """One sample; its time (unix seconds, the middle of the request), None on failure."""
        async with self._lock:
            sent = self.clock()
            try:
                answer = await self._client.get(self.url)
                if answer.status_code != 200:  # not raise_for_status: its text names the URL
                    raise ServerMetricsError(f"HTTP {answer.status_code}")
                families = await asyncio.to_thread(_parse, answer.text)
            except Exception as exc:  # whatever it is, the run goes on without this sample
                _failed(self.store, f"scrape {self.shown}: {type(exc).__name__}: {exc}")
                return None
            t = (sent + self.clock()) / 2
            self.store.book_scrape(t, families)
            if self.store.ok == 1 and not self.store.series:
                log.warning(
                    "server metrics: %s offers no family matching server.series %s",
                    self.shown,
                    list(self.store.patterns),
                )
            return t

    async def aclose(self) -> None:
        await self._client.aclose()


class PrometheusRange:
    """PromQL range queries against a Prometheus server's HTTP API."""

    def __init__(self, base_url: str, queries: dict[str, str], *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.queries = dict(queries)
        self._client = httpx.AsyncClient(timeout=timeout)

    async def query_range(
        self, query: str, start: float, end: float, step: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        """Every series of `query` over [start, end]: (labels, [(unix, value)])."""
        answer = await self._client.get(
            self.base_url + QUERY_RANGE_PATH,
            params={
                "query": query,
                "start": f"{start:.3f}",
                "end": f"{end:.3f}",
                "step": f"{step:g}",
            },
        )
        try:
            body = answer.json()
        except ValueError:
            raise ServerMetricsError(f"HTTP {answer.status_code}, not JSON") from None
        if answer.status_code != 200 or body.get("status") != "success":
            why = body.get("error") or f"HTTP {answer.status_code}"
            raise ServerMetricsError(f"{body.get('errorType', 'error')}: {why}")
        data = body.get("data") or {}
        if data.get("resultType") != "matrix":
            raise ServerMetricsError(f"resultType {data.get('resultType')!r}, not matrix")
        out = []
        for series in data.get("result") or []:
            labels = {k: str(v) for k, v in (series.get("metric") or {}).items()}
            points = [(float(t), float(v)) for t, v in series.get("values") or []]
            out.append((labels, [(t, v) for t, v in points if math.isfinite(v)]))
        return out

    async def fetch(self, store: ServerMetricsStore, start: float, end: float, step: float) -> None:
        """Every query over the span into `store`; a failing query is counted and skipped. A
        query that names `$window` is asked once, at the span's end, with the span's length
        in its place (`increase(x[$window])` is then the window's increase)."""
        step = max(step, (end - start) / MAX_POINTS, 0.001)
        span = f"{max(1, round((end - start) * 1000))}ms"
        for name, query in self.queries.items():
            try:
                if WINDOW in query:
                    asked = query.replace(WINDOW, span)
                    found = await self.query_range(asked, end, end, step)
                else:
                    found = await self.query_range(query, start, end, step)
                store.book_query(name, query, found)
            except Exception as exc:  # a bad query or answer costs its figures, not the run
                _failed(store, f"query {name} ({query}): {exc!r}")

    async def aclose(self) -> None:
        await self._client.aclose()


def _failed(store: ServerMetricsStore, error: str) -> None:
    store.failure(error)
    if store.failed == 1 or store.failed % _LOG_EVERY == 0:
        log.warning("server metrics: %s (%d failures so far)", error, store.failed)


class ServerMetrics:
    """The run's server-side figures: a sampler task on the loop (scrape) and/or range queries
    at each window's end (Prometheus), one store, the windows cut so far."""

    def __init__(
        self,
        store: ServerMetricsStore,
        *,
        to_unix: Callable[[int], float],
        interval: float,
        scraper: Scraper | None = None,
        prometheus: PrometheusRange | None = None,
        source: dict[str, Any] | None = None,
        client: Callable[[int, int], dict[str, float] | None] | None = None,
    ) -> None:
        self.store = store
        self.to_unix = to_unix
        self.interval = interval
        self.scraper = scraper
        self.prometheus = prometheus
        self.source = source or {}
        self.client = client  # the client's TimeToWake over a span, for the wake split
        self.windows: list[ServerWindow] = []
        self._spans: list[tuple[int, int]] = []  # each window's [start_ns, end_ns]
        self._last_sample: float | None = None  # the sample that closed the last window
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.scraper is not None:
            await self.scraper.scrape()  # the first sample before any load
            self._task = asyncio.create_task(self._sample_forever(), name="server-metrics")

    async def _sample_forever(self) -> None:
        assert self.scraper is not None
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            next_at += self.interval
            delay = next_at - loop.time()
            if delay < 0:  # a slow scrape: skip the ticks it missed rather than burst
                next_at, delay = loop.time(), 0.0
            await asyncio.sleep(delay)
            await self.scraper.scrape()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for client in (self.scraper, self.prometheus):
            if client is not None:
                await client.aclose()

    async def cut(
        self, start_ns: int, end_ns: int, *, index: int | None = None, level: float | None = None
    ) -> ServerWindow:
        """The figures of [start_ns, end_ns] (the recorder's monotonic clock): one more sample
        right now so the window's end is measured, not guessed; with a Prometheus server, the
        queries over the window."""
        start, end = self.to_unix(start_ns), self.to_unix(end_ns)
        gauge_end = None
        if self.scraper is not None:
            gauge_end = self._last_sample = await self.scraper.scrape()
        if self.prometheus is not None and end > start:
            await self.prometheus.fetch(self.store, start, end, self.interval)
        window = self.store.cut(start, end, gauge_end=gauge_end, index=index, level=level)
        if self.prometheus is not None:
            client = self.client(start_ns, end_ns) if self.client is not None else None
            asked = Asked(self.store.series, self.prometheus.queries)
            self._split(window, window_split(asked, start, end, client))
        self._spans.append((start_ns, end_ns))
        self.windows.append(window)
        return window

    @staticmethod
    def _split(window: ServerWindow, split: dict[str, Any] | None) -> None:
        window.split = split
        window.figures.update(phase_rows_figures(split))

    def steady(self) -> ServerWindow | None:
        """The steady window: from the first window's start to the last one's end."""
        if not self.windows:
            return None
        first, last = self.windows[0], self.windows[-1]
        steady = self.store.cut(first.start_unix, last.end_unix, gauge_end=self._last_sample)
        splits = [w.split for w in self.windows]
        if any(splits):
            (start_ns, _), (_, end_ns) = self._spans[0], self._spans[-1]
            client = self.client(start_ns, end_ns) if self.client is not None else None
            self._split(steady, merged_split(splits, client))
        return steady

    def document(self) -> dict[str, Any]:
        """server_summary.json (docs/SPEC.md §7); call once sampling has stopped."""
        return summary_document(self.store, self.source, self.windows, self.steady())


__all__ = ["PrometheusRange", "Scraper", "ServerMetrics", "ServerMetricsError"]
