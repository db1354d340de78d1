"""Serve the deployments of deployments/prefect.yaml from one box, no work pool needed:
`nightly`, `adhoc`, `verdict-report` (run by its trigger when a verdict is fail) and
`baseline-accept` (accepting an intended change, started by hand).

    PREFECT_API_URL=http://127.0.0.1:4200/api python -m flows.serve   # or: agentsession serve

Needs a running Prefect API (`prefect server start --analytics-off`). The nightly schedule,
the deployments' parameters and triggers come from deployments/prefect.yaml, so `prefect
deploy` and this process agree; one flow run at a time (two campaigns would measure each
other; a report waits for the campaign in progress).
Stopping the process pauses the nightly schedule (Prefect's serve default).

A SIGTERM (or a Ctrl-C) after the Prefect API went away (a crash, a host gone) does not take
Prefect's graceful way out: that pauses every deployment and flushes events and logs through
the API, each call retried, which took 75-150 s and printed two tracebacks (issue #29).
Instead one line says so, a flow run in progress gets a SIGTERM (it stops as on a cancel:
actors deleted, artifacts written) and up to STOP_WITHOUT_API_S to end, and the process exits
143 (130 after a Ctrl-C).
The schedules then stay as they were: nobody could pause them. While the API is away, the
runner's lines about it are one line each (the connection error), not a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

STOP_WITHOUT_API_S = 10.0  # a flow run in progress gets this long to stop on its SIGTERM
API_CHECK_TIMEOUT_S = 2.0  # does the Prefect API still answer (its /health)?
EXIT_ON = {signal.SIGTERM: 143, signal.SIGINT: 130}
_LEAVING = threading.Event()  # stop_without_api began: a second signal changes nothing

# A checkout keeps prefect.yaml in deployments/; the wheel ships a copy inside flows/.
_CHECKOUT_YAML = Path(__file__).resolve().parents[1] / "deployments" / "prefect.yaml"
_PACKAGED_YAML = Path(__file__).parent / "prefect.yaml"
PREFECT_YAML = _CHECKOUT_YAML if _CHECKOUT_YAML.is_file() else _PACKAGED_YAML


def deployment_specs(path: Path = PREFECT_YAML) -> dict[str, dict[str, Any]]:
    """prefect.yaml's deployments by name."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {spec["name"]: spec for spec in document.get("deployments") or []}


def entrypoint_flow(entrypoint: str) -> Any:
    """The flow a module-path entrypoint (`flows.campaign.campaign`) names."""
    module, _, attr = entrypoint.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def deployment_triggers(name: str, spec: dict[str, Any]) -> list[Any]:
    """A deployment's `triggers:` as Prefect's models, named as `prefect deploy` names them."""
    from prefect.events.schemas.deployment_triggers import DeploymentTriggerTypes
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(DeploymentTriggerTypes)
    return [
        adapter.validate_python({"name": f"{name}__automation_{i}", **trigger})
        for i, trigger in enumerate(spec.get("triggers") or [], start=1)
    ]


