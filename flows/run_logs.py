"""The engine's own log lines (the `agentsession` logger) in the flow run's logs.

Prefect sends only its run loggers' records to the API (`prefect.flow_runs`,
`prefect.task_runs`); the engine's lines — the progress line every 10 s, each window's
verdict, "turnover fill done", the watchdog, cleanup — reached only the console of the
process running the flow (`agentsession serve`'s terminal), and an ad-hoc run opened in the
UI showed "Finished in state Completed()" and little else.

Prefect's `extra_loggers` setting (`PREFECT_LOGGING_EXTRA_LOGGERS=agentsession`) attaches its
API handler to our logger, and for a small campaign it carried the same lines (measured: the
integration test passes with it too). But it is a setting of the process that runs the flow:
a work-pool worker or a `prefect flow-run execute` started without it sends nothing. And its
handler finds the flow run through the run context (contextvars): a line logged where there
is none (a thread that did not copy the context) is dropped with a warning, and a line from a
background task started inside a task run is filed under that task run, long after it ended.
So the flow binds a handler in code: while it runs, every engine record that names no flow
run gets this flow run's id and goes to Prefect's own API handler (batched by its log worker
thread: the engine's loop never waits on the API). Lines that belong to another flow run in
the same process (a library user running two campaigns side by side) are left to that run's
handler. When `extra_loggers` names our logger already, Prefect's handler is kept alone (a
second one would send every line twice). `PREFECT_LOGGING_TO_API_ENABLED=false` still turns it
all off, as it does for Prefect's own lines.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Iterator
from uuid import UUID

from prefect.logging.handlers import APILogHandler

from agentsession_core.logs import LOGGER_NAME


def current_flow_run_id() -> UUID | None:
    """The flow run of the current context (a task run's flow run inside a task)."""
    from prefect.context import FlowRunContext, TaskRunContext

    task = TaskRunContext.get()
    if task is not None:
        return task.task_run.flow_run_id
    flow = FlowRunContext.get()
    return flow.flow_run.id if flow is not None and flow.flow_run is not None else None


class EngineLogHandler(APILogHandler):
    """Prefect's API handler, bound to one flow run."""

    def __init__(self, flow_run_id: UUID) -> None:
        super().__init__()
        self.flow_run_id = flow_run_id
        # The UI shows the time, level and logger beside the message.
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        owner = current_flow_run_id()
        if owner is not None and owner != self.flow_run_id:
            return
        if getattr(record, "flow_run_id", None) is None:
            # A copy: the record also goes to the console and logs.txt handlers.
            record = copy.copy(record)
            record.flow_run_id = self.flow_run_id
        super().emit(record)


@contextlib.contextmanager
def engine_logs_to_flow_run() -> Iterator[None]:
    """Within a flow run, send the `agentsession` logger's records to its logs."""
    logger = logging.getLogger(LOGGER_NAME)
    flow_run_id = current_flow_run_id()
    # Outside a flow run there is nothing to bind to; `extra_loggers` put Prefect's own there.
    prefects = [type(h) for h in logger.handlers if isinstance(h, APILogHandler)]
    if flow_run_id is None or APILogHandler in prefects:
        yield
        return
    handler = EngineLogHandler(flow_run_id)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
