"""YAML text → plain data whose mappings and sequences know their lines; duplicate keys are errors.

A script error names its place, and PyYAML's safe_load drops line numbers and silently keeps the
last of two equal keys. Anchors and aliases are refused (NoAliasLoader, also used for parameter
files and `--set` values).
"""

from __future__ import annotations

from typing import Any

import yaml

from agentsession_core.script.errors import ScriptError, show


class _Mapping(dict):
    """A YAML mapping that remembers the line it starts on, for error messages."""

    line: int | None = None
    key_lines: dict[Any, int] | None = None


class _Sequence(list):
    line: int | None = None
    item_lines: list[int] | None = None


class NoAliasLoader(yaml.SafeLoader):
    """safe_load without anchors and aliases, for every file and value a user hands us (scripts,
    parameter files, `--set`). An alias shares a node, so nine nested lists of nine aliases (the
    "billion laughs") describe 10^9 leaves in 1 KiB: anything that walks or prints the value — a
    validator, an error message — never ends (issue #11). Our files have no need for them, so
    they are refused at the first anchor, with its line (docs/SPEC.md §6)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            kind = "alias *" if isinstance(event, yaml.AliasEvent) else "anchor &"
            raise yaml.composer.ComposerError(
                None,
                None,
                f"{kind}{anchor[:40]}: anchors and aliases are not allowed here",
                event.start_mark,
            )
        return super().compose_node(parent, index)


class _Loader(NoAliasLoader):
    """safe_load without aliases, plus: duplicate keys are errors, and containers know their
    line."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> _Mapping:
    loader.flatten_mapping(node)
    result = _Mapping()
    result.line = node.start_mark.line + 1
    first_line: dict[Any, int] = {}
    result.key_lines = first_line
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark
            ) from None
        if key in result:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {show(key)} (first at line {first_line[key]})",
                key_node.start_mark,
            )
        first_line[key] = key_node.start_mark.line + 1
        result[key] = loader.construct_object(value_node, deep=True)
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> _Sequence:
    result = _Sequence(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:seq", _construct_sequence)


def load_yaml(text: str, source: str) -> Any:
    loader = None
    try:
        loader = _Loader(text)
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        detail = " ".join(p for p in (exc.context, exc.problem) if p) or "YAML syntax error"
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "file"
        raise ScriptError(source, where, f"YAML: {detail}") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise ScriptError(
            source, f"line {line}, column {column}", f"YAML: character U+{code:04X} is not allowed"
        ) from None
    except yaml.YAMLError as exc:
        raise ScriptError(source, "file", f"YAML: {exc}") from None
    except RecursionError:
        raise ScriptError(source, "file", "YAML nesting is too deep") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise ScriptError(source, "file", f"YAML: {number_problem(exc)}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if data is None:
        raise ScriptError(source, "file", "empty; a script needs name, min_actor_memory, steps")
    return data


def number_problem(exc: ValueError) -> str:
    """PyYAML's int() of a number too long to read, in one short line."""
    return " ".join(str(exc).split(":")[0].split())[:120] or "a number that cannot be read"


def item_line(items: list, index: int) -> int | None:
    lines = getattr(items, "item_lines", None)
    return lines[index] if lines else None
