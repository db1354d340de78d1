"""Reading a finished run back (a directory or an s3:// prefix) for the gate: its gate.json,
windows, status and parameters. A file that is missing is None; one that cannot be read or
parsed is a GateInputError naming the file (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

from agentsession_core.judge.conditions import conditions
from agentsession_core.judge.gate import GateInputError, gate_document
from agentsession_core.judge.verdict import WindowVerdict
from agentsession_core.output import upload


def read_file(location: str, name: str, endpoint_url: str | None = None) -> bytes | None:
    """A file of the run, or None when it does not exist."""
    if location.startswith("s3://"):
        url = location.rstrip("/") + "/" + name
        try:
            return upload.read_object(url, endpoint_url=endpoint_url)
        except FileNotFoundError:
            return None
        except Exception as exc:  # any S3 failure makes the input unusable
            if "NoSuchKey" in repr(exc) or "404" in str(exc):
                return None
            raise GateInputError(f"{url}: cannot read ({type(exc).__name__}: {exc})") from None
    path = Path(location) / name
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GateInputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _json(location: str, name: str, data: bytes) -> dict:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise GateInputError(f"{location}/{name}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise GateInputError(f"{location}/{name}: expected a JSON object")
    return value


def _windows(location: str, data: bytes) -> list[WindowVerdict]:
    out: list[WindowVerdict] = []
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(WindowVerdict.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise GateInputError(
                f"{location}/windows.jsonl line {number}: not a judged "
                f"window ({type(exc).__name__}: {exc})"
            ) from None
    return out


def _normalise(location: str) -> str:
    if location.startswith("file://"):
        location = location[len("file://") :]
    if location.startswith("s3://"):
        return location.rstrip("/")
    path = Path(location)
    if path.name == "gate.json" and path.is_file():
        path = path.parent
    if not path.is_dir():
        raise GateInputError(f"{location}: no such run directory")
    return str(path)


def load_run(location: str, *, endpoint_url: str | None = None) -> dict:
    """{"location", "gate", "windows" (WindowVerdicts), "status", "params"} of a finished
    run. Without gate.json the gate is rebuilt from windows.jsonl and status.json; a gate
    without its conditions (an older run) gets them from campaign.json."""
    location = _normalise(location)
    gate_bytes = read_file(location, "gate.json", endpoint_url)
    windows_bytes = read_file(location, "windows.jsonl", endpoint_url)
    status_bytes = read_file(location, "status.json", endpoint_url)
    params_bytes = read_file(location, "campaign.json", endpoint_url)
    status = _json(location, "status.json", status_bytes) if status_bytes is not None else None
    campaign = _json(location, "campaign.json", params_bytes) if params_bytes is not None else {}
    params = campaign.get("params") if isinstance(campaign.get("params"), dict) else {}
    windows = _windows(location, windows_bytes) if windows_bytes is not None else []
    if gate_bytes is not None:
        gate = _json(location, "gate.json", gate_bytes)
        if "verdict" not in gate or "windows" not in gate:
            raise GateInputError(f"{location}/gate.json: no verdict/windows (not a gate document)")
    elif windows_bytes is not None or (status or {}).get("status") == "refused":
        # A refused run (`agentsession run` writes no windows) is judged too: void, with
        # the reason (docs/SPEC.md §6).
        gate = gate_document(
            windows,
            abort_reason=(status or {}).get("abort_reason"),
            run_status=(status or {}).get("status", "completed"),
        )
    else:
        raise GateInputError(f"{location}: neither gate.json nor windows.jsonl (not a judged run)")
    gate.setdefault("location", location)
    if not gate.get("conditions") and params:
        gate["conditions"] = conditions(params)
    return {
        "location": location,
        "gate": gate,
        "windows": windows,
        "status": status,
        "params": params,
    }


__all__ = ["load_run", "read_file"]
