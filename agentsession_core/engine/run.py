"""A run's lifecycle (`Run`): run directory, substrate, engine phases, cleanup, exit status.
The substrate client and the embedded local substrate are made in target.py; the run's own
files are written by run_files.py; `run`, the `agentsession run` body, is single_run.py.

Order matters for "nothing is lost": the run directory and its log exist before the first
call to the substrate; stats_history.csv (+ .jsonl) and status.json are written every second
while the load runs; whatever happens (failure, abort, SIGINT/SIGTERM), the engine stops,
every actor the run created is deleted (or listed as leaked), the final stats and
report.html are written, and the manifest is written last.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agentsession_core.engine.arms import Arms
from agentsession_core.engine.context import now_ns, one_second
from agentsession_core.engine.control_api import ControlAPI
from agentsession_core.engine.engine import Engine, PreflightError
from agentsession_core.engine.live_control import LiveControl
from agentsession_core.engine.params import RunParams
from agentsession_core.engine.progress import Progress
from agentsession_core.engine.reference_arm import ReferenceArm
from agentsession_core.engine.run_files import (
    append_history,
    status_document,
    write_final_files,
    write_start_files,
)
from agentsession_core.engine.server_source import embedded_url, open_server_metrics
from agentsession_core.engine.target import open_substrate
from agentsession_core.engine.watchdog import Watchdog
from agentsession_core.errors import AgentsessionError
from agentsession_core.measure.actor_census import ActorCensus
from agentsession_core.measure.health import GeneratorHealth
from agentsession_core.measure.prometheus import MetricsServer
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.server_sources import ServerMetrics
from agentsession_core.measure.stats import CONTROL_KIND, ROUTER_KIND
from agentsession_core.output.run_dir import RunDir, describe_os_error, one_line
from agentsession_core.output.stats_files import HistoryWriter
from agentsession_core.report.context import ThresholdRule
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
STEP_ROW_PREFIX = "Step_"  # the rows Session.run_step books


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


class Run:
    """One run, driven phase by phase; usable as `async with Run(params) as run:`.

    Entering opens the run directory and its log, opens the substrate (`substrate` when given
    — the caller owns it —, else a client for params.target, starting a local substrate when
    it names no URL), the engine, generator health, /metrics, the per-second reporter and the
    substrate watchdog. The body calls preflight / register / fill / hold (the CLI once, a
    campaign flow once per window). Leaving always stops the load, deletes every actor the
    run created, writes the final stats, runs the `finalizers` (a campaign adds windows and
    gate there), writes report.html from the run's files and writes the manifest last. An
    AgentsessionError or other Exception from the body is recorded in status.json and not
    re-raised: `result` says it.
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
        self.substrate = substrate
        self.live = live
        self.handle_signals = handle_signals
        self.started_unix = time.time()
        self.status = "failed"
        self.reason: str | None = None
        self.refusal: str | None = None  # why the run could not start (refuse)
        self.write_failure: str | None = None  # the run directory stopped taking writes
        self.signal: signal.Signals | None = None
        self.engine: Engine | None = None
        self.recorder = Recorder()
        self.script: ScriptMix | None = None  # the run's scripts (one, or a mix)
        self.run_dir = RunDir.create(params.out, params.name, params.tag, self.started_unix)
        self.history = HistoryWriter(header=not self.run_dir.has_content("stats_history.csv"))
        # Per run: a second run of the same name in the same second (run_tag=<tag>.N) gets
        # its own atespace too, so a shared substrate keeps their actors apart.
        copy = f"-{self.run_dir.copy}" if self.run_dir.copy > 1 else ""
        self.atespace = params.target.atespace or f"{params.name}-{int(self.started_unix)}{copy}"
        # A paired run's second arm (docs/SPEC.md §6.8); the candidate is this Run's own.
        self.reference = (
            ReferenceArm(params, self.recorder, self.atespace) if params.paired else None
        )
        self.arms = Arms(self.reference)
        self.extra_rows: list[dict[str, Any]] = []  # more stats.jsonl rows (step_window …)
        self.finalizers: list[Callable[[Run], None]] = []  # run in a thread before the manifest
        # Threshold rules (judge.thresholds.Threshold) report.html draws; a campaign sets its own.
        self.report_rules: Sequence[ThresholdRule] = ()
        self.result: RunResult | None = None
        self.server: ServerMetrics | None = None  # server-side figures (docs/SPEC.md §5.9)
        self.control = LiveControl()  # changes by hand (docs/SPEC.md §5.10)
        self.current_window: dict[str, Any] | None = None  # a campaign's window, while held
        self.control_url: str | None = None  # GET/PATCH /v1/status, with metrics_port
        self._stack = contextlib.AsyncExitStack()
        self._watchdog = None
        self._previous_handlers: dict[signal.Signals, Any] = {}

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
        self.script = await asyncio.to_thread(load_mix, self.params.script)
        await self._write_start_files()
        substrate = self.substrate
        if substrate is None:
            log_path = self.run_dir.file("substrate.log")
            try:
                substrate = await self._stack.enter_async_context(
                    open_substrate(self.params.target, log_path)
                )
            except (RuntimeError, OSError) as exc:  # the embedded substrate did not start
                raise PreflightError(self.arms.said(f"substrate local: {one_line(exc)}")) from None
        # The substrate's own metrics; stopped before the substrate (the stack unwinds).
        embedded = None if self.substrate or self.params.target.substrate else substrate
        self.server = await self._stack.enter_async_context(
            open_server_metrics(self.params, self.recorder, embedded_url(embedded))
        )
        engine = self.engine = self.arms.candidate = Engine(
            self.params, substrate, self.script, self.recorder, atespace=self.atespace
        )
        if self.reference is not None:
            await self.reference.open(self._stack, self.run_dir, self.script, self._background)
            self.arms.pair(self.recorder)
        health = GeneratorHealth(self.recorder, voids=self.params.generator.void_when_saturated)
        await health.start()
        self._stack.push_async_callback(health.stop)
        if self.params.metrics_port is not None:
            await self._serve_metrics(substrate)
        self.health = health
        progress = Progress(engine, self.recorder, live=self.live, health=health)
        self._stack.callback(progress.close)
        self._watchdog = Watchdog(
            substrate,
            self.params,
            on_back=engine.substrate_back,
            on_failure=engine.watchdog_failed,  # a failed run starts nothing more
        )
        self._background(self._watchdog.run(), "watchdog")
        self._background(self._report_every_second(progress), "reporter")
        # Registered last, so it runs first on the way out: stop load, delete actors (each
        # arm its own, at once).
        self._stack.push_async_callback(self.arms.cleanup)

    def substrate_silent_since(self, start_ns: int) -> str | None:
        """The watchdog's line when the substrate answered nothing since `start_ns`
        (Watchdog.silent_since); None otherwise."""
        dog = self._watchdog
        return dog.silent_since(start_ns) if dog is not None else None

    @property
    def _watchdog(self) -> Watchdog | None:
        """The candidate's watchdog (a ShardedRun's: the coordinator's one probe)."""
        return self.arms.watchdog

    @_watchdog.setter
    def _watchdog(self, dog: Watchdog | None) -> None:
        self.arms.watchdog = dog

    async def _serve_metrics(self, substrate: Substrate) -> None:
        """/metrics and the control API (/v1/status) on params.metrics_port, and the census
        of the run's actors behind `locust_actors` (the candidate's atespace; a ShardedRun's
        coordinator takes the one census of the whole atespace, its shards none)."""
        assert self.params.metrics_port is not None and self.script is not None
        api = ControlAPI(self)
        atespace = self.atespace
        census = ActorCensus(lambda: substrate.list_actors(atespace))
        self._background(census.run(), "actor-census")
        metrics = MetricsServer(
            self.recorder,
            self.params.metrics_port,
            user_class="+".join(self.script.names),  # a mix: its scripts, one label
            routes=api.add_routes,
            census=census,
        )
        await metrics.start()
        self._stack.push_async_callback(metrics.stop)
        self.control_url = api.url(metrics)
        log.info("metrics on %s, live control on %s", metrics.url, self.control_url)

    async def _write_start_files(self) -> None:
        try:
            await asyncio.to_thread(write_start_files, self)
        except OSError as exc:  # a full or read-only disk: the run cannot start
            reason = f"cannot write the run directory: {describe_os_error(exc)}"
            raise PreflightError(reason) from None

    def _background(self, coro: Any, name: str) -> None:
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
            await asyncio.to_thread(self.write_final_files)
        if self.leaks and self.exit_code == LEAKED_EXIT:
            log.error(
                "%d actors left on the substrate (listed in status.json): exit %d",
                len(self.leaks),
                LEAKED_EXIT,
            )
        self.result = RunResult(
            self.status, self.exit_code, self.run_dir.path, self.reason, self.leaks
        )
        return isinstance(exc, Exception)

    def write_final_files(self) -> None:
        """The final stats, the finalizers' files and the manifest (in a thread)."""
        write_final_files(self)

    # ------------------------------------------------------------ phases
    def _engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("Run used outside `async with`")
        return self.engine

    async def preflight(self) -> bool:
        """The substrate can run this (docs/SPEC.md §3.1); False when it refused (recorded by
        `refuse`: the later phases then do nothing and the run ends `refused`)."""
        if self.refusal is not None:
            return False
        self._engine()
        refused = await self.arms.preflight()
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
            self.arms.stop_watching()

    async def register(self) -> None:
        if not self.stop_reason():
            self._engine()
            await self.arms.each("register")

    async def fill(self) -> None:
        if not self.stop_reason():
            self._engine()
            await self.arms.each("fill")

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

        stop = self.hold_stop(should_stop)
        if (reason := stop()) is not None:
            return now_ns(), now_ns(), self.unless_stopped_by_hand(reason)
        if level is not None and self.reference is not None and self.reference.engine:
            self.reference.engine.population.set_level(level)  # both arms at every level
        start, end, reason = await self._engine().hold(
            seconds, level=level, should_stop=stop, start_ns=start_ns
        )
        # The engine only saw its stop event; say what set it (a signal, a full disk).
        reason = (self.stop_reason() or reason) if reason is not None else None
        return start, end, self.unless_stopped_by_hand(reason)

    def hold_stop(self, should_stop: Callable[[], str | None] | None) -> Callable[[], str | None]:
        """What ends a hold early: a failure or signal (stop_reason), a stop by hand, then
        the caller's rule (a campaign's abort rules)."""

        def stop() -> str | None:
            return (
                self.stop_reason()
                or self.control.stop_line
                or (should_stop() if should_stop else None)
            )

        return stop

    def unless_stopped_by_hand(self, reason: str | None) -> str | None:
        """A stop by hand ends the hold as if its duration had ended (docs/SPEC.md §5.10):
        no reason, the run completes; status.json's control.stopped says it."""
        return None if reason is not None and reason == self.control.stop_line else reason

    # ------------------------------------------------------------ live control
    @property
    def current_level(self) -> float:
        """The level the load runs at now (× the population's base)."""
        return self.engine.population.level_multiplier if self.engine is not None else 1.0

    @property
    def paused(self) -> bool:
        return self.control.paused

    def state(self) -> str:
        """The phase the run is in (setup, preflight, register, fill, hold, stopping …)."""
        return self.engine.phase if self.engine is not None else "setup"

    async def apply_level(self, level: float) -> None:
        """A level set by hand (the control API), at once, on every arm."""
        self._engine()
        self.arms.set_level(level)

    async def apply_paused(self, paused: bool) -> None:
        """A pause or resume by hand (the control API), at once, on every arm."""
        self._engine()
        self.arms.set_paused(paused)

    def residents(self) -> int | None:
        """Turnover's resident set now (None for other populations)."""
        population = self.engine.population if self.engine is not None else None
        return getattr(population, "residents", None)

    @property
    def leaks(self) -> list[dict[str, str]]:
        """The actors cleanup could not delete (each with the reason; a paired run's
        reference arm's with `arm`)."""
        return self.arms.leaks()

    @property
    def exit_code(self) -> int:
        if self.signal:
            return SIGNAL_EXIT[self.signal]
        code = EXIT.get(self.status, 1)
        # Only a 0 changes: a failed run already says something is wrong.
        return LEAKED_EXIT if code == 0 and self.leaks else code

    def cut_short(self, reason: str) -> bool:
        """Whether a stop for `reason` says nothing about the substrate (a signal, our own
        disk; in a sharded run also a lost shard): the window it cut is void, not aborted."""
        return (
            self.signal is not None
            or self.write_failure is not None
            or self.arms.generator_stalled()
        )

    def load_problem(self) -> str | None:
        """One line when the load was not what was asked (Population.problem)."""
        return self.engine.population.problem() if self.engine is not None else None

    def stop_reason(self) -> str | None:
        if self.refusal is not None:
            return f"refused: {self.refusal}"
        if self.signal is not None:
            return f"received {self.signal.name}"
        if self.write_failure is not None:
            return self.write_failure
        return self.arms.failure()

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
        """One line when not one scripted step succeeded in the whole run (registration's
        step 1 included); None otherwise. With wake_probe none no step runs: the same of
        its wakes, the ResumeActor calls."""
        if self.params.population.wake_probe == "none":
            return self._no_resume_succeeded()
        steps = [
            stats
            for (kind, name), stats in self.recorder.totals().rows.items()
            if kind == ROUTER_KIND and name.startswith(STEP_ROW_PREFIX)
        ]
        tried = sum(s.count for s in steps)
        if tried > sum(s.failures for s in steps):
            return None
        if not tried:
            return "no step succeeded: no step ran (a hold shorter than the script's think?)"
        errors = sum((s.errors for s in steps), Counter[str]())
        common = errors.most_common(1)[0][0] if errors else "no error recorded"
        return f"no step succeeded: all {tried} steps failed (most often {common})"

    def _no_resume_succeeded(self) -> str | None:
        resumes = self.recorder.totals().rows.get((CONTROL_KIND, "ResumeActor"))
        if resumes is not None and resumes.count > resumes.failures:
            return None
        if resumes is None or not resumes.count:
            return "no wake succeeded: no ResumeActor was sent (wake_probe none)"
        common = resumes.errors.most_common(1)
        most = common[0][0] if common else "no error recorded"
        tried = resumes.count
        return f"no wake succeeded: all {tried} ResumeActor calls failed (most often {most})"

    def _settle(self) -> None:
        if self.refusal is not None:  # it happened first: nothing else ran
            self.status, self.reason = "refused", self.refusal
        elif self.signal is not None:
            self.status, self.reason = "cancelled", f"received {self.signal.name}"
        elif self.write_failure is not None:
            self.status, self.reason = "failed", self.write_failure
        elif (failure := self.arms.failure()) is not None:
            # A generator whose own loop stalled measured nothing of the substrate: void, as
            # a lost shard is, not a failure of the substrate.
            stalled = self.arms.generator_stalled()
            self.status, self.reason = ("void" if stalled else "failed"), failure

    # ------------------------------------------------------------ every second
    async def _report_every_second(self, progress: Progress) -> None:
        engine = self._engine()
        rec = self.recorder
        while True:
            await one_second(rec, self.arms.sample)  # the gauges mid-second
            engine.ctx.summarise_logs()
            rec.flush()
            texts = self.history.render_closed_files(self.recorder, len(engine.population.sessions))
            await self._save_progress(texts, lambda: status_document(self, final=False))
            progress.tick()

    async def _save_progress(
        self, history: dict[str, str], status: Callable[[], dict[str, Any]]
    ) -> None:
        """stats_history.csv/.jsonl and status.json, once a second. The first write that fails
        (or logs.txt's) ends the run with the reason (writes_failed); none is tried after it."""
        if self.write_failure is not None:
            return
        try:
            await asyncio.to_thread(self._write_progress, history, status())
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
        (run_files.write_final_files)."""
        if self.write_failure is None:
            self.write_failure = f"cannot write the run directory: {describe_os_error(exc)}"
            log.error("%s; ending the run", self.write_failure)
            self.arms.stop()

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
            self.arms.stop()
