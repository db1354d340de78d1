"""Command-line flags generated from a parameter model (RunParams).

Every leaf of the model — a field that is not itself a section — gets one flag: `--leaf-name`
(underscores become dashes), or the spellings its `Flag(...)` metadata gives. The help is the
field's description and default, choices come from a Literal type, and the value is passed on
as text for the model to parse and validate (errors name the dotted path). Two leaves that
would share a flag are refused when the parser is built.
"""

from __future__ import annotations

import argparse
import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from agentsession_core.engine.params import DURATION, Flag
from agentsession_core.engine.params_io import set_path


@dataclass(frozen=True)
class Leaf:
    path: str  # dotted: "population.awake"
    field: FieldInfo
    flags: tuple[str, ...]

    @property
    def dest(self) -> str:
        return "param:" + self.path


def leaves(model: type[BaseModel], prefix: str = "") -> list[Leaf]:
    """Every leaf of `model`, sections walked in field order. A section that is one of
    several models (the population's kinds) gives their shared base's leaves, then each
    member's own, once each: a flag of another kind is the model's to refuse."""
    found: list[Leaf] = []
    for name, field in _fields(model):
        path = f"{prefix}{name}"
        section = _section(field.annotation)
        if section is not None:
            found.extend(leaves(section, f"{path}."))
            continue
        members = _members(field.annotation)
        if members:
            found.extend(_union_leaves(members, f"{path}."))
            continue
        found.append(_leaf(path, name, field))
    return found


def _fields(model: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    return list(model.model_fields.items())


def _leaf(path: str, name: str, field: FieldInfo) -> Leaf:
    marked = [m for m in field.metadata if isinstance(m, Flag)]
    flags = marked[0].names if marked else ("--" + name.replace("_", "-"),)
    return Leaf(path, field, flags)


def _union_leaves(members: list[type[BaseModel]], prefix: str) -> list[Leaf]:
    base = next(c for c in members[0].__mro__ if all(issubclass(m, c) for m in members))
    found = {name: _leaf(prefix + name, name, field) for name, field in _fields(base)}
    for member in members:
        for name, field in _fields(member):
            if name not in found:
                owners = [m for m in members if name in m.model_fields]
                found[name] = _leaf(prefix + name, name, _owned(name, field, owners))
    return list(found.values())


def _owned(name: str, field: FieldInfo, owners: list[type[BaseModel]]) -> FieldInfo:
    """`field` with the kinds that have it before its description (the flag's help):
    `turnover, cold-resume: …`, or each kind's own where their descriptions differ."""
    said: dict[str, list[str]] = {}
    for model in owners:
        title = str(model.model_config.get("title") or model.__name__)
        said.setdefault(model.model_fields[name].description or "", []).append(title)
    text = "; ".join(f"{', '.join(kinds)}: {description}" for description, kinds in said.items())
    return FieldInfo.merge_field_infos(field, description=text)


def _members(annotation: Any) -> list[type[BaseModel]]:
    """The models of a union of models (a discriminated section), else none."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) > 1 and all(_section(m) is not None for m in members):
            return members
    return []


def add_model_flags(parser: argparse.ArgumentParser, model: type[BaseModel]) -> list[Leaf]:
    """One flag per leaf of `model`, in one argument group per section."""
    all_leaves = leaves(model)
    owner: dict[str, str] = {}
    for leaf in all_leaves:
        for flag in leaf.flags:
            if flag in owner:
                raise ValueError(
                    f"{flag} would set both {owner[flag]} and {leaf.path}: "
                    "give one of them a Flag(...)"
                )
            owner[flag] = leaf.path
    groups: dict[str, Any] = {}
    for leaf in all_leaves:
        section = leaf.path.rpartition(".")[0] or "run"
        if section not in groups:
            groups[section] = parser.add_argument_group(f"{section} parameters")
        groups[section].add_argument(*leaf.flags, dest=leaf.dest, default=None, **_options(leaf))
    return all_leaves


def flag_values(args: argparse.Namespace, all_leaves: list[Leaf]) -> dict[str, Any]:
    """The flags given on the command line, as nested parameter values."""
    values: dict[str, Any] = {}
    for leaf in all_leaves:
        value = getattr(args, leaf.dest, None)
        if value is not None:
            set_path(values, leaf.path, value, what=leaf.flags[0])
    return values


def _options(leaf: Leaf) -> dict[str, Any]:
    field = leaf.field
    duration = any(m is DURATION for m in field.metadata)
    text = (field.description or leaf.path).replace("%", "%%")
    # A default_factory field (a list) has no default to print: PydanticUndefined.
    if field.default not in (None, PydanticUndefined) and not field.is_required():
        text += f" (default: {field.default:g}s)" if duration else f" (default: {field.default})"
    options: dict[str, Any] = {"help": text}
    choices = _literal(field.annotation)
    if choices is not None:
        options["choices"] = choices
    elif duration:
        options["metavar"] = "DURATION"
    else:
        options["metavar"] = _METAVAR.get(_plain(field.annotation), "TEXT")
    return options


_METAVAR = {int: "N", float: "X"}


def _plain(annotation: Any) -> Any:
    """`T | None` -> T."""
    if get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        return options[0] if len(options) == 1 else annotation
    return annotation


def _section(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _literal(annotation: Any) -> list[str] | None:
    annotation = _plain(annotation)
    if get_origin(annotation) is Literal:
        return [str(a) for a in get_args(annotation)]
    return None
