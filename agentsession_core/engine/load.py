"""What a run drives: one **load** (docs/ARCHITECTURE.md "A run and its load").

A `Run` (agentsession_core/run/) owns the lifecycle around a load: the run directory, the
log, signals, how the run ends, its files and the control API. The load is the generation
itself and nothing else: it never sees a file, a verdict or a report. Two kinds keep this
one surface: `LocalLoad` (local_load.py: the engines of this process, one per arm) and
`ShardedLoad` (shards/load.py: K shards on Dask, merged into one recorder). `Load` below is
all a Run, a Campaign and the flow may call; the Run picks the kind from the parameters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentsession_core.engine.engine import PreflightError
from agentsession_core.measure.health import GeneratorHealth
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.server_sources import ServerMetrics
from agentsession_core.measure.stats import Window
from agentsession_core.script.mix import ScriptMix
from agentsession_core.substrate.interface import Substrate

# background(coroutine, name): a task that lives as long as the run (cancelled on its way out)
Background = Callable[[Coroutine[Any, Any, Any], str], None]
StopRule = Callable[[], str | None]


@dataclass(frozen=True)
class LoadFailure:
    """Why the load cannot go on. `generator_side`: the generator's own fault (its loop
    stalled, a shard lost with nothing to carry on): the run ends void, not failed, and a
    window it cut is void too (docs/SPEC.md §4.2, §5.8)."""

    reason: str
    generator_side: bool = False


@dataclass
class FinalStats:
    """What the load measured, for the run's final files: the whole run's window, the
    population's rows (each arm's), the history's session count and any files of its own
    (a sharded load's `shards/<k>/health.json`)."""

    whole: Window | None
    population_rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    reference_rows: dict[str, dict[str, Any]] | None = None
    files: dict[str, Any] = field(default_factory=dict)


class Load(Protocol):
    """One load, driven phase by phase by its Run."""

    @property
    def recorder(self) -> Recorder:
        """Every arm's rows (merged from the shards when sharded)."""

    @property
    def health(self) -> GeneratorHealth:
        """The generator's saturated seconds and its void rule."""

    @property
    def server(self) -> ServerMetrics | None:
        """The substrate's own figures (docs/SPEC.md §5.9)."""

    @property
    def reference_server(self) -> ServerMetrics | None:
        """A paired run's reference arm's substrate figures."""

    @property
    def paired(self) -> bool: ...
    @property
    def opened(self) -> bool: ...
    @property
    def phase(self) -> str: ...
    @property
    def level(self) -> float: ...
    @property
    def client(self) -> Substrate | None:
        """The substrate the run's actor census lists (the candidate's)."""

    async def open(
        self, stack: contextlib.AsyncExitStack, script: ScriptMix, logs: Path, bg: Background
    ) -> None:
        """Start on the run's exit stack (closed with it); PreflightError: cannot start."""

    async def preflight(self) -> PreflightError | None: ...
    async def register(self) -> None: ...
    async def fill(self) -> None: ...
    async def hold(
        self, seconds: float, *, level: float | None, stop: StopRule, start_ns: int | None
    ) -> tuple[int, int, str | None]: ...
    async def set_level(self, level: float) -> None: ...
    async def set_paused(self, paused: bool) -> None: ...
    def set_awake(self, residents: int) -> None:
        """A density probe's resident set (turnover; nothing for other populations)."""

    def stop(self) -> None:
        """Start no more work, at once (a signal, a full disk)."""

    def stop_watching(self) -> None:
        """The run was refused: no probe says the unreachable substrate again."""

    async def close(self) -> None:
        """Stop the load and delete every actor it created (each arm its own)."""

    async def next_second(self) -> None:
        """Until the next second's figures are in the recorder."""

    def failure(self) -> LoadFailure | None: ...
    def problem(self) -> str | None:
        """One line when the load was not what was asked (a resident set that stayed short)."""

    def silent_since(self, start_ns: int) -> str | None:
        """The watchdog's line when the substrate answered nothing since `start_ns`."""

    def leaks(self) -> list[dict[str, str]]: ...
    def residents(self) -> int | None: ...
    def states(self) -> dict[str, int]:
        """How many sessions are in each state now."""

    def progress_parts(self) -> list[str]:
        """What the progress line says of this kind of load alone (shards up)."""

    def sessions(self) -> int:
        """The sessions the load drives now (stats_history's column)."""

    def books(self) -> dict[str, Any]:
        """status.json's account of the load: actors created, deleted and leaked, what the
        substrate refused as misconfigured, a reference arm's and the shards' own."""

    def density_target(self) -> tuple[Substrate | None, int | None]:
        """The substrate a density search lists and the template's memory limit."""

    def final_stats(self) -> FinalStats:
        """Once the load is closed: what it measured."""


__all__ = ["Background", "FinalStats", "Load", "LoadFailure", "StopRule"]
