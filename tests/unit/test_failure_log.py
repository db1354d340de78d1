"""FailureLog: the first failure of each code is logged at once, the rest summed up."""

import logging

from agentsession_core.engine.failure_log import FailureLog


def test_a_storm_is_one_line_per_code_and_one_summary(caplog):
    caplog.set_level(logging.WARNING, logger="agentsession")
    flog = FailureLog(interval_s=3600)
    for i in range(500):
        flog.failure("TRANSPORT", f"agent-{i}: step 1 (TRANSPORT: refused)")
    flog.failure("TIMEOUT", "agent-9: step 2 (TIMEOUT)")
    assert [r.getMessage() for r in caplog.records] == [
        "agent-0: step 1 (TRANSPORT: refused)",
        "agent-9: step 2 (TIMEOUT)",
    ]
    flog.summarise(force=True)
    assert "499 more failures" in caplog.records[-1].getMessage()
    assert "TRANSPORT ×499" in caplog.records[-1].getMessage()
    flog.failure("TRANSPORT", "agent-1: again")  # a new interval logs the first one again
    assert caplog.records[-1].getMessage() == "agent-1: again"
