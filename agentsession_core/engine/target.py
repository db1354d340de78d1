"""The run's substrate: an HttpSubstrate for `params.target`, and the embedded local substrate
it talks to when no URL is given (started with the run, stopped after its cleanup)."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from agentsession_core.engine.params import TargetParams
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.interface import Substrate
from agentsession_core.substrate.local.launcher import LocalSubstrate

log = logging.getLogger("agentsession")


@contextlib.asynccontextmanager
async def local_substrate(target: TargetParams, log_path: Path) -> AsyncIterator[str]:
    """An embedded local substrate for the run; yields its URL."""
    with tempfile.TemporaryDirectory(prefix="agentsession-store-") as store:
        local = LocalSubstrate(
            workers=target.local_workers, store=store, token=target.token, log_path=log_path
        )
        async with local:
            log.info("local substrate on %s (%d workers)", local.url, target.local_workers)
            yield local.url


@contextlib.asynccontextmanager
async def open_substrate(target: TargetParams, log_path: Path) -> AsyncIterator[Substrate]:
    """The client for `target`: its URLs, or a local substrate started here (its log goes to
    `log_path`). Closed, and the local substrate stopped, on the way out."""
    async with contextlib.AsyncExitStack() as stack:
        if target.substrate:
            control, router = target.substrate, target.router
        else:
            control, router = (
                await stack.enter_async_context(local_substrate(target, log_path)),
                None,
            )
        substrate = HttpSubstrate(
            control,
            router,
            token=target.token,
            control_timeout=target.request_timeout_seconds,
            router_timeout=target.request_timeout_seconds,
        )
        stack.push_async_callback(substrate.aclose)
        yield substrate
