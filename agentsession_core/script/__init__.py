"""Session scripts (docs/SPEC.md §1): the models, strict decoding, validation, encoding, the budget
and the built-in registry.

A script is decoded in three stages, each of which can only raise ScriptError:
  1. bytes → text (size cap, binary, UTF-8),
  2. text → plain data (YAML safe load; duplicate keys and syntax errors carry line and
     column),
  3. data → models (strict: unknown fields, multi-key ops and wrong types are errors),
then `validate` applies the rules of §1.3 in order, first violation wins.

Durations are whole nanoseconds (`Step.think_ns`); `Step.think_seconds` is the float view.
Loading reads files synchronously: call it from a thread inside an event loop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, model_validator

from agentsession_core.errors import AgentsessionError
from agentsession_core.script.quantity import (
    QuantityError,
    format_duration,
    format_quantity,
    parse_duration,
    parse_quantity,
)

MAX_SCRIPT_BYTES = 1024 * 1024
# Aliases can make a 1 MiB file describe a huge lap; these caps keep loading cheap.
MAX_STEPS = 10_000
MAX_OPS_PER_LAP = 100_000

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]*")
KEY_PATTERN = re.compile(r"[A-Za-z0-9_-]+")

OpKind = Literal[
    "ping",
    "fill_ram",
    "churn_ram",
    "walk_ram",
    "ingest",
    "write_disk",
    "read_disk_digest",
    "read_disk_data",
    "burn_cpu",
    "dwell",
]
# The arguments each kind takes, in the order encode writes them. All are required except
# burn_cpu's parallel (default 1).
OP_ARGS: dict[str, tuple[str, ...]] = {
    "ping": (),
    "fill_ram": ("key", "size"),
    "churn_ram": ("key", "size"),
    "walk_ram": ("key",),
    "ingest": ("key", "size"),
    "write_disk": ("key", "size"),
    "read_disk_digest": ("key",),
    "read_disk_data": ("key",),
    "burn_cpu": ("millis", "parallel"),
    "dwell": ("millis",),
}
OPTIONAL_ARGS = {("burn_cpu", "parallel")}
ARG_NAMES = ("key", "size", "millis", "parallel")
_RAM_WRITERS = {"fill_ram"}
_RAM_READERS = {"churn_ram", "walk_ram"}
_DISK_WRITERS = {"ingest", "write_disk"}
_DISK_READERS = {"read_disk_digest", "read_disk_data"}
_SCRIPT_FIELDS = ("name", "min_actor_memory", "steps")
_STEP_FIELDS = ("name", "agent", "think", "ops")


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


# Scalars are strict (no "5" → 5); sequences accept lists and are stored as tuples so that
# a script is hashable.
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Op(BaseModel):
    model_config = _FROZEN

    kind: OpKind
    key: StrictStr | None = None
    size: StrictInt | None = None  # bytes
    millis: StrictInt | None = None
    parallel: StrictInt | None = None  # burn_cpu only; 0 and absent both mean 1

    @model_validator(mode="before")
    @classmethod
    def _parallel_defaults_to_one(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("kind") == "burn_cpu":
            if data.get("parallel") in (None, 0):
                data = {**data, "parallel": 1}
        return data


class Step(BaseModel):
    model_config = _FROZEN

    name: StrictStr
    agent: StrictStr
    think_ns: StrictInt
    ops: tuple[Op, ...]

    @property
    def think_seconds(self) -> float:
        return self.think_ns / 1e9


class Script(BaseModel):
    model_config = _FROZEN

    name: StrictStr
    min_actor_memory: StrictInt  # bytes
    steps: tuple[Step, ...]

    @property
    def ops_per_lap(self) -> int:
        return sum(len(step.ops) for step in self.steps)

    @property
    def think_ns_per_lap(self) -> int:
        return sum(step.think_ns for step in self.steps)

    @property
    def think_seconds_per_lap(self) -> float:
        return self.think_ns_per_lap / 1e9


@dataclass(frozen=True)
class Budget:
    """What a script declares it holds in an actor (docs/SPEC.md §1.3)."""

    ram_bytes: int
    disk_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.ram_bytes + self.disk_bytes


def budget(script: Script) -> Budget:
    """RAM: Σ over keys of the largest fill_ram; disk: Σ over keys of the largest
    ingest/write_disk. Other ops add nothing."""
    ram: dict[str, int] = {}
    disk: dict[str, int] = {}
    for step in script.steps:
        for op in step.ops:
            held = ram if op.kind in _RAM_WRITERS else disk if op.kind in _DISK_WRITERS else None
            if held is not None and op.key is not None and op.size is not None:
                held[op.key] = max(held.get(op.key, 0), op.size)
    return Budget(ram_bytes=sum(ram.values()), disk_bytes=sum(disk.values()))


# ---------------------------------------------------------------------------------- decode


def decode(text: str | bytes, source: str) -> Script:
    """Decode and validate one script; every problem is a ScriptError naming its place."""
    data = _load_yaml(_as_text(text, source), source)
    decoder = _Decoder(source)
    script = decoder.script(data)
    validate(script, source, decoder.lines)
    return script


def _as_text(text: str | bytes, source: str) -> str:
    size = len(text)
    if size > MAX_SCRIPT_BYTES:
        unit = "bytes" if isinstance(text, bytes) else "characters"
        raise ScriptError(
            source,
            "file",
            f"{size} {unit} is over the {MAX_SCRIPT_BYTES // 2**20} MiB limit for a script",
        )
    if isinstance(text, bytes):
        nul = text.find(b"\0")
        if nul >= 0:
            raise ScriptError(
                source,
                "file",
                f"binary data (NUL byte at offset {nul}); a script is YAML text",
                line=text.count(b"\n", 0, nul) + 1,
            )
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScriptError(
                source,
                "file",
                f"not UTF-8 text (byte 0x{text[exc.start]:02x} at offset {exc.start})",
                line=text.count(b"\n", 0, exc.start) + 1,
            ) from None
    return text.removeprefix("\ufeff")


class _Mapping(dict):
    """A YAML mapping that remembers the line it starts on, for error messages."""

    line: int | None = None
    key_lines: dict[Any, int] | None = None


class _Sequence(list):
    line: int | None = None
    item_lines: list[int] | None = None


class _Loader(yaml.SafeLoader):
    """safe_load, plus: duplicate keys are errors, and containers know their line."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> _Mapping:
    loader.flatten_mapping(node)
    result = _Mapping()
    result.line = node.start_mark.line + 1
    result.key_lines = first_line = {}
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
                f"duplicate key {_show(key)} (first at line {first_line[key]})",
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