def build_deployments(cron: str | None = None, path: Path = PREFECT_YAML) -> list[Any]:
    """RunnerDeployments for serve(); builds without talking to an API."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.schedules import Cron

    out = []
    for name, spec in deployment_specs(path).items():
        schedules = [
            Cron(cron or s["cron"], timezone=s.get("timezone", "UTC"), slug=s.get("slug"))
            for s in spec.get("schedules") or []
        ]
        limit = spec.get("concurrency_limit") or {}
        out.append(
            entrypoint_flow(spec["entrypoint"]).to_deployment(
                name=name,
                description=spec.get("description"),
                tags=spec.get("tags"),
                schedules=schedules or None,
                parameters=spec.get("parameters") or {},
                concurrency_limit=ConcurrencyLimitConfig(**limit) if limit else None,
                triggers=deployment_triggers(name, spec) or None,
            )
        )
    return out


def serve_deployments(cron: str | None = None) -> None:
    """Prefect's `serve(*deployments, limit=1)`, on a runner that stops within seconds when
    its API went away (module docstring)."""
    from prefect.exceptions import TerminationSignal

    deployments = build_deployments(cron)
    runner = _runner_class()(pause_on_shutdown=True, limit=1)
    for deployment in deployments:
        runner.add_deployment(deployment)
    _one_line_transport_errors()
    # Said once the runner has started: from then on a SIGTERM or a Ctrl-C takes one of the
    # two ways out above (before, Prefect's runner would exit without pausing anything).
    runner.on_started = lambda: _starting_message(deployments)
    try:
        asyncio.run(_start(runner))
    except (KeyboardInterrupt, TerminationSignal) as exc:
        logging.getLogger("prefect.flows").info("Received %s, shutting down...", type(exc).__name__)


async def _start(runner: Any) -> None:
    """The runner's start, with Ctrl-C first asking whether the API still answers: asyncio
    has put its own SIGINT handler in place by now (it cancels this task), and it stays the
    one a Ctrl-C reaches while the API is there."""
    from prefect.settings import get_current_settings

    graceful = signal.getsignal(signal.SIGINT)

    def on_sigint(signum: int, frame: Any) -> None:
        url = get_current_settings().api.url
        if _LEAVING.is_set():
            return
        if url and runner.started and not api_answers(url):
            runner.stopping = True  # no new flow run from here on
            stop_without_api(url, signal.SIGINT)
        elif callable(graceful):
            graceful(signum, frame)
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    await runner.start()


def _runner_class() -> type:
    from prefect.runner import Runner
    from prefect.settings import get_current_settings

    class ServeRunner(Runner):
        on_started: Any = None  # called once the runner has started (serve's banner)

        async def __aenter__(self) -> Any:
            entered = await super().__aenter__()
            if self.on_started is not None:
                self.on_started()
            return entered

        def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
            url = get_current_settings().api.url
            if _LEAVING.is_set():
                return
            if url and self.started and not self.stopping and not api_answers(url):
                self.stopping = True  # no new flow run from here on
                stop_without_api(url, signal.SIGTERM)  # leaves, now or once its runs ended
                return
            super().handle_sigterm(*args, **kwargs)

    return ServeRunner


def api_answers(url: str, timeout: float = API_CHECK_TIMEOUT_S) -> bool:
    """Whether anything answers at the Prefect API's /health (any HTTP answer counts: a
    Prefect Cloud URL may want its key; only no answer at all is an API gone)."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def stop_without_api(url: str, received: signal.Signals) -> None:
    """The way out once the API is gone: say so, stop the flow runs in progress (each gets
    the SIGTERM its own cleanup answers, up to STOP_WITHOUT_API_S), exit 143 (130 for a
    Ctrl-C). In a thread, so the runner's loop keeps relaying their output meanwhile; the
    process leaves from it."""
    import psutil

    _LEAVING.set()
    print(
        f"agentsession serve: the Prefect API at {url} went away; stopping without it",
        file=sys.stderr,
        flush=True,
    )
    runs = psutil.Process().children(recursive=False)
    for run in runs:
        with contextlib.suppress(psutil.Error):
            run.terminate()

    def leave() -> None:
        _, alive = psutil.wait_procs(runs, timeout=STOP_WITHOUT_API_S)
        if alive:
            pids = ", ".join(str(p.pid) for p in alive)
            print(
                f"agentsession serve: {len(alive)} flow run(s) still stopping after "
                f"{STOP_WITHOUT_API_S:g} s, left to end on their own (pid {pids})",
                file=sys.stderr,
                flush=True,
            )
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(EXIT_ON[received])

    if not runs:
        leave()
    threading.Thread(target=leave, name="stop-without-api", daemon=True).start()


class _TransportErrorsInOneLine(logging.Filter):
    """A log line whose exception is the API going away (a refused connection, a closed
    websocket): the line and the error's name and text, without the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and _transport_error(exc):
            record.msg = f"{record.getMessage()} ({type(exc).__name__}: {exc})"
            record.args = None
            record.exc_info = record.exc_text = None
        return True


def _transport_error(exc: BaseException) -> bool:
    import httpx
    from websockets.exceptions import ConnectionClosed, InvalidHandshake

    kinds = (OSError, TimeoutError, httpx.TransportError, ConnectionClosed, InvalidHandshake)
    seen: BaseException | None = exc
    for _ in range(5):  # the error, or what it was raised from
        if seen is None:
            return False
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _one_line_transport_errors() -> None:
    """_TransportErrorsInOneLine on every handler Prefect's logging set up."""
    loggers = [logging.getLogger()] + [
        logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
    ]
    handlers = {id(h): h for logger in loggers for h in logger.handlers}
    one_line = _TransportErrorsInOneLine()
    for handler in handlers.values():
        handler.addFilter(one_line)


def _starting_message(deployments: list[Any]) -> None:
    """Prefect's own `serve` banner (the deployments and how to run them)."""
    try:
        from prefect.flows import _display_serve_start_message
    except ImportError:  # a Prefect without it: our own line
        names = ", ".join(f"{d.flow_name}/{d.name}" for d in deployments)
        print(f"Your deployments are being served: {names}", flush=True)
        return
    _display_serve_start_message(*deployments)


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    serve_deployments(os.environ.get("AGENTSESSION_NIGHTLY_CRON"))
