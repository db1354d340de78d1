"""`agentsession run` end to end: target, artifacts, engine phases, cleanup, exit status.

Order matters for "nothing is lost": the run directory and its log exist before the first
call to the substrate; stats_history.csv and status.json are written every second while the
load runs; whatever happens (failure, abort, SIGINT/SIGTERM), the engine stops, every actor
the run created is deleted (or listed as leaked), the final stats are written, and the
manifest is written last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentsession_core
from agentsession_core.engine.engine import Engine, PreflightError
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.turnover import TurnoverPopulation
from agentsession_core.engine.progress import Progress
from agentsession_core.engine.session import now_ns
from agentsession_core.engine.watchdog import Watchdog
from agentsession_core.errors import AgentsessionError
from agentsession_core.judge.verdict import achieved
from agentsession_core.measure.health import GeneratorHealth
from agentsession_core.measure.prometheus import MetricsServer
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.stats import Window
from agentsession_core.output.run_dir import RunDir, redact
from agentsession_core.output.stats_files import (
    HistoryWriter,
    jsonl_row,
    render_failures_csv,
    render_jsonl,
    render_stats_csv,
    render_stats_jsonl,
)
from agentsession_core.script import Script, encode, load_script
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.local.launcher import LocalSubstrate

log = logging.getLogger("agentsession")

EXIT = {"completed": 0, "failed": 1, "refused": 1, "aborted": 1}
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


@dataclass
class RunResult:
    status: str
    exit_code: int
    run_dir: Path
    reason: str | None = None
    leaks: list[dict[str, str]] = field(default_factory=list)


def run_blocking(params: RunParams, *, live: bool = False) -> RunResult:
    """Run on a fresh event loop (uvloop when available)."""
    try:
        import uvloop

        return uvloop.run(run(params, live=live))
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(run(params, live=live))


@contextlib.asynccontextmanager
async def target(params: RunParams, run_dir: RunDir) -> AsyncIterator[tuple[str, str | None]]:
    """The substrate's (control, router) URLs; starts a local one when none is given."""
    if params.substrate:
        yield params.substrate, params.router
        return
    with tempfile.TemporaryDirectory(prefix="agentsession-store-") as store:
        local = LocalSubstrate(
            workers=params.local_workers,
            store=store,
            token=params.token,
            log_path=run_dir.file("substrate.log"),
        )
        async with local:
            log.info("local substrate on %s (%d workers)", local.url, params.local_workers)
            yield local.url, None