def _load_yaml(text: str, source: str) -> Any:
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
    finally:
        if loader is not None:
            loader.dispose()
    if data is None:
        raise ScriptError(source, "file", "empty; a script needs name, min_actor_memory, steps")
    return data


def _item_line(items: list, index: int) -> int | None:
    lines = getattr(items, "item_lines", None)
    return lines[index] if lines else None


class _Decoder:
    """Plain YAML data → models. Only types and shapes are checked here; `validate` owns
    the rules of docs/SPEC.md §1.3 so that scripts built in code get the same checks."""

    def __init__(self, source: str) -> None:
        self.source = source
        # (step index, op index or None) → line, for validation messages.
        self.lines: dict[tuple[int, int | None], int] = {}

    def fail(
        self, where: str, detail: str, node: Any = None, field: Any = None, line: int | None = None
    ) -> ScriptError:
        line = getattr(node, "line", line)
        key_lines = getattr(node, "key_lines", None)
        if field is not None and key_lines and field in key_lines:
            line = key_lines[field]
        return ScriptError(self.source, where, detail, line=line)

    def script(self, data: Any) -> Script:
        if not isinstance(data, Mapping):
            raise self.fail(
                "top level",
                f"expected a mapping with {', '.join(_SCRIPT_FIELDS)}, got {_show(data)}",
                data,
            )
        self.fields(data, _SCRIPT_FIELDS, "top level", required=_SCRIPT_FIELDS)
        name = data["name"]
        if not isinstance(name, str):
            raise self.fail("name", f"expected a string, got {_show(name)}", data, "name")
        try:
            memory = parse_quantity(data["min_actor_memory"])
        except QuantityError as exc:
            raise self.fail("min_actor_memory", str(exc), data, "min_actor_memory") from None
        steps = data["steps"]
        if steps is None:
            steps = []
        if not isinstance(steps, list):
            raise self.fail("steps", f"expected a list of steps, got {_show(steps)}", data, "steps")
        if len(steps) > MAX_STEPS:
            raise self.fail("steps", f"{len(steps)} steps is over the limit of {MAX_STEPS}", steps)
        ops_seen = sum(
            len(s["ops"])
            for s in steps
            if isinstance(s, Mapping) and isinstance(s.get("ops"), list)
        )
        if ops_seen > MAX_OPS_PER_LAP:
            raise self.fail(
                "steps", f"{ops_seen} ops per lap is over the limit of {MAX_OPS_PER_LAP}", steps
            )
        decoded = tuple(
            self.step(index, raw, _item_line(steps, index)) for index, raw in enumerate(steps)
        )
        return Script(name=name, min_actor_memory=memory, steps=decoded)

    def fields(
        self, data: Mapping, known: tuple[str, ...], where: str, required: tuple[str, ...] = ()
    ) -> None:
        for field in data:
            if field not in known:
                raise self.fail(
                    where,
                    f"unknown field {_show(field)} (known: {', '.join(known)})",
                    data,
                    field,
                )
        for field in required:
            if field not in data:
                raise self.fail(where, f"missing field {field}", data)

    def step(self, index: int, raw: Any, line: int | None) -> Step:
        where = f"step {index + 1}"
        if isinstance(raw, Mapping) and isinstance(raw.get("name"), str) and raw["name"]:
            where += f" ({_quote(raw['name'])})"
        if not isinstance(raw, Mapping):
            raise self.fail(
                where,
                f"expected a mapping with {', '.join(_STEP_FIELDS)}, got {_show(raw)}",
                line=line,
            )
        self.lines[(index, None)] = getattr(raw, "line", None) or line or 0
        self.fields(raw, _STEP_FIELDS, where, required=("think",))
        texts = {}
        for field in ("name", "agent"):
            value = raw.get(field)
            if value is not None and not isinstance(value, str):
                raise self.fail(
                    where, f"{field}: expected a string, got {_show(value)}", raw, field
                )
            texts[field] = value or ""
        try:
            think = raw["think"]
            # YAML reads a bare 0 as an int; Go spells it "0", so let the think rule judge it.
            think = parse_duration("0" if think == 0 and type(think) is int else think)
        except QuantityError as exc:
            raise self.fail(where, f"think: {exc}", raw, "think") from None
        ops = raw.get("ops")
        if ops is None:
            ops = []
        if not isinstance(ops, list):
            raise self.fail(where, f"ops: expected a list of ops, got {_show(ops)}", raw, "ops")
        decoded = tuple(
            self.op(index, where, number, item, _item_line(ops, number))
            for number, item in enumerate(ops)
        )
        return Step(name=texts["name"], agent=texts["agent"], think_ns=think, ops=decoded)

    def op(self, step_index: int, step_where: str, index: int, raw: Any, line: int | None) -> Op:
        where = f"{step_where}: op {index + 1}"
        if line is not None:
            self.lines[(step_index, index)] = line
        if not isinstance(raw, Mapping) or len(raw) != 1:
            got = f"{len(raw)} keys" if isinstance(raw, Mapping) else _show(raw)
            raise self.fail(
                where,
                f"an op is a mapping with exactly one key (the kind), got {got}",
                raw,
                line=line,
            )
        ((kind, args),) = raw.items()
        if kind not in OP_ARGS:
            raise self.fail(
                where,
                f"unknown op kind {_show(kind)} (known: {', '.join(OP_ARGS)})",
                raw,
                line=line,
            )
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise self.fail(
                where, f"{kind}: expected a mapping of arguments, got {_show(args)}", raw, line=line
            )
        values: dict[str, Any] = {"kind": kind}
        for name, value in args.items():
            if name not in ARG_NAMES:
                takes = ", ".join(OP_ARGS[kind]) or "nothing"
                raise self.fail(
                    where,
                    f"{kind}: unknown argument {_show(name)} ({kind} takes {takes})",
                    raw,
                    line=line,
                )
            values[name] = self.argument(where, kind, name, value, line)
        return Op(**values)

    def argument(self, where: str, kind: str, name: str, value: Any, line: int | None) -> Any:
        if name == "size":
            try:
                return parse_quantity(value)
            except QuantityError as exc:
                raise self.fail(where, f"{kind} size: {exc}", line=line) from None
        expected: type = str if name == "key" else int
        if isinstance(value, bool) or not isinstance(value, expected):
            raise self.fail(
                where,
                f"{kind} {name}: expected {'a string' if expected is str else 'an integer'}"
                f", got {_show(value)}",
                line=line,
            )
        return value


