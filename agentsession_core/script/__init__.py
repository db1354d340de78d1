"""Session scripts (docs/SPEC.md §1): the public names, re-exported from the modules that hold them.

errors.py (ScriptError), model.py (Op, Step, Script, budget), yaml_places.py (YAML with line
numbers), decode.py, validate.py, encode.py, registry.py (built-ins and files), quantity.py
(sizes and durations), payload.py (seeded payload bytes).
"""

from agentsession_core.script.decode import MAX_OPS_PER_LAP, MAX_SCRIPT_BYTES, MAX_STEPS, decode
from agentsession_core.script.encode import encode
from agentsession_core.script.errors import ScriptError
from agentsession_core.script.model import (
    ARG_NAMES,
    OP_ARGS,
    OPTIONAL_ARGS,
    Budget,
    Op,
    OpKind,
    Script,
    Step,
    budget,
)
from agentsession_core.script.registry import builtin_dir, builtin_names, load_file, load_script
from agentsession_core.script.validate import KEY_PATTERN, NAME_PATTERN, validate

__all__ = [
    "ARG_NAMES",
    "KEY_PATTERN",
    "MAX_OPS_PER_LAP",
    "MAX_SCRIPT_BYTES",
    "MAX_STEPS",
    "NAME_PATTERN",
    "OPTIONAL_ARGS",
    "OP_ARGS",
    "Budget",
    "Op",
    "OpKind",
    "Script",
    "ScriptError",
    "Step",
    "budget",
    "builtin_dir",
    "builtin_names",
    "decode",
    "encode",
    "load_file",
    "load_script",
    "validate",
]
