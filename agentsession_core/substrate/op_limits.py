"""The per-op caps a substrate states with its template (docs/SPEC.md §2.1, §2.5), and the
preflight check of a script against them (§3.1).

A substrate that caps what one op may ask (the local substrate's `--max-op-size`,
`--max-burn-millis`, `--max-parallel`) refuses a larger op with INVALID_ARGUMENT on every
attempt; stated up front, preflight refuses the run in one line instead of letting every step
fail. A substrate that states no caps is not checked.

Both wires carry the same JSON object: the `op_limits` field of the JSON wire's GetTemplate
answer, and the `x-agentsession-op-limits` trailer of the ate wire's GetActorTemplate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from agentsession_core.script import Script
from agentsession_core.script.quantity import format_quantity
from agentsession_core.substrate.errors import BAD_BODY, SubstrateError

OP_LIMITS_FIELD = "op_limits"
OP_LIMITS_TRAILER = "x-agentsession-op-limits"
_FIELDS = ("max_op_bytes", "max_burn_millis", "max_parallel")


@dataclass(frozen=True, slots=True)
class OpLimits:
    """None: that cap is not stated."""

    max_op_bytes: int | None = None  # fill_ram, churn_ram, write_disk, ingest: op.size
    max_burn_millis: int | None = None  # burn_cpu: op.millis
    max_parallel: int | None = None  # burn_cpu: op.parallel

    def to_json(self) -> dict[str, int]:
        return {name: value for name in _FIELDS if (value := getattr(self, name)) is not None}

    def to_text(self) -> str:
        return orjson.dumps(self.to_json()).decode()

    @classmethod
    def from_json(cls, value: Any) -> OpLimits | None:
        """The caps from the wire's object (None or absent: none stated). A malformed object
        is BAD_BODY: a cap misread could refuse a good run."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise SubstrateError(BAD_BODY, f"{OP_LIMITS_FIELD}: not an object: {value!r:.80}")
        caps: dict[str, int] = {}
        for name in _FIELDS:
            cap = value.get(name)
            if cap is None:
                continue
            if not isinstance(cap, int) or isinstance(cap, bool) or cap < 0:
                raise SubstrateError(BAD_BODY, f"{OP_LIMITS_FIELD}.{name} {cap!r}: not a count")
            caps[name] = cap
        return cls(**caps) if caps else None

    @classmethod
    def from_text(cls, text: str) -> OpLimits | None:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise SubstrateError(BAD_BODY, f"{OP_LIMITS_TRAILER}: not JSON: {text!r:.80}") from None
        return cls.from_json(value)


def over_limits(script: Script, limits: OpLimits) -> str | None:
    """The first op of `script` the caps refuse, as one line naming the step, the op and the
    cap; None when every op fits."""
    for step in script.steps:
        for index, op in enumerate(step.ops, start=1):
            at = f"script {script.name} step {step.name} op {index} {op.kind}"
            cap = limits.max_op_bytes
            if op.size is not None and cap is not None and op.size > cap:
                return (
                    f"{at} size {format_quantity(op.size)} is above the target's per-op cap "
                    f"of {format_quantity(cap)}"
                )
            cap = limits.max_burn_millis
            if op.kind == "burn_cpu" and op.millis is not None and cap is not None:
                if op.millis > cap:
                    return f"{at} millis {op.millis} is above the target's cap of {cap} ms"
            cap = limits.max_parallel
            if op.kind == "burn_cpu" and op.parallel is not None and cap is not None:
                if op.parallel > cap:
                    return f"{at} parallel {op.parallel} is above the target's cap of {cap}"
    return None
