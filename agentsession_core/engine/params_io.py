"""Parameter values from outside: YAML/JSON files and `--set key.path=value` assignments.

Both `agentsession run` and `agentsession campaign` read `--params FILE` and apply `--set`
with these; the model (RunParams, CampaignParams) then validates the result once.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from agentsession_core.errors import UsageError


def load_values(path: str | Path) -> dict[str, Any]:
    """A YAML (or JSON) mapping of parameters."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}{line}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: must be a mapping of parameters")
    return data


def set_path(values: dict[str, Any], key: str, value: Any, *, what: str = "--set") -> None:
    """Assign `value` at the dotted `key` in `values` (in place), making groups as needed."""
    node = values
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise UsageError(f"{what} {key}: {part!r} is not a group of parameters")
        node = child
    node[parts[-1]] = value


def apply_settings(values: dict[str, Any], settings: Iterable[str]) -> dict[str, Any]:
    """`key.path=value` assignments (the value read as YAML) onto a copy of `values`."""
    out = _deep_copy(values)
    for setting in settings:
        key, sep, raw = setting.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--set {setting!r}: expected KEY=VALUE (e.g. population.awake=4)")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            value = raw
        set_path(out, key, value)
    return out


def merge(values: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` onto a copy of `values`, group by group."""
    out = _deep_copy(values)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _deep_copy(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, dict) else v for k, v in values.items()}