# -------------------------------------------------------------------------------- validate


def validate(
    script: Script,
    source: str = "<script>",
    lines: Mapping[tuple[int, int | None], int] | None = None,
) -> None:
    """docs/SPEC.md §1.3's rules in order; the first violation raises ScriptError."""
    lines = lines or {}
    if not NAME_PATTERN.fullmatch(script.name):
        raise ScriptError(
            source, "name", f"{_quote(script.name)} must match ^{NAME_PATTERN.pattern}$"
        )
    if not script.steps:
        raise ScriptError(source, "steps", "a script needs at least one step")

    first_use: dict[str, int] = {}
    for index, step in enumerate(script.steps):
        where = _step_where(index, step)
        line = lines.get((index, None))
        if not step.name.strip():
            raise ScriptError(source, where, "name is not set", line=line)
        if not step.agent.strip():
            raise ScriptError(source, where, "agent is not set", line=line)
        if step.name in first_use:
            raise ScriptError(
                source,
                where,
                f"name {_quote(step.name)} is already used by step {first_use[step.name] + 1}",
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
            if op.kind in _RAM_READERS and op.key not in filled:
                problem = f"{op.kind} of array {_quote(op.key)} before any fill_ram"
            elif op.kind in _DISK_READERS and op.key not in written:
                problem = f"{op.kind} of file {_quote(op.key)} before any ingest or write_disk"
            if problem:
                raise ScriptError(
                    source,
                    f"{_step_where(index, step)}: op {number + 1}",
                    problem,
                    line=lines.get((index, number)),
                )
            if op.kind in _RAM_WRITERS:
                filled.add(op.key or "")
            elif op.kind in _DISK_WRITERS:
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
        return f"{op.kind} key {_quote(op.key)} must match ^{KEY_PATTERN.pattern}$"
    if op.size is not None and op.size <= 0:
        return f"{op.kind} size must be > 0, got {op.size}"
    if op.millis is not None and op.millis <= 0:
        return f"{op.kind} millis must be > 0, got {op.millis}"
    if op.parallel is not None and op.parallel < 0:
        return f"{op.kind} parallel must be >= 0, got {op.parallel}"
    return None


def _step_where(index: int, step: Step) -> str:
    return f"step {index + 1}" + (f" ({_quote(step.name)})" if step.name else "")


def _quote(text: str | None) -> str:
    return json.dumps(text, ensure_ascii=False)


def _show(value: Any) -> str:
    """A value for an error message: short, one line, never a big structure's repr."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return _quote(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, bool | int | float):
        text = repr(value)
        return f"{type(value).__name__} {text if len(text) <= 30 else text[:27] + '...'}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


# ---------------------------------------------------------------------------------- encode


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


# -------------------------------------------------------------------------------- registry


def builtin_dir() -> Path:
    """Built-ins ship inside the wheel; a source checkout keeps them in the repo's scripts/."""
    packaged = Path(__file__).parent / "builtin"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "scripts"


def builtin_names() -> list[str]:
    directory = builtin_dir()
    return sorted(path.stem for path in directory.glob("*.yaml")) if directory.is_dir() else []


def load_script(name_or_path: str) -> Script:
    """A built-in by name (`coding-session`), or a YAML file by path."""
    if not name_or_path:
        raise ScriptError("<empty>", "file", "no script name or path given")
    looks_like_path = "/" in name_or_path or name_or_path.endswith((".yaml", ".yml"))
    if not looks_like_path and name_or_path in builtin_names():
        return load_file(builtin_dir() / f"{name_or_path}.yaml")
    if looks_like_path or Path(name_or_path).exists():
        return load_file(Path(name_or_path))
    raise ScriptError(
        name_or_path,
        "file",
        f"no such file, and not a built-in script (built-ins: "
        f"{', '.join(builtin_names()) or 'none found'})",
    )


def load_file(path: Path) -> Script:
    source = str(path)
    try:
        if path.is_dir():
            raise ScriptError(source, "file", "is a directory, not a script file")
        if not path.exists():
            raise ScriptError(source, "file", "no such file")
        if not path.is_file():
            raise ScriptError(source, "file", "not a regular file")
        with path.open("rb") as handle:
            # One byte over the cap is enough to report the file as too large.
            data = handle.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise ScriptError(source, "file", f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_SCRIPT_BYTES:
        raise ScriptError(
            source,
            "file",
            f"{path.stat().st_size} bytes is over the "
            f"{MAX_SCRIPT_BYTES // 2**20} MiB limit for a script",
        )
    return decode(data, source)
