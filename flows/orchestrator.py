"""The orchestrator, Prefect's API, going away in the middle of a campaign (issue 38,
docs/SPEC.md §6.5): a nightly's server restarted, a network blip longer than the client's
retries. The load never needed it; only the bookkeeping around the load does. Before, the
hold ran about a minute past its end while each task's state proposals were retried, ten
tracebacks reached the console, the campaign failed blaming a ConnectError on the substrate
six minutes later, and printed no run directory.

- **Each step runs once** (`Steps.once`): preflight, register, fill, each hold window and
  probe, upload, gate. The task's body runs the step's work; whoever asks again (the flow,
  once the task cannot report) gets the same result, so no work is ever done twice.
- **Lost**, said in one line, when a task call fails with an error of Prefect's client (a
  connection refused or reset, a timeout, a 5xx), or when a task whose work is done has not
  come back within GRACE_S and the API's /health has not answered twice in a row. The flow
  then takes the step's result itself and goes on: every later step runs directly, not as a
  task; nothing more is sent to the API (artifacts, the verdict event, log lines), and
  Prefect's own workers' complaints about it are quieted.
- **The end** is the campaign's own: cleanup, files, the verdict from gate.json. The flow
  leaves what it ended with here (`left_behind`), so that `agentsession campaign` prints it
  and exits by it without waiting out Prefect's retries of the flow run's final state.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tasks.steps import Steps

T = TypeVar("T")
log = logging.getLogger("agentsession")

# A task whose work is done gets this long to report before the API's health is asked.
GRACE_S = 5.0
# How often the API's /health is asked while a task's work is done and the task has not come
# back, and how many unanswered in a row make the API lost.
WATCH_S = 2.0
UNANSWERED = 2
HEALTH_TIMEOUT_S = 3.0
# Prefect's loggers that complain, once per batch, about an API that is gone.
_COMPLAINERS = ("prefect._internal.concurrency", "prefect.events.clients", "prefect.client")


@dataclass
class Orchestrator:
    """Whether Prefect's API still answers this campaign (`lost` says since when, why)."""

    api_url: str | None = None
    steps: Steps = field(default_factory=Steps)
    lost: str | None = None
    lost_at: float | None = None  # unix time
    left_behind: dict[str, Any] | None = None  # what the flow ended with, once lost

    @classmethod
    def current(cls) -> Orchestrator:
        """For the flow now running: its API's URL from Prefect's settings (an ephemeral,
        in-process API has none, and nothing to lose)."""
        from prefect.settings import PREFECT_API_URL

        orchestrator = cls(api_url=PREFECT_API_URL.value() or None)
        global _CURRENT
        _CURRENT = orchestrator
        return orchestrator

    async def step(
        self,
        key: str,
        task_call: Callable[[], Awaitable[Any]],
        work: Callable[[], Awaitable[T]],
    ) -> T:
        """Step `key`: as a Prefect task (`task_call`, whose body runs `work` through
        `self.steps.once(key, …)`) while the API answers, directly once it does not."""
        if self.lost is None:
            try:
                await self._watched(key, task_call)
            except Exception as exc:
                if not orchestration_error(exc):
                    raise
                self.lose(key, exc)
        return await self.steps.once(key, work)

    async def task_or_direct(
        self, key: str, task_call: Callable[[], Awaitable[T]], direct: Callable[[], Awaitable[T]]
    ) -> T:
        """A step whose work may run again (an upload: its task retries it): the task's
        result while the API answers, `direct`'s once it does not."""
        if self.lost is None:
            try:
                return await task_call()
            except Exception as exc:
                if not orchestration_error(exc):
                    raise
                self.lose(key, exc)
        return await direct()

    async def _watched(self, key: str, task_call: Callable[[], Awaitable[Any]]) -> None:
        call = asyncio.ensure_future(task_call())
        unanswered = 0
        done_since: float | None = None
        while True:
            finished, _ = await asyncio.wait({call}, timeout=WATCH_S)
            if finished:
                call.result()  # raises what the task raised
                return
            if not self.steps.done(key) or self.api_url is None:
                continue  # the work itself runs on; a dead API changes nothing for it
            done_since = done_since if done_since is not None else time.monotonic()
            if time.monotonic() - done_since < GRACE_S:
                continue
            unanswered = 0 if await self._answers() else unanswered + 1
            if unanswered >= UNANSWERED:
                call.cancel()  # Prefect's retries of its state go on no longer
                self.lose(key, f"its /health did not answer {UNANSWERED} times in a row")
                return

    async def _answers(self) -> bool:
        import httpx

        try:
            async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S) as client:
                answer = await client.get(f"{self.api_url}/health")
            return answer.status_code < 500
        except (httpx.HTTPError, OSError):
            return False

    def lose(self, key: str, why: BaseException | str) -> None:
        """Say once that the API is gone; send nothing more to it."""
        if self.lost is not None:
            return
        what = why if isinstance(why, str) else _one_line(why)
        self.lost = f"the Prefect API{_at(self.api_url)} went away during {key} ({what})"
        self.lost_at = time.time()
        log.error(
            "%s: the campaign goes on without it, on its own clock; its later steps are not "
            "Prefect tasks, and nothing more reaches this flow run's logs or artifacts",
            self.lost,
        )
        quiet_prefect()

    async def best_effort(self, what: str, call: Callable[[], Awaitable[Any]]) -> None:
        """An API call the campaign can do without (an artifact, an event): skipped once the
        API is lost, and never allowed to hold the campaign up."""
        if self.lost is not None:
            log.info("%s: not sent (the Prefect API is gone)", what)
            return
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S * 5):
                await call()
        except Exception as exc:  # the verdict stands without it
            log.warning("%s: not sent: %s", what, _one_line(exc))


def orchestration_error(exc: BaseException) -> bool:
    """An error of Prefect's client talking to its API: a transport failure (refused, reset,
    timed out) or a 5xx. Never one of ours: the engine wraps the substrate's errors, and the
    flow's own code does not speak HTTP through httpx."""
    import httpx
    from prefect.exceptions import PrefectHTTPStatusError

    seen: BaseException | None = exc
    for _ in range(10):  # the cause chain, bounded
        if seen is None:
            return False
        if isinstance(seen, httpx.TransportError):
            return True
        if isinstance(seen, PrefectHTTPStatusError | httpx.HTTPStatusError):
            return seen.response.status_code >= 500
        seen = seen.__cause__ or seen.__context__
    return False


def quiet_prefect() -> None:
    """The API is gone and said so once: Prefect's workers (logs, events, the client's
    retries) would otherwise print a complaint and a traceback for every batch."""
    from prefect.logging.handlers import APILogHandler

    for logger in [logging.getLogger(), *_loggers()]:
        for handler in logger.handlers:
            if isinstance(handler, APILogHandler):
                handler.addFilter(lambda record: False)
    for name in _COMPLAINERS:  # disabled, not levelled: Prefect's internal loggers ignore levels
        logging.getLogger(name).disabled = True


def _loggers() -> list[logging.Logger]:
    return [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]


def left_behind() -> Orchestrator | None:
    """The flow now (or last) running's orchestrator once it lost its API, else None."""
    current = _CURRENT
    return current if current is not None and current.lost is not None else None


def _at(url: str | None) -> str:
    return f" at {url}" if url else ""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


_CURRENT: Orchestrator | None = None

__all__ = ["Orchestrator", "left_behind", "orchestration_error", "quiet_prefect"]
