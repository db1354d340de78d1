"""Suite-wide guards: no network, no telemetry, no ephemeral Prefect server by accident."""

import os
import tempfile

import pytest

# Set before anything imports Prefect: unless told not to, Prefect starts an ephemeral
# server and sends telemetry, and there is no network here.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_LOGGING_TO_API_ENABLED", "false")
# A Prefect home of its own for each pytest process, unless one is given: xdist's workers
# inherit the controller's environment, and two temporary Prefect APIs (flows/api_server.py)
# on one home would share its database.
_OURS = "AGENTSESSION_TEST_PREFECT_HOME"
if os.environ.get("PREFECT_HOME", os.environ.get(_OURS)) == os.environ.get(_OURS):
    os.environ["PREFECT_HOME"] = os.environ[_OURS] = tempfile.mkdtemp(
        prefix="agentsession-prefect-"
    )
# One directory for the whole session, the xdist workers' too (they inherit it): what the
# slow tier makes once and every worker uses (tests/integration/prefect_home.py).
os.environ.setdefault(
    "AGENTSESSION_TEST_SHARED_DIR", tempfile.mkdtemp(prefix="agentsession-tests-")
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/integration runs real processes and servers: the slow tier;
    its longest modules first (LONGEST_FIRST, below)."""
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.slow)
    longest_first(items)


# The slow tier's longest modules, longest first (seconds of one worker, eight xdist workers
# on two cores beside a paired benchmark, 2026-12-06: test_run_readers 234 s,
# test_hostile_runs 190 s, …). `--dist loadfile` hands modules to the workers in collection
# order, and a long module handed out last is the tier's tail: shuffled into the end, the
# longest one alone ran two minutes past the rest. So these go first (longest-processing-time
# first), each module's tests still in pytest-randomly's shuffled order, and every other
# module after them in its shuffled order.
LONGEST_FIRST = (
    "test_run_readers",
    "test_hostile_runs",
    "test_baseline_accept",
    "test_control_hostile",
    "test_report_browser",
    "test_sharded_run",
    "test_prefect_api_gone",
    "test_worker_pools_cli",
    "test_gate_noise",
    "test_engine_recovery",
    "test_flow_judging",
    "test_signals_in_terminal",
    "test_capacity_search",
    "test_flow_baseline_accept",
    "test_flow_artifacts",
    "test_flow_stops",
    "test_arm_leaks",
    "test_density_search",
    "test_flow_target_limit",
    "test_flow_credentials",
    "test_target_slot_takeover",
    "test_paired_campaign",
    "test_gate_summary",
    "test_capacity_confirmation",
    "test_refusals",
    "test_history",
    "test_paired_shards",
)


def longest_first(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # A stable sort: the other modules, and each module's tests, keep the shuffled order.
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))
