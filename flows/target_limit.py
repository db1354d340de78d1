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
import os
import re
import socket
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from pydantic import BaseModel

from agentsession_core.engine.params import TargetParams
from flows.orchestrator import Orchestrator

LIMIT_PREFIX = "agentsession-target-"
DEFAULT_PORTS = {"http": 80, "https": 443, "grpc": 80, "grpcs": 443}
# A lease longer than Prefect's default (300 s): renewals happen on the flow's event loop,
# next to the load, and one missed renewal should not free the target mid-hold.
LEASE_SECONDS = 600.0
# How long an acquisition may take before we say we are waiting (the API answers in ms).
WAIT_NOTICE_S = 1.0
RELEASE_TIMEOUT_S = 30.0


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
async def hold_target(
    target: TargetParams, flow_run_id: UUID | None, api: Orchestrator | None = None
) -> AsyncIterator[str]:
    """Hold the target's limit (one slot) for the body; yields the target id.

    The flow enters this before the Run exists and leaves it after cleanup, so the wait
    falls before every phase (no task timeout runs yet) and before the run's clock starts.
    While it holds the slot it renews the slot's lease and beats the holder record (below);
    it releases both at the end, unless the API went away (`api.lost`): the slot is then
    left to its lease's expiry, or to the next campaign, which takes it over once the
    record has been silent STALE_S."""
    ident = target_id(target)
    name = limit_name(ident)
    await ensure_limit(name)
    holder = Holder.ours(flow_run_id)
    lease = await _acquire(name, ident, holder)
    _logger().info("holding %s for target %s", name, ident)
    keeper = asyncio.create_task(_keep(name, lease, holder), name="target-slot-keeper")
    try:
        yield ident
    finally:
        keeper.cancel()
        await asyncio.gather(keeper, return_exceptions=True)
        await _release(name, lease, api)


# The holder record: a Prefect Variable beside the limit, beaten every HEARTBEAT_S by the
# campaign holding the slot. Prefect's own record of a slot (its lease) can be lost with the
# server's memory when the API restarts, while the slot's count stays in its database: a
# campaign that died with the API left the target taken for good (issue 38). A record silent
# for STALE_S, and still the same HEARTBEAT_S later, is a dead holder's: a waiting campaign
# takes its slot over and says whose it was, at once when the record names a process of this
# machine that is gone. A slot taken by anything else (a campaign of an older version, an
# operator's own `concurrency()`) has no record and is waited for.
HEARTBEAT_S = 10.0
STALE_S = 60.0


class Holder(BaseModel):
    flow_run: str | None
    flow_run_name: str | None
    host: str
    pid: int
    since: float
    alive: float
    lease: str | None = None
    taken_over: bool = False  # its slot was freed by a waiting campaign: never again

    @classmethod
    def ours(cls, flow_run_id: UUID | None) -> Holder:
        now = time.time()
        return cls(
            flow_run=str(flow_run_id) if flow_run_id else None,
            flow_run_name=_flow_run_name(),
            host=socket.gethostname(),
            pid=os.getpid(),
            since=now,
            alive=now,
        )

    def gone_from_here(self) -> bool:
        """Its campaign ran on this machine and its process is gone: dead for certain, no
        need to wait out its silence (a restarted API, the next night on the same box)."""
        import psutil

        return (
            self.host == socket.gethostname()
            and self.pid != os.getpid()
            and not psutil.pid_exists(self.pid)
        )

    def describe(self) -> str:
        run = f"flow run {self.flow_run_name or self.flow_run or '?'}"
        return f"{run} (pid {self.pid} on {self.host})"


def record_name(limit: str) -> str:
    return f"{limit}-holder"


async def read_holder(client: Any, limit: str) -> Holder | None:
    variable = await client.read_variable_by_name(record_name(limit))
    if variable is None or not isinstance(variable.value, dict):
        return None
    try:
        return Holder.model_validate(variable.value)
    except ValueError:
        return None


async def write_holder(client: Any, limit: str, holder: Holder) -> None:
    from prefect.client.schemas.actions import VariableCreate, VariableUpdate

    value = holder.model_dump(mode="json")
    name = record_name(limit)
    if await client.read_variable_by_name(name) is None:
        with contextlib.suppress(Exception):  # made by another a moment ago: update it
            await client.create_variable(VariableCreate(name=name, value=value))
            return
    await client.update_variable(VariableUpdate(name=name, value=value))


