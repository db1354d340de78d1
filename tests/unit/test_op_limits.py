"""The per-op caps a substrate states, read from the wire and checked against a script."""

from __future__ import annotations

import pytest

from agentsession_core.script import load_script
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.op_limits import OpLimits, over_limits


def test_the_wire_object_round_trips_and_absent_caps_are_none() -> None:
    caps = OpLimits(max_op_bytes=256 << 20, max_burn_millis=60_000, max_parallel=16)
    assert OpLimits.from_text(caps.to_text()) == caps
    assert OpLimits.from_json({"max_parallel": 4}) == OpLimits(max_parallel=4)
    assert OpLimits.from_json(None) is None and OpLimits.from_json({}) is None


@pytest.mark.parametrize("bad", [[1], {"max_op_bytes": "1Mi"}, {"max_parallel": True}])
def test_a_malformed_object_is_a_bad_body(bad: object) -> None:
    with pytest.raises(SubstrateError, match="BAD_BODY"):
        OpLimits.from_json(bad)


def test_the_first_op_over_a_cap_is_named_with_its_step() -> None:
    smoke = load_script("smoke")  # fill_ram 64Ki first, burn_cpu 20 ms × 2 in step 03
    assert over_limits(smoke, OpLimits(max_op_bytes=64 << 10, max_parallel=2)) is None
    assert over_limits(smoke, OpLimits(max_op_bytes=32 << 10)) == (
        "script smoke step 01_start op 1 fill_ram size 64Ki is above the target's per-op cap "
        "of 32Ki"
    )
    assert "step 03_work op 2 burn_cpu parallel 2" in str(
        over_limits(smoke, OpLimits(max_parallel=1))
    )
    assert "millis 20 is above the target's cap of 10 ms" in str(
        over_limits(smoke, OpLimits(max_burn_millis=10))
    )
