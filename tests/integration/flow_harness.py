"""What the campaign-flow modules (test_flow_*.py) share: a Prefect API of their own, a small
campaign, and readers of what Prefect recorded.

Each module imports the `prefect_api` fixture (module scope: Prefect's test harness, a server
process with its own SQLite database) and makes one API for its tests; the modules are split
by concept so that xdist's `--dist loadfile` spreads them over workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.engine.params import parse
from tests.integration.prefect_home import seed

# Each module's API is a server process of its own: about 4 s of CPU on its migrated copy of
# the database, minutes of waiting on a crowded box. A cap that only catches a server that
# never comes up.
SERVER_STARTUP_TIMEOUT_S = 300
# Every test of these modules, its module's API start included (the first test pays for it).
TEST_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prefect API of the module's own: the server `agentsession campaign` starts
    (flows/api_server.py, Prefect's API app as its test harness runs it) on a home of its own
    whose database is migrated ahead (prefect_home.py), this process's settings pointed at it
    as Prefect's test harness points them."""
    from prefect.context import _temporary_global_settings_context, get_settings_context
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.api_server import temporary_api

    home = seed(tmp_path_factory.mktemp("prefect-api"))
    with (
        temporary_api(
            home / "api.log", timeout=SERVER_STARTUP_TIMEOUT_S, env={"PREFECT_HOME": str(home)}
        ) as url,
        temporary_settings(updates={PREFECT_API_URL: url}),
        # Also the process-wide settings, for contexts copied before this one was entered.
        _temporary_global_settings_context(get_settings_context()),
    ):
        yield url
        # What this process still queues for the API goes before the API does (or the next
        # module's API would get this one's stale events and logs).
        with contextlib.suppress(RuntimeError):
            _drain(APILogWorker.instance().drain())
        _drain(EventsWorker.drain_all())


def _drain(result: object) -> None:
    if inspect.isawaitable(result):  # a drain called from a running loop hands back its wait
        asyncio.run(_awaited(result))


async def _awaited(result: Any) -> None:
    await result


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def small_campaign(tmp_path: Path, **overrides: object) -> dict:
    """Two 3 s windows of a six-session turnover on an embedded local substrate; a dict
    override merges into its section, anything else replaces the value."""
    values: dict = {
        "name": "ci",
        "tag": "flow",
        "out": str(tmp_path / "art"),
        "seed": 3,
        "script": "smoke",
        "think_scale": 0.05,
        "hold_minutes": 0.1,
        "window_seconds": 3,
        "thresholds": ["Step_*: failure_ratio < 0.5", "TimeToWake: p99 < 30s"],
        "abort": {"rules": [], "delay_seconds": 1, "sliding_seconds": 2},
        "population": {
            "kind": "turnover",
            "sessions": 6,
            "awake": 2,
            "target_rps": 2,
            "registration_quiet_seconds": 0.5,
        },
        "target": {"local_workers": 4, "request_timeout_seconds": 20},
        "upload": {"attempts": 2, "retry_delay_seconds": 0.2},
    }
    for key, value in overrides.items():
        values[key] = {**values.get(key, {}), **value} if isinstance(value, dict) else value
    return values


def on_substrate(values: dict, proc: Any) -> dict:
    """The campaign against a standalone substrate (the session's, its token from
    AGENTSESSION_TOKEN) instead of an embedded one of its own, on the ate wire."""
    target = {k: v for k, v in values["target"].items() if k != "local_workers"}
    return {**values, "target": {**target, "substrate": proc.grpc_url, "router": proc.url}}


async def run_flow(values: dict):  # type: ignore[no-untyped-def]
    from flows.campaign import campaign

    return await campaign(params=parse(CampaignParams, values), return_state=True)


@contextlib.contextmanager
def prefect_console() -> Iterator[io.StringIO]:
    """What Prefect's console handler (on the root logger) would print of the flow and task
    runs, formatted the same way: a record's exc_info becomes its traceback. Prefect's
    logging set up first, or setting it up would drop the handler."""
    from prefect.logging.configuration import ensure_logging_setup

    ensure_logging_setup()
    console = io.StringIO()
    handler = logging.StreamHandler(console)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    logging.getLogger("prefect").addHandler(handler)
    try:
        yield console
    finally:
        logging.getLogger("prefect").removeHandler(handler)


async def task_runs(state) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Task run name -> run_count, for one flow run."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async with get_client() as client:
        runs = await client.read_task_runs(
            flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[state.state_details.flow_run_id])
            )
        )
    return {run.name: run.run_count for run in runs}


async def verdict_events(name: str, run_dir: Path | str, timeout: float = 120.0) -> list:
    """The `agentsession.campaign.verdict` events of campaign `name` about one run
    directory, once the server has stored one (it persists events in batches; other runs of
    the same campaign name emit theirs too). `timeout` only catches an event never sent."""
    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
    from prefect.events.worker import EventsWorker

    from flows.verdict_event import VERDICT_EVENT, campaign_resource_id

    drained = EventsWorker.drain_all(timeout=10)  # this process's own events, if queued
    if inspect.isawaitable(drained):  # it is, called from a running loop
        await drained
    wanted = EventFilter(
        event=EventNameFilter(name=[VERDICT_EVENT]),
        resource=EventResourceFilter(id=[campaign_resource_id(name)]),
    )
    deadline = time.monotonic() + timeout
    async with get_client() as client:
        while True:
            events = [
                e
                for e in (await client.read_events(wanted, limit=50)).events  # newest first
                if e.payload.get("run_dir") == str(run_dir)
            ]
            if events or time.monotonic() > deadline:
                return events
            await asyncio.sleep(0.5)


async def flow_run_logs(flow_run_id) -> list[str]:  # type: ignore[no-untyped-def]
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    async with get_client() as client:
        logs = await client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )
    return [f"{log.name}: {log.message}" for log in logs]


async def flow_run_named(name: str):  # type: ignore[no-untyped-def]
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    async with get_client() as client:
        runs = await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name]))
        )
    return runs[0].id if runs else None


async def stored_runs(flow_run_id) -> str:  # type: ignore[no-untyped-def]
    """Everything Prefect's database holds about one flow run and its task runs, as JSON."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async with get_client() as client:
        flow_run = await client.read_flow_run(flow_run_id)
        task_runs = await client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    stored = flow_run.model_dump_json() + "".join(t.model_dump_json() for t in task_runs)
    # The dump is the real record: it holds the parameters the flow was given.
    assert '"sessions":6' in stored.replace(" ", ""), stored[:2000]
    return stored


# ------------------------------------------------------------ `agentsession campaign` processes
# A demo-preset campaign cut down to the small turnover above, for `--set`.
SMALL_DEMO = [
    "think_scale=0.05",
    "population.sessions=6",
    "population.awake=2",
    "population.registration_quiet_seconds=0.5",
    "target.local_workers=4",
    "levels=[1.0]",
    "abort.rules=[]",
]


def demo_campaign(*sets: str) -> list[str]:
    """`agentsession campaign --preset demo` with SMALL_DEMO and then `sets`, as a process."""
    args = [sys.executable, "-m", "agentsession_core", "campaign", "--preset", "demo"]
    for setting in (*SMALL_DEMO, *sets):
        args += ["--set", setting]
    return args


def read_until(proc: subprocess.Popen[str], wanted: str, *, unless: str = "") -> list[str]:
    """The lines of `proc`'s stderr up to the first holding `wanted` (and not `unless`); the
    test fails, with what it said, if the process ends first."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if wanted in line and not (unless and unless in line):
            return seen
    pytest.fail(f"never said {wanted!r}: {''.join(seen)[-3000:]}")
