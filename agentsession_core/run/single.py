"""`run` and `run_blocking`: one run from start-up through one hold, the `agentsession run`
body and the Python API's, whatever its load (this process, or shards)."""

from __future__ import annotations

import logging

from agentsession_core.engine.params import RunParams
from agentsession_core.run.run import DEFAULT_HOLD_S, Run, RunResult, run_on_fresh_loop

log = logging.getLogger("agentsession")


def run_blocking(
    params: RunParams, *, hold_seconds: float = DEFAULT_HOLD_S, live: bool = False
) -> RunResult:
    """`run` on a fresh event loop."""
    return run_on_fresh_loop(run(params, hold_seconds=hold_seconds, live=live))


async def run(
    params: RunParams, *, hold_seconds: float = DEFAULT_HOLD_S, live: bool = False
) -> RunResult:
    """The CLI's run: start-up, then one hold of `hold_seconds`."""
    run = Run(params, live=live)
    async with run:
        if await run.preflight():  # refused: said once; leaving writes the files
            await run.register()
            await run.fill()
            log.info("hold %.0fs", hold_seconds)
            start, end, reason = await run.hold(hold_seconds)
            server = run.load.server
            if server is not None:  # the hold is the steady window of server_summary.json
                await server.cut(start, end, index=0, level=1.0)
            # A load that was not what was asked (a resident set that stayed short) is no
            # "completed" run: its one line is the reason (docs/SPEC.md §4.2).
            reason = reason or run.load.problem()
            run.finish("completed" if reason is None else "failed", reason)
    assert run.result is not None
    return run.result
