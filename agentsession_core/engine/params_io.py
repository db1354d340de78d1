"""Parameter values from outside: YAML/JSON files and `--set key.path=value` assignments.

Both `agentsession run` and `agentsession campaign` read `--params FILE` and apply `--set`
with these; the model (RunParams, CampaignParams) then validates the result once. Hostile
text is refused in one line before anything starts: files over 1 MiB, YAML anchors and
aliases (a "billion laughs" bomb), numbers too long to read, nesting too deep.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from agentsession_core.errors import UsageError
from agentsession_core.script.yaml_places import NoAliasLoader, number_problem

MAX_PARAMS_BYTES = 1024 * 1024
# What PyYAML itself can raise on hostile text: an integer of over 4300 digits
# (ValueError), nesting deeper than the interpreter's stack (RecursionError).
_BAD_VALUE = (ValueError, RecursionError)


def load_values(path: str | Path) -> dict[str, Any]:
    """A YAML (or JSON) mapping of parameters: at most 1 MiB, no anchors or aliases."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_PARAMS_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_PARAMS_BYTES:
        raise UsageError(f"{path}: over the {MAX_PARAMS_BYTES // 2**20} MiB limit for parameters")
    try:
        data = _yaml(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (offset {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}{line}: not valid YAML{_problem(exc)}") from None
    except _BAD_VALUE as exc:
        raise UsageError(f"{path}: {_bad_value(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: must be a mapping of parameters")
    return data


def _yaml(text: str) -> Any:
    """safe_load without anchors and aliases (a YAML bomb is refused, never expanded)."""
    return yaml.load(text, Loader=NoAliasLoader)  # a SafeLoader: no arbitrary objects


def _problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    return f" ({' '.join(str(problem).split())[:120]})" if problem else ""


def _bad_value(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "YAML nesting is too deep"
    assert isinstance(exc, ValueError)
    return f"YAML: {number_problem(exc)}"


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
            value = _yaml(raw) if raw.strip() else None
        except yaml.composer.ComposerError as exc:  # an anchor or alias: never expanded
            raise UsageError(f"--set {key}: {exc.problem}") from None
        except yaml.YAMLError:
            value = raw
        except _BAD_VALUE as exc:
            raise UsageError(f"--set {key}: {_bad_value(exc)}") from None
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
