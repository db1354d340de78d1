"""`agentsession scripts …`: list, show, validate and encode session scripts."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agentsession_core.script import (
    Script,
    ScriptError,
    budget,
    builtin_names,
    encode,
    load_script,
)
from agentsession_core.script.quantity import format_duration, format_quantity


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("scripts", help="list, show, validate and encode scripts")
    commands = group.add_subparsers(dest="scripts_command", metavar="SUBCOMMAND")
    group.set_defaults(handler=lambda args: _usage(group))

    listing = commands.add_parser("list", help="the built-in scripts")
    listing.set_defaults(handler=list_builtins)

    show = commands.add_parser("show", help="summarize one script")
    show.add_argument("script", metavar="NAME_OR_PATH")
    show.add_argument("--json", action="store_true", help="one JSON object on stdout")
    show.set_defaults(handler=show_script)

    validate = commands.add_parser("validate", help="check script files")
    validate.add_argument("paths", metavar="PATH", nargs="+")
    validate.set_defaults(handler=validate_files)

    encode_cmd = commands.add_parser("encode", help="print the canonical YAML")
    encode_cmd.add_argument("script", metavar="NAME_OR_PATH")
    encode_cmd.set_defaults(handler=encode_script)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def list_builtins(args: argparse.Namespace) -> int:
    rows = [(name, load_script(name)) for name in builtin_names()]
    width = max((len(name) for name, _ in rows), default=0)
    for name, script in rows:
        print(
            f"{name:<{width}}  {len(script.steps):>3} steps  "
            f"min_actor_memory {format_quantity(script.min_actor_memory)}"
        )
    return 0


def summary(script: Script) -> dict[str, Any]:
    declared = budget(script)
    think = script.think_ns_per_lap / 1e9
    return {
        "name": script.name,
        "steps": len(script.steps),
        "ops_per_lap": script.ops_per_lap,
        "declared_ram_bytes": declared.ram_bytes,
        "declared_disk_bytes": declared.disk_bytes,
        "min_actor_memory_bytes": script.min_actor_memory,
        "think_seconds_per_lap": int(think) if think.is_integer() else think,
        "step_names": [step.name for step in script.steps],
    }


def show_script(args: argparse.Namespace) -> int:
    script = load_script(args.script)
    if args.json:
        print(json.dumps(summary(script)))
        return 0
    declared = budget(script)
    print(f"{script.name}: {len(script.steps)} steps, {script.ops_per_lap} ops per lap")
    print(
        f"  min_actor_memory {format_quantity(script.min_actor_memory)}; declared RAM "
        f"{_size(declared.ram_bytes)}, disk {_size(declared.disk_bytes)}; think per lap "
        f"{format_duration(script.think_ns_per_lap)}"
    )
    width = max(len(step.name) for step in script.steps)
    for number, step in enumerate(script.steps, 1):
        ops = "; ".join(_op_text(op) for op in step.ops)
        print(f"  {number:>3}  {step.name:<{width}}  {format_duration(step.think_ns):>7}  {ops}")
    return 0


def validate_files(args: argparse.Namespace) -> int:
    status = 0
    for path in args.paths:
        try:
            script = load_script(path)
        except ScriptError as exc:
            print(f"agentsession: {exc}", file=sys.stderr)
            status = 1
            continue
        declared = budget(script)
        print(
            f"ok {path}: {script.name}, {len(script.steps)} steps, {script.ops_per_lap} ops "
            f"per lap, RAM {_size(declared.ram_bytes)}, disk {_size(declared.disk_bytes)}, "
            f"min_actor_memory {format_quantity(script.min_actor_memory)}"
        )
    return status


def encode_script(args: argparse.Namespace) -> int:
    sys.stdout.write(encode(load_script(args.script)))
    return 0


def _size(size: int) -> str:
    """Readable rather than canonical: 98.5Mi, not 100864Ki."""
    for unit, scale in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if size >= scale:
            return f"{size / scale:.4g}{unit}"
    return f"{size}B"


def _op_text(op: Any) -> str:
    if op.kind == "burn_cpu":
        return f"burn_cpu {op.millis}ms ×{op.parallel}"
    if op.kind == "dwell":
        return f"dwell {op.millis}ms"
    parts = [op.kind]
    if op.key is not None:
        parts.append(op.key)
    if op.size is not None:
        parts.append(format_quantity(op.size))
    return " ".join(parts)