class Run:
    """One run, driven phase by phase; usable as `async with Run(params) as run:`.

    Entering opens the run directory and its log, starts the target (a local substrate when
    none is given), the engine, generator health, /metrics, the per-second reporter and the
    substrate watchdog. The body calls preflight / register / fill / hold (the CLI once, a
    campaign flow once per window). Leaving always stops the load, deletes every actor the
    run created, writes the final stats, runs the `finalizers` (a campaign adds windows,
    gate and report there) and writes the manifest last. An AgentsessionError or other
    Exception from the body is recorded in status.json and not re-raised: `result` says it.
    """

    def __init__(
        self, params: RunParams, *, live: bool = False, handle_signals: bool = True
    ) -> None:
        self.params = params
        self.live = live
        self.handle_signals = handle_signals
        self.started_unix = time.time()
        self.status = "failed"
        self.reason: str | None = None
        self.signal: signal.Signals | None = None
        self.engine: Engine | None = None
        self.recorder = Recorder()
        self.script: Script | None = None
        self.run_dir = RunDir.create(params.out, params.name, params.tag, self.started_unix)
        self.history = HistoryWriter(header=not self.run_dir.has_content("stats_history.csv"))
        self.atespace = params.atespace or f"{params.name}-{int(self.started_unix)}"
        self.extra_rows: list[dict[str, Any]] = []  # more stats.jsonl rows (step_window …)
        self.finalizers: list[Callable[[Run], None]] = []  # run in a thread before the manifest
        self.result: RunResult | None = None
        self._stack = contextlib.AsyncExitStack()
        self._watchdog: Watchdog | None = None
        self._previous_handlers: dict[signal.Signals, Any] = {}

    # ------------------------------------------------------------ enter / leave
    async def __aenter__(self) -> Run:
        handler = self.run_dir.log_handler()
        log.addHandler(handler)
        if log.level == logging.NOTSET or log.level > logging.INFO:
            log.setLevel(logging.INFO)
        self._stack.callback(handler.close)
        self._stack.callback(log.removeHandler, handler)
        if self.handle_signals:
            self._install_signals()
            self._stack.callback(self._remove_signals)
        try:
            await self._open()
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def _open(self) -> None:
        self.script = await asyncio.to_thread(load_script, self.params.script)
        await asyncio.to_thread(self._write_start_files)
        control, router = await self._stack.enter_async_context(target(self.params, self.run_dir))
        substrate = HttpSubstrate(
            control,
            router,
            token=self.params.token,
            control_timeout=self.params.request_timeout,
            router_timeout=self.params.request_timeout,
        )
        self._stack.push_async_callback(substrate.aclose)
        engine = self.engine = Engine(
            self.params, substrate, self.script, self.recorder, atespace=self.atespace
        )
        health = GeneratorHealth(self.recorder)
        await health.start()
        self._stack.push_async_callback(health.stop)
        if self.params.metrics_port is not None:
            metrics = MetricsServer(self.recorder, self.params.metrics_port)
            await metrics.start()
            self._stack.push_async_callback(metrics.stop)
            log.info("metrics on %s", metrics.url)
        self.health = health
        progress = Progress(engine, self.recorder, live=self.live)
        self._stack.callback(progress.close)
        self._watchdog = Watchdog(substrate, self.params)
        self._background(self._watchdog.run(), "watchdog")
        self._background(self._report_every_second(progress), "reporter")
        # Registered last, so it runs first on the way out: stop load, delete actors.
        self._stack.push_async_callback(engine.cleanup)

    def _background(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)

        async def cancel() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        self._stack.push_async_callback(cancel)

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, AgentsessionError):
            self.status = "refused" if isinstance(exc, PreflightError) else "failed"
            self.reason = str(exc)
            log.error("%s", exc)
        elif isinstance(exc, Exception):
            self.status, self.reason = "failed", f"{type(exc).__name__}: {exc}"
            log.error("run failed", exc_info=exc)
        elif exc is not None:  # cancelled from outside: Prefect's SIGTERM, a task cancel, ^C
            self.status = "cancelled"
            self.reason = f"cancelled from outside the run ({type(exc).__name__})"
        self._settle()
        try:
            await self._stack.aclose()
        except Exception as cleanup_exc:
            log.error("cleanup failed", exc_info=cleanup_exc)
            if self.status == "completed":
                self.status, self.reason = "failed", f"cleanup failed: {cleanup_exc}"
        finally:
            await asyncio.to_thread(self._write_final_files)
        leaks = self.engine.leaks if self.engine else []
        self.result = RunResult(self.status, self.exit_code, self.run_dir.path, self.reason, leaks)
        return isinstance(exc, Exception)

    # ------------------------------------------------------------ phases
    def _engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("Run used outside `async with`")
        return self.engine

    async def preflight(self) -> None:
        await self._engine().preflight()

    async def register(self) -> None:
        if not self.stop_reason():
            await self._engine().register()

    async def fill(self) -> None:
        if not self.stop_reason():
            await self._engine().fill()

    async def hold(
        self,
        seconds: float,
        *,
        level: float | None = None,
        should_stop: Callable[[], str | None] | None = None,
        start_ns: int | None = None,
    ) -> tuple[int, int, str | None]:
        """Hold the load (Engine.hold); ends early on a signal, a dead substrate or
        `should_stop`."""

        def stop() -> str | None:
            return self.stop_reason() or (should_stop() if should_stop else None)

        if (reason := stop()) is not None:
            return now_ns(), now_ns(), reason
        return await self._engine().hold(seconds, level=level, should_stop=stop, start_ns=start_ns)

    @property
    def exit_code(self) -> int:
        return SIGNAL_EXIT[self.signal] if self.signal else EXIT.get(self.status, 1)

    def stop_reason(self) -> str | None:
        if self.signal is not None:
            return f"received {self.signal.name}"
        return self._watchdog.failure if self._watchdog else None

    def finish(self, status: str = "completed", reason: str | None = None) -> None:
        """The body reached its end: record how (signals and a dead substrate still win)."""
        self.status, self.reason = status, reason
        self._settle()

    def _settle(self) -> None:
        if self.signal is not None:
            self.status, self.reason = "cancelled", f"received {self.signal.name}"
        elif self._watchdog is not None and self._watchdog.failure:
            self.status, self.reason = "failed", self._watchdog.failure

    # ------------------------------------------------------------ every second
    async def _report_every_second(self, progress: Progress) -> None:
        engine = self._engine()
        while True:
            await asyncio.sleep(1.0)
            engine.sample()
            engine.ctx.failure_log.summarise()
            self.recorder.flush()
            text = self.history.render_closed(self.recorder, len(engine.population.sessions))
            status = self._status(final=False)
            await asyncio.to_thread(self._write_progress, text, status)
            progress.tick()

    def _write_progress(self, history_text: str, status: dict[str, Any]) -> None:
        self.run_dir.append_text("stats_history.csv", history_text)
        self.run_dir.write_json("status.json", status)

    # ------------------------------------------------------------ signals
    def _install_signals(self) -> None:
        """SIGINT/SIGTERM become a flag the loop sees between callbacks, so a stop never lands
        inside a request's bookkeeping (a Python-level handler raising at an arbitrary frame
        can be swallowed by whichever task it hits). The previous handlers (Prefect's SIGTERM
        bridge, pytest's SIGINT) come back when the run ends."""
        loop = asyncio.get_running_loop()
        for sig in SIGNAL_EXIT:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                previous = signal.getsignal(sig)
                loop.add_signal_handler(sig, self._on_signal, sig)
                self._previous_handlers[sig] = previous

    def _remove_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig, previous in self._previous_handlers.items():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.signal is None:
            self.signal = signal.Signals(sig)
            log.warning("received %s: stopping, cleaning up, writing artifacts", self.signal.name)
            if self.engine is not None:
                self.engine.ctx.stopping.set()

    # ------------------------------------------------------------ artifacts
    def _write_start_files(self) -> None:
        assert self.script is not None
        self.run_dir.write_json("campaign.json", self._campaign())
        self.run_dir.write_text("script.yaml", encode(self.script))
        self.run_dir.write_json("status.json", self._status(final=False))

    def _campaign(self) -> dict[str, Any]:
        return {
            "params": redact(self.params.model_dump()),
            "atespace": self.atespace,
            "script": self.script.name if self.script else self.params.script,
            "started_unix": self.started_unix,
            "versions": {
                "agentsession": agentsession_core.__version__,
                "python": sys.version.split()[0],
                "platform": platform.platform(),
            },
        }

    def _status(self, *, final: bool) -> dict[str, Any]:
        engine = self.engine
        status = self.status if final else "running"
        return {
            "status": status,
            "exit_code": self.exit_code if final else None,
            "phase": engine.phase if engine else "setup",
            "stats_generated": final and engine is not None,
            "abort_reason": self.reason,
            "started_unix": self.started_unix,
            "updated_unix": time.time(),
            "atespace": self.atespace,
            "actors_created": engine.ledger.created if engine else 0,
            "actors_deleted": engine.ledger.deleted if engine else 0,
            "leaked_actors": engine.leaks if engine else [],
            "misconfigured": engine.ctx.misconfigured if engine else {},
        }

    def _write_final_files(self) -> None:
        run_dir = self.run_dir
        engine = self.engine
        if engine is not None:
            rec = self.recorder
            rec.flush(now_ns() + 1_000_000_000)  # close the last open second
            history = self.history.render_closed(rec, len(engine.population.sessions))
            run_dir.append_text("stats_history.csv", history)
            whole = rec.window(self._run_start_ns(), now_ns() + 1_000_000_000)
            tag, test = self.params.tag, self.params.name
            run_dir.write_text(
                "gauges.jsonl",
                render_jsonl(
                    {"t": t, "name": name, "labels": labels, "value": value}
                    for t, labels, name, value in whole.gauges
                ),
            )
            run_dir.write_text("stats.csv", render_stats_csv(whole))
            run_dir.write_text("failures.csv", render_failures_csv(whole))
            run_dir.write_text(
                "stats.jsonl",
                render_stats_jsonl(
                    whole,
                    tag=tag,
                    test_name=test,
                    extra_rows=[*self._turnover_rows(rec), *self.extra_rows],
                ),
            )
        # Final status first: finalizers (gate, report) read it.
        run_dir.write_json("status.json", self._status(final=True))
        for finalize in self.finalizers:
            try:
                finalize(self)
            except Exception:
                log.exception("finalizer failed")
        run_dir.write_json("status.json", self._status(final=True))
        run_dir.write_manifest()

    def _run_start_ns(self) -> int:
        return self.recorder.mono_ns_of_second(self.recorder.first_second)

    def _turnover_rows(self, rec: Recorder) -> list[dict[str, Any]]:
        engine = self.engine
        if engine is None or not isinstance(engine.population, TurnoverPopulation):
            return []
        start = engine.population.turnover_start_ns
        if start is None:
            return []
        # Whole seconds of turnover only: the first second starts after the fill's own
        # wakes, the last ends when the load stopped (not after cleanup), so achieved_rps
        # is swaps over the time they were asked for.
        end = engine.population.stopped_ns or now_ns()
        window = rec.window(start + 999_999_999, max(end, start + 999_999_999))
        return [
            jsonl_row(
                "turnover_window",
                turnover_measurements(window, engine),
                tag=self.params.tag,
                test_name=self.params.name,
            )
        ]


