"""`baseline: auto` through the Prefect campaign flow reads an acceptance as the command line
does (docs/SPEC.md §6.3): a baseline night and a slower night that failed against it (the
standalone local substrate's `wake:latency` fault, as in test_baseline_accept.py), the slower
one accepted with `agentsession baseline accept`; then the campaign flow, under Prefect's test
harness, runs a third night as slow with `baseline: auto`: it is compared with the accepted
night alone and passes, and the verdict event says so.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from local_substrate.launcher import LocalSubstrate
from tests.integration import flow_harness
from tests.integration.flow_harness import TEST_TIMEOUT_S, run_flow, verdict_events
from tests.integration.test_baseline_accept import (
    REASON,
    SLOW_WAKE,
    command,
    night,
    params,
    values,
)

pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)
prefect_api = flow_harness.prefect_api  # this module's own Prefect API


async def test_the_flow_compares_only_from_the_accepted_night_on(prefect_api, tmp_path: Path):
    out = tmp_path / "art"
    async with LocalSubstrate(workers=6, store=tmp_path / "store") as sub:
        base = await night(params(sub, out, "base", dest=None, endpoint=None))
        await sub.set_faults([SLOW_WAKE])
        slower = await night(params(sub, out, "slower", dest=None, endpoint=None))
        assert base["gate"]["verdict"] == "pass", base["gate"]["reason"]
        assert slower["gate"]["verdict"] == "fail", slower["gate"]["reason"]
        done = command("baseline", "accept", slower["location"], "--reason", REASON)
        assert done.returncode == 0, done.stderr
        state = await run_flow(values(sub, out, "flow", dest=None, endpoint=None))
    assert state.is_completed(), state
    result = await state.result()
    gate = orjson.loads((Path(result["run_dir"]) / "gate.json").read_bytes())
    stored = gate["baseline"]
    assert result["verdict"] == gate["verdict"] == "pass", result["reason"]
    assert stored["status"] == "compared" and stored["locations"] == [slower["location"]]
    statuses = {m["metric"]: m["status"] for m in stored["metrics"]}
    assert statuses["TimeToWake.p50"] == "unchanged", stored["metrics"]
    (event,) = await verdict_events("accepting", result["run_dir"])
    assert event.payload["verdict"] == "pass" and event.payload["regressions"] == []
