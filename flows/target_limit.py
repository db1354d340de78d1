"""One Prefect global concurrency limit per target, so two campaigns never drive the same
substrate at once, whichever deployment (or `agentsession campaign`) started them.

A deployment's own `concurrency_limit` only keeps that deployment's runs apart; `nightly` and
`adhoc` (or a second box serving them) would still overlap on one substrate and measure each
other. The limit is named after the target (docs/SPEC.md §6, "One campaign per target"):

- a substrate URL (`target.substrate`: the JSON control API, or the ate wire's gRPC control
  address) gives the target id `host:port` (the URL's default port when it names none; user
  info and path ignored) and the limit `agentsession-target-<host>-<port>`;
- no URL (the embedded local substrate, started per campaign) gives `local:<hostname>`, limit
  `agentsession-target-local-<hostname>`: two embedded campaigns on one machine share its
  cores and would measure each other just the same.

The slug keeps `[a-z0-9]` and turns every other run of characters into one dash. Prefect
forbids only `/ % & > <` in a limit name, but the name travels in API paths
(`/v2/concurrency_limits/{name}`) and CLI arguments, where plain dashes need no quoting. The
rule is textual: `localhost` and `127.0.0.1` are two names, so give one substrate one spelling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from agentsession_core.engine.params import TargetParams

LIMIT_PREFIX = "agentsession-target-"
DEFAULT_PORTS = {"http": 80, "https": 443, "grpc": 80, "grpcs": 443}
# A lease longer than Prefect's default (300 s): renewals happen on the flow's event loop,
# next to the load, and one missed renewal should not free the target mid-hold.
LEASE_SECONDS = 600.0
# How long an acquisition may take before we say we are waiting (the API answers in ms).
WAIT_NOTICE_S = 1.0


def target_id(target: TargetParams, hostname: str | None = None) -> str:
    """`host:port` of the substrate's control address, or `local:<hostname>`."""
    if not target.substrate:
        return f"local:{hostname or socket.gethostname()}"
    parts = urlsplit(target.substrate)
    host = (parts.hostname or "").lower()
    port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower(), 0)
    return f"{host}:{port}"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def limit_name(target: str) -> str:
    """The global concurrency limit of a target id (`target_id`)."""
    return LIMIT_PREFIX + slug(target)


async def ensure_limit(name: str) -> bool:
    """Create the limit with one slot unless it exists; True when created here.

    Prefect 3.9's `concurrency()` skips a missing limit with a warning (and `strict=True`
    raises): the server no longer creates limits on demand (`create_if_missing` is deprecated
    and ignored). An existing limit is the operator's and is never changed: they may have
    raised it on purpose, or deactivated it to let campaigns overlap."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    async with get_client() as client:
        try:
            await client.read_global_concurrency_limit_by_name(name)
            return False
        except ObjectNotFound:
            pass
        try:
            await client.create_global_concurrency_limit(
                GlobalConcurrencyLimitCreate(name=name, limit=1)
            )
        except ObjectAlreadyExists:  # another campaign created it a moment ago
            return False
    _logger().info("created the global concurrency limit %s (1 slot)", name)
    return True


@contextlib.asynccontextmanager
async def hold_target(target: TargetParams, flow_run_id: UUID | None) -> AsyncIterator[str]:
    """Hold the target's limit (one slot) for the body; yields the target id.

    The flow enters this before the Run exists and leaves it after cleanup, so the wait
    falls before every phase (no task timeout runs yet) and before the run's clock starts.
    """
    from prefect.client.schemas.objects import ConcurrencyLeaseHolder
    from prefect.concurrency.asyncio import concurrency

    ident = target_id(target)
    name = limit_name(ident)
    await ensure_limit(name)
    acquired = asyncio.Event()
    notice = asyncio.create_task(_say_waiting(acquired, name, ident))
    holder = ConcurrencyLeaseHolder(type="flow_run", id=flow_run_id) if flow_run_id else None
    try:
        async with concurrency(
            name,
            occupy=1,
            lease_duration=LEASE_SECONDS,
            # The limit was just made sure of: if it vanished since, say so rather than
            # run unguarded.
            strict=True,
            holder=holder,
            # A renewal that fails once (a busy API) must not kill a nightly hold; Prefect
            # logs it, and the next renewal usually succeeds.
            raise_on_lease_renewal_failure=False,
        ):
            acquired.set()
            _logger().info("holding %s for target %s", name, ident)
            yield ident
    finally:
        notice.cancel()
        await asyncio.gather(notice, return_exceptions=True)


async def _say_waiting(acquired: asyncio.Event, name: str, ident: str) -> None:
    """One line, only when the slot is not ours within WAIT_NOTICE_S *and* the limit's slots
    are taken, twice a notice apart: a slow API (a busy machine) delays an acquisition
    nobody contends, and the slot it took may show as taken before its answer arrives; neither
    is another campaign's."""
    taken = 0
    while not acquired.is_set():
        try:
            async with asyncio.timeout(WAIT_NOTICE_S):
                await acquired.wait()
            return
        except TimeoutError:
            pass
        taken = taken + 1 if await _slots_taken(name) else 0
        if taken >= 2 and not acquired.is_set():
            _logger().info(
                "waiting for the global concurrency limit %s: another campaign drives target %s",
                name,
                ident,
            )
            return


async def _slots_taken(name: str) -> bool:
    """Whether every slot of the limit is held now (an unreadable limit: said as taken)."""
    from prefect.client.orchestration import get_client

    try:
        async with get_client() as client:
            limit = await client.read_global_concurrency_limit_by_name(name)
    except Exception:
        return True
    return limit.active_slots >= limit.limit


def _logger() -> Any:
    """The flow run's logger (its lines reach the run's logs and the console); the
    `agentsession` logger when called outside a run (a library user, a unit test)."""
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("agentsession")
