"""Each step of a campaign runs its work once (issue 38): the task's body runs it, and the
flow, when the task cannot report to an API that went away (flows/orchestrator.py), asks for
the same step's result and gets it, never a second window, registration or probe. A key
names the step as its task run is named (`hold-2`, `probe-0`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Steps:
    """Each step's work, run at most once, its result (or error) kept for whoever asks."""

    def __init__(self) -> None:
        self._work: dict[str, asyncio.Future[Any]] = {}

    async def once(self, key: str, work: Callable[[], Awaitable[T]]) -> T:
        future = self._work.get(key)
        if future is None:
            future = self._work[key] = asyncio.ensure_future(work())
        result: T = await future
        return result

    def done(self, key: str) -> bool:
        """The step's work has ended (its result or error is kept)."""
        future = self._work.get(key)
        return future is not None and future.done()


__all__ = ["Steps"]
