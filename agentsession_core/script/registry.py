"""Finding and reading scripts: the built-ins by name, or a YAML file by path.

Loading reads files synchronously: call it from a thread inside an event loop.
"""

from __future__ import annotations

from pathlib import Path

from agentsession_core.script.decode import MAX_SCRIPT_BYTES, decode
from agentsession_core.script.errors import ScriptError
from agentsession_core.script.model import Script


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