async def _acquire(name: str, ident: str, holder: Holder) -> UUID:
    """The slot with a lease (waiting while another campaign holds it), our record written."""
    import httpx
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import ConcurrencyLeaseHolder

    lease_holder = (
        ConcurrencyLeaseHolder(type="flow_run", id=UUID(holder.flow_run))
        if holder.flow_run
        else None
    )
    started = time.monotonic()
    said = False
    stale: tuple[Holder, float] | None = None  # a silent record, and since when we see it
    async with get_client() as client:
        while True:
            try:
                answer = await client.increment_concurrency_slots_with_lease(
                    names=[name],
                    slots=1,
                    mode="concurrency",
                    lease_duration=LEASE_SECONDS,
                    holder=lease_holder,
                )
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code != 423:  # 423 Locked: every slot is taken
                    raise
                wait = _retry_after(exc.response)
            else:
                body = answer.json()
                if not body.get("limits"):  # made sure of just now: gone since?
                    raise RuntimeError(f"the global concurrency limit {name} vanished")
                lease = UUID(body["lease_id"])
                holder.lease = str(lease)
                with contextlib.suppress(Exception):  # the record is for others; the slot is ours
                    await write_holder(client, name, holder)
                return lease
            theirs = await read_holder(client, name)
            if theirs is not None and theirs.taken_over:
                theirs = None  # freed once already: what holds the slot now is not it
            if not said and time.monotonic() - started >= WAIT_NOTICE_S:
                whose = f" ({theirs.describe()})" if theirs is not None else ""
                _logger().info(
                    "waiting for the global concurrency limit %s: another campaign drives "
                    "target %s%s",
                    name,
                    ident,
                    whose,
                )
                said = True
            if theirs is not None and theirs.gone_from_here():
                await _take_over(client, name, ident, theirs)
                continue
            if theirs is not None and time.time() - theirs.alive > STALE_S:
                if stale is None or stale[0] != theirs:
                    stale = (theirs, time.monotonic())
                elif time.monotonic() - stale[1] >= HEARTBEAT_S * 1.5:
                    await _take_over(client, name, ident, theirs)
                    stale = None
                    continue
            else:
                stale = None
            await asyncio.sleep(wait)


async def _take_over(client: Any, name: str, ident: str, dead: Holder) -> None:
    """Free a dead holder's slot: its lease released (revoked with it, when the server still
    has it), else the slot's count taken down by one; said in one line."""
    from prefect.client.schemas.actions import VariableUpdate

    silent = time.time() - dead.alive
    if dead.lease:
        with contextlib.suppress(Exception):
            await client.release_concurrency_slots_with_lease(UUID(dead.lease))
    limit = await client.read_global_concurrency_limit_by_name(name)
    if await read_holder(client, name) == dead and limit.active_slots >= limit.limit:
        await client.release_concurrency_slots(names=[name], slots=1, occupancy_seconds=silent)
    # Marked, so that neither we nor a second waiter frees a slot for it again.
    gone = dead.model_copy(update={"taken_over": True, "lease": None})
    with contextlib.suppress(Exception):
        await client.update_variable(
            VariableUpdate(name=record_name(name), value=gone.model_dump(mode="json"))
        )
    _logger().warning(
        "took over target %s's slot in %s from %s: its campaign stopped renewing it %.0f s "
        "ago and never released it (it died, or lost its Prefect API)",
        ident,
        name,
        dead.describe(),
        silent,
    )


async def _keep(name: str, lease: UUID, holder: Holder) -> None:
    """Beat the holder record every HEARTBEAT_S and renew the lease well before it ends;
    a beat or a renewal that fails (a busy API, or one gone) is tried again next time."""
    from prefect.client.orchestration import get_client

    renewed = time.monotonic()
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        try:
            async with asyncio.timeout(HEARTBEAT_S), get_client() as client:
                holder.alive = time.time()
                await write_holder(client, name, holder)
                if time.monotonic() - renewed >= LEASE_SECONDS / 4:
                    await client.renew_concurrency_lease(lease, LEASE_SECONDS)
                    renewed = time.monotonic()
        except Exception as exc:
            logging.getLogger("agentsession").debug("target slot not kept alive: %s", exc)


async def _release(name: str, lease: UUID, api: Orchestrator | None) -> None:
    from prefect.client.orchestration import get_client

    if api is not None and api.lost is not None:
        _logger().warning(
            "the target's slot in %s could not be released (%s): the next campaign takes it "
            "over once this one's record has been silent %g s",
            name,
            api.lost,
            STALE_S,
        )
        return
    try:
        async with asyncio.timeout(RELEASE_TIMEOUT_S), get_client() as client:
            await client.release_concurrency_slots_with_lease(lease)
            with contextlib.suppress(Exception):
                await client.delete_variable_by_name(record_name(name))
    except Exception as exc:
        _logger().warning(
            "the target's slot in %s was not released (%s): the next campaign takes it over "
            "once this one's record has been silent %g s",
            name,
            " ".join(str(exc).split())[:200] or type(exc).__name__,
            STALE_S,
        )


def _retry_after(answer: Any) -> float:
    try:
        wait = float(answer.headers.get("Retry-After", ""))
    except ValueError:
        wait = 1.0
    return min(max(wait, 0.5), 5.0)


def _flow_run_name() -> str | None:
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    return context.flow_run.name if context and context.flow_run else None


def _logger() -> Any:
    """The flow run's logger (its lines reach the run's logs and the console); the
    `agentsession` logger when called outside a run (a library user, a unit test)."""
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("agentsession")
