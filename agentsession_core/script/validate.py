"""docs/SPEC.md §1.3's rules, applied to a Script however it was built (decoded or in code)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from agentsession_core.script.errors import ScriptError, quote
from agentsession_core.script.model import (
    ARG_NAMES,
    DISK_READERS,
    DISK_WRITERS,
    OP_ARGS,
    OPTIONAL_ARGS,
    RAM_READERS,
    RAM_WRITERS,
    Op,
    Script,
    Step,
    budget,
)
from agentsession_core.script.quantity import format_duration, format_quantity

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]*")
KEY_PATTERN = re.compile(r"[A-Za-z0-9_-]+")


def validate(
    script: Script,
    source: str = "<script>",
    lines: Mapping[tuple[int, int | None], int] | None = None,
) -> None:
    """docs/SPEC.md §1.3's rules in order; the first violation raises ScriptError."""
    lines = lines or {}
    if not NAME_PATTERN.fullmatch(script.name):
        raise ScriptError(
            source, "name", f"{quote(script.name)} must match ^{NAME_PATTERN.pattern}$"
        )
    if not script.steps:
        raise ScriptError(source, "steps", "a script needs at least one step")

    first_use: dict[str, int] = {}
    for index, step in enumerate(script.steps):
        where = _step_where(index, step)
        line = lines.get((index, None))
        if not step.name.strip():
            raise ScriptError(source, where, "name is not set", line=line)
        if "/" in step.name:
            # A mix's rows put the script's name after a slash (docs/SPEC.md §5.1).
            raise ScriptError(
                source, where, f"name {quote(step.name)} has a '/', which rows reserve", line=line
            )
        if not step.agent.strip():
            raise ScriptError(source, where, "agent is not set", line=line)
        if step.name in first_use:
            raise ScriptError(
                source,
                where,
                f"name {quote(step.name)} is already used by step {first_use[step.name] + 1}",
                line=line,
            )
        first_use[step.name] = index
        if step.think_ns <= 0:
            raise ScriptError(
                source,
                where,
                f"think must be > 0, got {format_duration(step.think_ns)}",
                line=line,
            )
        if not step.ops:
            raise ScriptError(source, where, "has no ops; a step needs at least one", line=line)
        for number, op in enumerate(step.ops):
            problem = _op_problem(op)
            if problem:
                raise ScriptError(
                    source,
                    f"{where}: op {number + 1}",
                    problem,
                    line=lines.get((index, number), line),
                )

    filled: set[str] = set()
    written: set[str] = set()
    for index, step in enumerate(script.steps):
        for number, op in enumerate(step.ops):
            problem = None
            if op.kind in RAM_READERS and op.key not in filled:
                problem = f"{op.kind} of array {quote(op.key)} before any fill_ram"
            elif op.kind in DISK_READERS and op.key not in written:
                problem = f"{op.kind} of file {quote(op.key)} before any ingest or write_disk"
            if problem:
                raise ScriptError(
                    source,
                    f"{_step_where(index, step)}: op {number + 1}",
                    problem,
                    line=lines.get((index, number)),
                )
            if op.kind in RAM_WRITERS:
                filled.add(op.key or "")
            elif op.kind in DISK_WRITERS:
                written.add(op.key or "")

    if script.min_actor_memory <= 0:
        raise ScriptError(source, "min_actor_memory", f"must be > 0, got {script.min_actor_memory}")
    declared = budget(script)
    if script.min_actor_memory < declared.total_bytes:
        raise ScriptError(
            source,
            "min_actor_memory",
            f"{format_quantity(script.min_actor_memory)} ({script.min_actor_memory} bytes) is "
            f"below the declared RAM + disk of {declared.total_bytes} bytes (RAM "
            f"{format_quantity(declared.ram_bytes)} + disk {format_quantity(declared.disk_bytes)};"
            " the data dir is tmpfs)",
        )


def _op_problem(op: Op) -> str | None:
    takes = OP_ARGS[op.kind]
    for name in ARG_NAMES:
        value = getattr(op, name)
        if name not in takes and value is not None:
            return f"{op.kind} takes no {name}" + (
                f" (it takes {', '.join(takes)})" if takes else ""
            )
        if name in takes and value is None and (op.kind, name) not in OPTIONAL_ARGS:
            return f"{op.kind} needs {name}"
    if op.key is not None and not KEY_PATTERN.fullmatch(op.key):
        return f"{op.kind} key {quote(op.key)} must match ^{KEY_PATTERN.pattern}$"
    if op.size is not None and op.size <= 0:
        return f"{op.kind} size must be > 0, got {op.size}"
    if op.millis is not None and op.millis <= 0:
        return f"{op.kind} millis must be > 0, got {op.millis}"
    if op.parallel is not None and op.parallel < 0:
        return f"{op.kind} parallel must be >= 0, got {op.parallel}"
    return None


def _step_where(index: int, step: Step) -> str:
    return f"step {index + 1}" + (f" ({quote(step.name)})" if step.name else "")