def turnover_measurements(window: Window, engine: Engine) -> dict[str, Any]:
    """The turnover phase only: per-request counts, failures and rates, achieved vs target."""
    duration = window.duration_s or 1.0
    wakes = window.row("turnover", "TimeToWake")
    out: dict[str, Any] = {
        "start_unix": window.start_s,
        "end_unix": window.end_s,
        "duration_s": window.duration_s,
        "target_rps": engine.population.level,
        "achieved_rps": achieved(window)[0],
        "backlog": window.row("turnover", "Backlog").events,
    }
    for quantile_key, value in wakes.measurements(duration).items():
        if quantile_key.startswith("p"):
            out[f"time_to_wake_{quantile_key}"] = value
    requests = failures = 0
    for (kind, name), stats in sorted(window.rows.items()):
        if kind == "generator" or not stats.count:
            continue
        requests += stats.count
        failures += stats.failures
        out[f"{kind}_{name}_count"] = stats.count
        out[f"{kind}_{name}_failures"] = stats.failures
        out[f"{kind}_{name}_rps"] = stats.count / duration
    out.update(
        requests=requests,
        failures=failures,
        rps=requests / duration,
        failure_ratio=failures / requests if requests else 0.0,
    )
    return out


async def run(params: RunParams, *, live: bool = False) -> RunResult:
    """The CLI's run: start-up, then one hold of params.hold seconds."""
    run = Run(params, live=live)
    async with run:
        await run.preflight()
        await run.register()
        await run.fill()
        log.info("hold %.0fs", params.hold)
        _, _, reason = await run.hold(params.hold)
        run.finish("completed" if reason is None else "failed", reason)
    assert run.result is not None
    return run.result
