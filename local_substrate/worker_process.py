"""A worker's OS process (docs/SPEC.md §2.4), forked from a fork server that has already
imported the worker: multiprocessing's forkserver, preloaded with fork_server.py (and the
main module, which a fork would otherwise run again).

Why a fork server: a worker started as a fresh interpreter spent over 0.4 s of CPU on its
start and its imports (aiohttp, the wire codecs) before it served, so a 12-worker substrate
took 7 CPU-seconds to come up and a crashed worker's replacement was late by as much. A fork
of a process that has done that work, up to its handshake, costs about 50 ms
(bench/worker_start.py measures both, side by side).

The pipe: each worker gets one end of a socket pair. It sends its handshake there
(`LISTENING <port>`), and it goes when the other end closes: when the pool stops it, or when
its server dies for any reason and the kernel closes the server's end. The fork server
itself exits when the server that started it goes, and PR_SET_PDEATHSIG (lifeline.py) kills
its workers when it does: a worker never outlives its server, even a killed one.

multiprocessing polls every child it knows of on each start and when asked for an exit code;
two threads doing that at once could read the same child's exit status twice (and one would
see 255). `_ONE_AT_A_TIME` makes them take turns, off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import threading
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from agentsession_core.substrate.protocol import WORKER_READY
from local_substrate import lifeline, worker

_CONTEXT: Any = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["__main__", "local_substrate.fork_server"])
_ONE_AT_A_TIME = threading.Lock()


class WorkerDidNotStart(RuntimeError):
    pass


class WorkerProcess:
    """One forked worker: its pid, its exit, SIGKILL, and our end of its pipe."""

    def __init__(self, process: BaseProcess, pipe: Connection) -> None:
        assert process.pid is not None
        self.pid = process.pid  # kept: a closed process object no longer says
        self._process = process
        self._pipe = pipe
        self._exit: asyncio.Future[int] | None = None
        self.returncode: int | None = None  # as subprocess has it: -N for signal N

    async def wait(self) -> int:
        """Its exit code, once it has exited (any number of callers may wait)."""
        if self._exit is None:
            self._exit = asyncio.ensure_future(self._reap())
        return await asyncio.shield(self._exit)

    async def _reap(self) -> int:
        await lifeline.readable(self._process.sentinel)  # the fork server writes the status there
        code = await asyncio.to_thread(self._exitcode)
        self.returncode = code
        self._pipe.close()
        with contextlib.suppress(ValueError):
            self._process.close()
        return code

    def _exitcode(self) -> int:
        with _ONE_AT_A_TIME:
            self._process.join(5.0)
            return 255 if self._process.exitcode is None else self._process.exitcode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def close_pipe(self) -> None:
        """Our end of its pipe: closing it asks the worker to go."""
        self._pipe.close()


async def start(argv: list[str], secret: str, timeout: float) -> tuple[WorkerProcess, int]:
    """A new worker with the command-line arguments `argv` and the pool's secret; returns it
    and its port once it listens. WorkerDidNotStart when it does not within `timeout`."""
    ours, theirs = _CONTEXT.Pipe(duplex=True)
    process = _CONTEXT.Process(
        target=worker.main, args=(argv, secret, theirs), name="agentsession-worker", daemon=True
    )
    try:
        await asyncio.to_thread(_start, process)
    except OSError as exc:
        ours.close()
        raise WorkerDidNotStart(f"the fork server did not fork: {exc!r}") from exc
    finally:
        theirs.close()
    forked = WorkerProcess(process, ours)
    try:
        async with asyncio.timeout(timeout):
            await lifeline.readable(ours.fileno())
        word, port = ours.recv_bytes(256).decode().split()
        if word != WORKER_READY:
            raise ValueError(f"handshake {word!r}")
    except (TimeoutError, ValueError, EOFError, OSError) as exc:
        forked.kill()
        ours.close()
        raise WorkerDidNotStart(repr(exc)) from exc
    return forked, int(port)


def _start(process: BaseProcess) -> None:
    with _ONE_AT_A_TIME:
        process.start()
