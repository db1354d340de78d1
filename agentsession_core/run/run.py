"""A run's lifecycle (`Run`) around one load (engine/load.py `Load`): run directory, log,
signals, how it ends, its files and the control API. The load generates; the run keeps
everything a person or a gate reads of it.

Order matters for "nothing is lost": the run directory and its log exist before the first
call to the substrate; stats_history.csv (+ .jsonl) and status.json are written every second
while the load runs; whatever happens (failure, abort, SIGINT/SIGTERM), the load stops,
every actor the run created is deleted (or listed as leaked), the final stats and
report.html are written, and the manifest is written last (files.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agentsession_core.engine.context import now_ns
from agentsession_core.engine.engine import PreflightError
from agentsession_core.engine.load import Load
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.shards.split import is_sharded
from agentsession_core.errors import AgentsessionError
from agentsession_core.measure.actor_census import ActorCensus
from agentsession_core.measure.prometheus import MetricsServer
from agentsession_core.measure.recorder import Recorder
from agentsession_core.output.run_dir import RunDir, describe_os_error
from agentsession_core.output.stats_files import HistoryWriter
from agentsession_core.report.context import ThresholdRule
from agentsession_core.run.control_api import ControlAPI
from agentsession_core.run.ending import Ending, ending, no_step_succeeded
from agentsession_core.run.files import (
    append_history,
    status_document,
    write_final_files,
    write_start_files,
)
from agentsession_core.run.live_control import LiveControl
from agentsession_core.run.progress import Progress
from agentsession_core.script.mix import ScriptMix, load_mix
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")

DEFAULT_HOLD_S = 60.0
EXIT = {"completed": 0, "failed": 1, "refused": 1, "aborted": 1}
# A run that reached its end but left actors on the substrate (cleanup could not delete them
# by its deadline): its measurement stands, but whoever runs it must hear of the leak, and a
# script that only reads the exit code would not from a 0 (docs/SPEC.md §3.5).
LEAKED_EXIT = 3
T = TypeVar("T")
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


@dataclass
class RunResult:
    status: str
    exit_code: int
    run_dir: Path
    reason: str | None = None
    leaks: list[dict[str, str]] = field(default_factory=list)


def run_on_fresh_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` on a new event loop: uvloop's (the hot path is measured on it) when it is
    installed, asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(main)
    return uvloop.run(main)


def load_for(params: RunParams, substrate: Substrate | None, atespace: str) -> Load:
    """The load `params` asks for: this process's engines, or shards on Dask
    (generator.shards > 1 or generator.cluster; Dask is imported only then)."""
    if not is_sharded(params):
        from agentsession_core.engine.local_load import LocalLoad

        return LocalLoad(params, atespace, substrate)
    from agentsession_core.engine.shards.load import ShardedLoad

    return ShardedLoad(params, atespace, substrate)


class Run:
    """One run, driven phase by phase; usable as `async with Run(params) as run:`.

    Entering opens the run directory and its log and the load (`substrate` when given — the
    caller owns it —, else a client for params.target, starting a local substrate when it
    names no URL; shards on Dask when params.generator asks), /metrics with the control API,
    and the per-second reporter. The body calls preflight / register / fill / hold (the CLI
    once, a campaign flow once per window). Leaving always stops the load, deletes every
    actor the run created, writes the final stats, runs the `finalizers` (a campaign adds
    windows and gate there), writes report.html from the run's files and writes the
    manifest last. An AgentsessionError or other Exception from the body is recorded in
    status.json and not re-raised: `result` says it.
    """

    def __init__(
        self,
        params: RunParams,
        *,
        substrate: Substrate | None = None,
        live: bool = False,
        handle_signals: bool = True,
    ) -> None:
        self.params = params
        self.live = live
        self.handle_signals = handle_signals
        self.started_unix = time.time()
        self.status = "failed"
        self.reason: str | None = None
        self.refusal: str | None = None  # why the run could not start (refuse)
        self.write_failure: str | None = None  # the run directory stopped taking writes
        self.signal: signal.Signals | None = None
        self.script: ScriptMix | None = None  # the run's scripts (one, or a mix)
        self.run_dir = RunDir.create(params.out, params.name, params.tag, self.started_unix)
        self.history = HistoryWriter(header=not self.run_dir.has_content("stats_history.csv"))
        # Per run: a second run of the same name in the same second (run_tag=<tag>.N) gets
        # its own atespace too, so a shared substrate keeps their actors apart.
        copy = f"-{self.run_dir.copy}" if self.run_dir.copy > 1 else ""
        self.atespace = params.target.atespace or f"{params.name}-{int(self.started_unix)}{copy}"
        self.load = load_for(params, substrate, self.atespace)
        self.extra_rows: list[dict[str, Any]] = []  # more stats.jsonl rows (step_window …)
        self.finalizers: list[Callable[[], None]] = []  # run in a thread before the manifest
        # Threshold rules (judge.thresholds.Threshold) report.html draws; a campaign sets its own.
        self.report_rules: Sequence[ThresholdRule] = ()
        self.result: RunResult | None = None
        self.control = LiveControl()  # changes by hand (docs/SPEC.md §5.10)
        self.current_window: dict[str, Any] | None = None  # a campaign's window, while held
        self.control_url: str | None = None  # GET/PATCH /v1/status, with metrics_port
        self._stack = contextlib.AsyncExitStack()
        self._previous_handlers: dict[signal.Signals, Any] = {}

    @property
    def recorder(self) -> Recorder:
        """The load's recorder: every arm's rows (merged from the shards when sharded)."""
        return self.load.recorder

    # ------------------------------------------------------------ enter / leave
    async def __aenter__(self) -> Run:
        handler = self._log = self.run_dir.log_handler()
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
        except PreflightError as exc:
            # Cannot start (e.g. the local substrate did not come up): a refusal like any
            # other; the body's phases then do nothing and leaving writes the files.
            self.refuse(exc)
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def _open(self) -> None:
        script = self.script = await asyncio.to_thread(load_mix, self.params.script)
        try:
            await asyncio.to_thread(write_start_files, self)
        except OSError as exc:  # a full or read-only disk: the run cannot start
            reason = f"cannot write the run directory: {describe_os_error(exc)}"
            raise PreflightError(reason) from None
        await self.load.open(self._stack, script, self.run_dir.path, self._background)
        if self.params.metrics_port is not None:
            await self._serve_metrics(script)
        population = self.params.population
        progress = Progress(
            self.load,
            live=self.live,
            paused=lambda: self.control.paused,
            swaps_at=population.level if population.kind == "turnover" else None,
        )
        self._stack.callback(progress.close)
        self._background(self._report_every_second(progress), "reporter")
        # Registered last, so it runs first on the way out: stop the load, delete its actors
        # (each arm its own, at once), while the reporter still writes status.json.
        self._stack.push_async_callback(self.load.close)

    async def _serve_metrics(self, script: ScriptMix) -> None:
        """/metrics and the control API (/v1/status) on params.metrics_port, and the census
        of the run's actors behind `locust_actors` (the candidate's atespace, listed once for
        every shard)."""
        assert self.params.metrics_port is not None
        api = ControlAPI(
            self.params, self.control, self.load, self.started_unix, lambda: self.current_window
        )
        client, atespace = self.load.client, self.atespace
        census = ActorCensus(lambda: client.list_actors(atespace)) if client else None
        if census is not None:
            self._background(census.run(), "actor-census")
        metrics = MetricsServer(
            self.recorder,
            self.params.metrics_port,
            user_class="+".join(script.names),  # a mix: its scripts, one label
            routes=api.add_routes,
            census=census,
        )
        await metrics.start()
        self._stack.push_async_callback(metrics.stop)
        self.control_url = api.url(metrics)
        log.info("metrics on %s, live control on %s", metrics.url, self.control_url)

    def _background(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        task = asyncio.create_task(coro, name=name)

        async def cancel() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        self._stack.push_async_callback(cancel)

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, PreflightError):
            self.refuse(exc)
        elif isinstance(exc, AgentsessionError):
            self.status, self.reason = "failed", str(exc)
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
            await asyncio.to_thread(write_final_files, self)
        leaks = self.leaks
        if leaks and self.exit_code == LEAKED_EXIT:
            log.error(
                "%d actors left on the substrate (listed in status.json): exit %d",
                len(leaks),
                LEAKED_EXIT,
            )
        self.result = RunResult(self.status, self.exit_code, self.run_dir.path, self.reason, leaks)
        return isinstance(exc, Exception)

    # ------------------------------------------------------------ phases
    async def preflight(self) -> bool:
        """The substrate can run this (docs/SPEC.md §3.1); False when it refused (recorded by
        `refuse`: the later phases then do nothing and the run ends `refused`)."""
        if self.refusal is not None:
            return False
        refused = await self.load.preflight()
        if refused is not None:
            self.refuse(refused)
            return False
        return True

    def refuse(self, exc: PreflightError) -> None:
        """The run cannot start (unreachable substrate, bad credentials, a template too
        small): said once, no actor was created, and the run ends `refused` — a verdict of
        its own (the gate says void: nothing about the substrate's performance was judged,
        docs/SPEC.md §6), not a crash."""
        if self.refusal is None:
            self.refusal = str(exc)
            log.error("refused: %s", exc)
            # Nothing runs after a refusal: an unreachable substrate, already said, must not
            # be said again by a watchdog while the files are written.
            self.load.stop_watching()

    async def register(self) -> None:
        if not self.stop_reason():
            await self.load.register()

    async def fill(self) -> None:
        if not self.stop_reason():
            await self.load.fill()

    async def hold(
        self,
        seconds: float,
        *,
        level: float | None = None,
        should_stop: Callable[[], str | None] | None = None,
        start_ns: int | None = None,
    ) -> tuple[int, int, str | None]:
        """Hold the load `seconds` (at `level`, from `start_ns`); ends early on a signal, a
        failure, a stop by hand or `should_stop` (a campaign's abort rules). A stop by hand
        ends the hold as if its duration had ended (docs/SPEC.md §5.10): no reason, the run
        completes; status.json's control.stopped says it."""

        def stop() -> str | None:
            return (
                self.stop_reason()
                or self.control.stop_line
                or (should_stop() if should_stop else None)
            )

        reason = stop()
        if reason is None:
            start, end, reason = await self.load.hold(
                seconds, level=level, stop=stop, start_ns=start_ns
            )
        else:  # stopped before it began: an empty hold
            start = end = now_ns()
        # The load only saw its stop rule fire; say what set it (a signal, a full disk).
        reason = (self.stop_reason() or reason) if reason is not None else None
        return start, end, None if reason == self.control.stop_line else reason

    # ------------------------------------------------------------ what it left
    @property
    def leaks(self) -> list[dict[str, str]]:
        """The actors cleanup could not delete (each with the reason; a paired run's
        reference arm's with `arm`)."""
        return self.load.leaks()

    @property
    def exit_code(self) -> int:
        if self.signal:
            return SIGNAL_EXIT[self.signal]
        code = EXIT.get(self.status, 1)
        # Only a 0 changes: a failed run already says something is wrong.
        return LEAKED_EXIT if code == 0 and self.leaks else code

    # ------------------------------------------------------------ how it ends
    def _ending(self) -> Ending | None:
        return ending(
            refusal=self.refusal,
            signal=self.signal,
            write_failure=self.write_failure,
            load=self.load.failure(),
        )

    def stop_reason(self) -> str | None:
        """Why nothing more may run (a refusal, a signal, a full disk, a load's failure)."""
        end = self._ending()
        return end.stop_line if end is not None else None

    def cut_short(self, reason: str) -> bool:
        """Whether a stop for `reason` says nothing about the substrate (a signal, our own
        disk, the generator's own fault): the window it cut is void, not aborted."""
        end = self._ending()
        return end is not None and end.not_the_substrate

    def finish(self, status: str = "completed", reason: str | None = None) -> None:
        """The body reached its end: record how (signals and a dead substrate still win). A
        run in which no step succeeded measured nothing a user would feel: it ends `failed`
        with that reason, never `completed` (docs/SPEC.md §3.4)."""
        if status == "completed" and reason is None:
            reason = self.no_step_succeeded()
            status = "completed" if reason is None else "failed"
        self.status, self.reason = status, reason
        self._settle()

    def no_step_succeeded(self) -> str | None:
        return no_step_succeeded(self.recorder.totals(), self.params.population.wake_probe)

    def _settle(self) -> None:
        end = self._ending()
        if end is not None:
            self.status, self.reason = end.status, end.reason

    # ------------------------------------------------------------ every second
    async def _report_every_second(self, progress: Progress) -> None:
        while True:
            await self.load.next_second()
            texts = self.history.render_closed_files(self.recorder, self.load.sessions())
            await self._save_progress(texts)
            progress.tick()

    async def _save_progress(self, history: dict[str, str]) -> None:
        """stats_history.csv/.jsonl and status.json, once a second. The first write that fails
        (or logs.txt's) ends the run with the reason (writes_failed); none is tried after it."""
        if self.write_failure is not None:
            return
        try:
            status = status_document(self, final=False)
            await asyncio.to_thread(self._write_progress, history, status)
        except OSError as exc:
            self.writes_failed(exc)
        if self._log.failure is not None:
            self.writes_failed(self._log.failure)

    def _write_progress(self, history: dict[str, str], status: dict[str, Any]) -> None:
        if not self.run_dir.path.is_dir():  # writing would quietly make a new, partial one
            raise FileNotFoundError(errno.ENOENT, "removed during the run", str(self.run_dir.path))
        append_history(self, history)  # stats_history.csv and .jsonl
        self.run_dir.write_json("status.json", status)

    def writes_failed(self, exc: OSError) -> None:
        """The run directory stopped taking writes (a full or vanished disk): said once, and
        the run ends `failed` with the reason; the last files still land where they can
        (files.write_final_files)."""
        if self.write_failure is None:
            self.write_failure = f"cannot write the run directory: {describe_os_error(exc)}"
            log.error("%s; ending the run", self.write_failure)
            self.load.stop()

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
            self.load.stop()


__all__ = ["DEFAULT_HOLD_S", "LEAKED_EXIT", "Run", "RunResult", "load_for", "run_on_fresh_loop"]
