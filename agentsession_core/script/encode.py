"""Encoding a Script back to the canonical YAML of docs/SPEC.md §1.4."""

from __future__ import annotations

import re

import yaml

from agentsession_core.script.model import OP_ARGS, Script
from agentsession_core.script.quantity import format_duration, format_quantity


def encode(script: Script) -> str:
    """The canonical YAML of docs/SPEC.md §1.4; `decode(encode(s)) == s` and encoding is stable."""
    out = [
        f"name: {_yaml_str(script.name)}",
        f"min_actor_memory: {format_quantity(script.min_actor_memory)}",
        "steps:",
    ]
    for step in script.steps:
        out += [
            f"  - name: {_yaml_str(step.name)}",
            f"    agent: {_yaml_str(step.agent)}",
            f"    think: {format_duration(step.think_ns)}",
            "    ops:",
        ]
        for op in step.ops:
            args = []
            for name in OP_ARGS[op.kind]:
                value = getattr(op, name)
                if value is None:
                    continue
                if name == "size":
                    value = format_quantity(value)
                elif name == "key":
                    value = _yaml_str(value)
                args.append(f"{name}: {value}")
            out.append(f"      - {op.kind}: {{{', '.join(args)}}}")
    return "\n".join(out) + "\n"


_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_ .,;()'/+-]*")


def _yaml_str(text: str) -> str:
    """Plain when YAML reads it back as the same string, else double-quoted."""
    if _PLAIN.fullmatch(text) and not text.endswith(" "):
        try:
            if yaml.safe_load(text) == text:
                return text
        except yaml.YAMLError:
            pass
    escaped = []
    for char in text:
        if char in '"\\':
            escaped.append("\\" + char)
        elif char.isprintable() and char not in "\u2028\u2029\ufeff":
            escaped.append(char)
        elif ord(char) <= 0xFFFF:
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(f"\\U{ord(char):08x}")
    return '"' + "".join(escaped) + '"'
