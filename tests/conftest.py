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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/integration runs real processes and servers: the slow tier."""
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.slow)
