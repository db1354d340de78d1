"""ScriptError and the helpers that put values into its one-line messages."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentsession_core.errors import AgentsessionError


class ScriptError(AgentsessionError):
    """Any problem with a script. The message is one line:
    `<source>: <where>: <detail>[ (line N)]`, where `where` is a step/op, a field, a YAML
    position (`line L, column C`) or `file`."""

    def __init__(self, source: str, where: str, detail: str, *, line: int | None = None) -> None:
        self.source, self.where, self.detail, self.line = source, where, detail, line
        suffix = f" (line {line})" if line is not None and not where.startswith("line ") else ""
        message = f"{source}: {where}: {detail}{suffix}"
        one_line = len(message.splitlines()) <= 1
        super().__init__(message if one_line else " ".join(message.split()))


def quote(text: str | None) -> str:
    return json.dumps(text, ensure_ascii=False)


def show(value: Any) -> str:
    """A value for an error message: short, one line, never a big structure's repr."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return quote(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, bool | int | float):
        text = repr(value)
        return f"{type(value).__name__} {text if len(text) <= 30 else text[:27] + '...'}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
