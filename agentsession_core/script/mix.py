"""A run's scripts: one, or a weighted mix of them (docs/SPEC.md §1.6).

`script` names one built-in or YAML path, as it always has, or a mapping of them to positive
whole weights, `{coding-session: 3, personal-assistant-light: 1}`: the sessions are shared out
by weight (engine/script_mix.py). Text that starts with `{` (a flag, the form's text box) is
read as that mapping in YAML's flow form. A mapping of one entry is that one script, so a
"mix" of one names its rows exactly as a plain run does.

Two entries may not be the same script (by its `name:`): a mix's rows carry the script's name
(docs/SPEC.md §5.1), and the two would be one row.

Loading reads files synchronously: call it from a thread inside an event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from agentsession_core.script.decode import decode
from agentsession_core.script.encode import encode
from agentsession_core.script.errors import ScriptError, quote, show
from agentsession_core.script.model import Script
from agentsession_core.script.registry import load_script
from agentsession_core.script.yaml_places import NoAliasLoader

MAX_MIX = 16  # scripts in one mix: every one of them is a row set of its own
MAX_WEIGHT = 1_000_000

ScriptSpec = str | dict[str, int]


def _mapping_text(text: str) -> Any:
    try:
        return yaml.load(text, Loader=NoAliasLoader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at column {mark.column + 1}" if mark is not None else ""
        raise ValueError(
            f"{quote(text[:60])} is not a mapping of script to weight{where} "
            "(e.g. {coding-session: 3, personal-assistant-light: 1})"
        ) from None


def check_spec(value: Any) -> ScriptSpec:
    """`script` as RunParams keeps it: a name or path, or a mapping of two or more of them to
    their weights. ValueError (one line, naming the entry) for anything else."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        value = _mapping_text(value)
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("no script name or path given")
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"{show(value)}: a script name or path, or a mapping of them to weights")
    if not value:
        raise ValueError("an empty mix: name at least one script")
    if len(value) > MAX_MIX:
        raise ValueError(f"{len(value)} scripts in a mix: at most {MAX_MIX}")
    out: dict[str, int] = {}
    for entry, weight in value.items():
        if not isinstance(entry, str) or not entry.strip():
            raise ValueError(f"mix entry {show(entry)}: not a script name or path")
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise ValueError(
                f"mix entry {quote(entry)}: weight {show(weight)} is not a whole number"
            )
        if not 1 <= weight <= MAX_WEIGHT:
            raise ValueError(f"mix entry {quote(entry)}: weight {weight} must be 1 to {MAX_WEIGHT}")
        out[entry] = weight
    if len(out) == 1:
        return next(iter(out))
    return out


def entries(spec: ScriptSpec) -> list[tuple[str, int]]:
    """(name or path, weight) per entry, in the order given; one script is weight 1."""
    return [(spec, 1)] if isinstance(spec, str) else list(spec.items())


@dataclass(frozen=True)
class ScriptMix:
    """The loaded scripts of a run and their weights, in the order the mix gave them."""

    scripts: tuple[Script, ...]
    weights: tuple[int, ...]

    @classmethod
    def of(cls, script: Script) -> ScriptMix:
        return cls((script,), (1,))

    @property
    def mixed(self) -> bool:
        """More than one script: rows are named per script (docs/SPEC.md §5.1)."""
        return len(self.scripts) > 1

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.scripts)

    @property
    def first(self) -> Script:
        return self.scripts[0]

    def largest_memory(self) -> Script:
        """The script that needs the most template memory (the first of equals)."""
        return max(self.scripts, key=lambda s: s.min_actor_memory)

    def weight_of(self) -> dict[str, int]:
        """{script name: weight}: what campaign.json and the report say the mix was."""
        return dict(zip(self.names, self.weights, strict=True))

    def encode(self) -> list[tuple[str, int]]:
        """(YAML text, weight) per script: what a shard on another machine decodes."""
        return [(encode(s), w) for s, w in zip(self.scripts, self.weights, strict=True)]

    @classmethod
    def decode(cls, texts: Sequence[tuple[str, int]], source: str) -> ScriptMix:
        scripts = tuple(decode(text, f"{source} {i}") for i, (text, _) in enumerate(texts))
        return cls.checked(scripts, tuple(w for _, w in texts), [s.name for s in scripts])

    @classmethod
    def checked(
        cls, scripts: tuple[Script, ...], weights: tuple[int, ...], where: Sequence[str]
    ) -> ScriptMix:
        seen: dict[str, str] = {}
        for script, entry in zip(scripts, where, strict=True):
            if script.name in seen:
                raise ScriptError(
                    entry,
                    "name",
                    f"script {quote(script.name)} is also mix entry {quote(seen[script.name])}: "
                    "a mix's rows are named by script, so each script may appear once",
                )
            seen[script.name] = entry
        return cls(scripts, weights)


def load_mix(spec: ScriptSpec) -> ScriptMix:
    """Every script of `spec` loaded and validated (ScriptError naming the entry's file)."""
    pairs = entries(spec)
    scripts = tuple(load_script(entry) for entry, _ in pairs)
    return ScriptMix.checked(scripts, tuple(w for _, w in pairs), [e for e, _ in pairs])


__all__ = ["MAX_MIX", "ScriptMix", "ScriptSpec", "check_spec", "entries", "load_mix"]
