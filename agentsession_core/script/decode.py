"""Decoding a script: bytes → text → plain YAML data → models, then `validate`.

Each stage can only raise ScriptError:
  1. bytes → text (size cap, binary, UTF-8),
  2. text → plain data (YAML safe load; duplicate keys and syntax errors carry line and
     column),
  3. data → models (strict: unknown fields, multi-key ops and wrong types are errors),
then `validate` applies the rules of docs/SPEC.md §1.3 in order, first violation wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentsession_core.script.errors import ScriptError, quote, show
from agentsession_core.script.model import ARG_NAMES, OP_ARGS, Op, Script, Step
from agentsession_core.script.quantity import QuantityError, parse_duration, parse_quantity
from agentsession_core.script.validate import validate
from agentsession_core.script.yaml_places import item_line, load_yaml

MAX_SCRIPT_BYTES = 1024 * 1024
# Aliases can make a 1 MiB file describe a huge lap; these caps keep loading cheap.
MAX_STEPS = 10_000
MAX_OPS_PER_LAP = 100_000

_SCRIPT_FIELDS = ("name", "min_actor_memory", "steps")
_STEP_FIELDS = ("name", "agent", "think", "ops")


def decode(text: str | bytes, source: str) -> Script:
    """Decode and validate one script; every problem is a ScriptError naming its place."""
    data = load_yaml(_as_text(text, source), source)
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
                f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
                line=exc.object.count(b"\n", 0, exc.start) + 1,
            ) from None
    return text.removeprefix("\ufeff")


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
                f"expected a mapping with {', '.join(_SCRIPT_FIELDS)}, got {show(data)}",
                data,
            )
        self.fields(data, _SCRIPT_FIELDS, "top level", required=_SCRIPT_FIELDS)
        name = data["name"]
        if not isinstance(name, str):
            raise self.fail("name", f"expected a string, got {show(name)}", data, "name")
        try:
            memory = parse_quantity(data["min_actor_memory"])
        except QuantityError as exc:
            raise self.fail("min_actor_memory", str(exc), data, "min_actor_memory") from None
        steps = data["steps"]
        if steps is None:
            steps = []
        if not isinstance(steps, list):
            raise self.fail("steps", f"expected a list of steps, got {show(steps)}", data, "steps")
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
            self.step(index, raw, item_line(steps, index)) for index, raw in enumerate(steps)
        )
        return Script(name=name, min_actor_memory=memory, steps=decoded)

    def fields(
        self, data: Mapping, known: tuple[str, ...], where: str, required: tuple[str, ...] = ()
    ) -> None:
        for field in data:
            if field not in known:
                raise self.fail(
                    where,
                    f"unknown field {show(field)} (known: {', '.join(known)})",
                    data,
                    field,
                )
        for field in required:
            if field not in data:
                raise self.fail(where, f"missing field {field}", data)

    def step(self, index: int, raw: Any, line: int | None) -> Step:
        where = f"step {index + 1}"
        if isinstance(raw, Mapping) and isinstance(raw.get("name"), str) and raw["name"]:
            where += f" ({quote(raw['name'])})"
        if not isinstance(raw, Mapping):
            raise self.fail(
                where,
                f"expected a mapping with {', '.join(_STEP_FIELDS)}, got {show(raw)}",
                line=line,
            )
        self.lines[(index, None)] = getattr(raw, "line", None) or line or 0
        self.fields(raw, _STEP_FIELDS, where, required=("think",))
        texts = {}
        for field in ("name", "agent"):
            value = raw.get(field)
            if value is not None and not isinstance(value, str):
                raise self.fail(where, f"{field}: expected a string, got {show(value)}", raw, field)
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
            raise self.fail(where, f"ops: expected a list of ops, got {show(ops)}", raw, "ops")
        decoded = tuple(
            self.op(index, where, number, item, item_line(ops, number))
            for number, item in enumerate(ops)
        )
        return Step(name=texts["name"], agent=texts["agent"], think_ns=think, ops=decoded)

    def op(self, step_index: int, step_where: str, index: int, raw: Any, line: int | None) -> Op:
        where = f"{step_where}: op {index + 1}"
        if line is not None:
            self.lines[(step_index, index)] = line
        if not isinstance(raw, Mapping) or len(raw) != 1:
            got = f"{len(raw)} keys" if isinstance(raw, Mapping) else show(raw)
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
                f"unknown op kind {show(kind)} (known: {', '.join(OP_ARGS)})",
                raw,
                line=line,
            )
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise self.fail(
                where, f"{kind}: expected a mapping of arguments, got {show(args)}", raw, line=line
            )
        values: dict[str, Any] = {"kind": kind}
        for name, value in args.items():
            if name not in ARG_NAMES:
                takes = ", ".join(OP_ARGS[kind]) or "nothing"
                raise self.fail(
                    where,
                    f"{kind}: unknown argument {show(name)} ({kind} takes {takes})",
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
                f", got {show(value)}",
                line=line,
            )
        return value
