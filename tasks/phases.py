"""Start-up phases on the long-lived Run: preflight, register, fill.

Each task only awaits the engine; the Run (sessions, connections, recorder) outlives them.
No caching: a benchmark phase is never served from a cache. No retries: re-running a phase
would create actors twice or change what is measured.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from agentsession_core.run.run import Run
from tasks.steps import Steps


@task(name="preflight", cache_policy=NO_CACHE, persist_result=False)
async def preflight(run: Run, steps: Steps) -> bool:
    """The template can hold the script (memory check); the substrate answers. False when
    the run was refused: the Run recorded and logged the reason once, and the task still
    completes (a refusal is a verdict, void, not a task failure with a traceback)."""
    return await steps.once("preflight", run.preflight)


@task(name="register", cache_policy=NO_CACHE, persist_result=False)
async def register(run: Run, steps: Steps) -> None:
    await steps.once("register", run.register)


@task(name="fill", cache_policy=NO_CACHE, persist_result=False)
async def fill(run: Run, steps: Steps) -> None:
    await steps.once("fill", run.fill)
