"""The built-in scripts as a Markdown table with their budgets, for the docs (docs/guide/
scripts.md holds its output; a test keeps the two the same). Generated from the registry, so
a new or changed built-in shows without anyone editing a table by hand."""

from __future__ import annotations

from agentsession_core.script.model import Script, budget
from agentsession_core.script.quantity import format_duration, format_quantity
from agentsession_core.script.registry import builtin_dir, builtin_names, load_script

COLUMNS = (
    "script",
    "what it is",
    "steps",
    "ops per lap",
    "think per lap",
    "declared RAM",
    "declared disk",
    "min_actor_memory",
)


def description(name: str) -> str:
    """The first sentence of a built-in's header comment, without its `name: ` lead."""
    lines = []
    for line in (builtin_dir() / f"{name}.yaml").read_text(encoding="utf-8").splitlines():
        if not line.startswith("#") or not line.strip("# "):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(lines).removeprefix(f"{name}:").strip()
    sentence = text.split(". ", 1)[0].rstrip(".")
    return sentence[:1].upper() + sentence[1:]


def _size(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.4g} {unit}"
    return f"{size} B"


def _row(name: str, script: Script) -> list[str]:
    declared = budget(script)
    return [
        f"`{name}`",
        description(name),
        str(len(script.steps)),
        str(script.ops_per_lap),
        format_duration(script.think_ns_per_lap),
        _size(declared.ram_bytes),
        _size(declared.disk_bytes),
        format_quantity(script.min_actor_memory),
    ]


def builtin_table() -> str:
    """Every built-in, one row each, in name order (Markdown, ending in a newline)."""
    rows = [_row(name, load_script(name)) for name in builtin_names()]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n"


__all__ = ["builtin_table", "description"]
