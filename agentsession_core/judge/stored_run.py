"""Reading a finished run back (a directory or an s3:// prefix) for the gate: its gate.json,
windows, status and parameters — what `agentsession gate`, `gate --baseline`, a campaign's
`baseline`, `baseline: auto` and history believe of a run.

A run is believed only when sealed (output/sealed_run.py `check_sealed`: manifest.json
complete, every file it lists present with its size and sha256). History reads many runs
for their figures alone: `load_gate` checks the same manifest by presence and size and
hashes only the files it reads (`open_sealed`, docs/SPEC.md §6.4). Every file is read through
output/run_reader.py (regular files only, capped, JSON without NaN or runaway nesting) and
gate.json is validated against its model (judge/gate_document.py `GateDocument.read`). A
file that is missing is None; any other problem is a GateInputError naming the file (exit 2)."""

from __future__ import annotations

from pathlib import Path

from agentsession_core.judge.conditions import conditions
from agentsession_core.judge.gate import gate_document
from agentsession_core.judge.gate_document import GateDocument, GateInputError
from agentsession_core.judge.verdict import WindowVerdict
from agentsession_core.output import run_reader, sealed_run
from agentsession_core.output.run_reader import RunReadError


def read_file(location: str, name: str, endpoint_url: str | None = None) -> bytes | None:
    """A file of the run (bounded, regular files only), or None when it does not exist."""
    try:
        return run_reader.read_run_file(location, name, endpoint_url=endpoint_url)
    except GateInputError:
        raise
    except RunReadError as exc:
        raise GateInputError(str(exc)) from None


def _json(location: str, name: str, endpoint_url: str | None) -> dict | None:
    try:
        return run_reader.read_json_file(location, name, endpoint_url=endpoint_url)
    except RunReadError as exc:
        raise GateInputError(str(exc)) from None


def _windows(location: str, data: bytes) -> list[WindowVerdict]:
    place = run_reader.where(location, "windows.jsonl")
    out: list[WindowVerdict] = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = run_reader.parse_json(line, f"{place} line {number}")
            out.append(WindowVerdict.from_dict(record))
        except RunReadError as exc:
            raise GateInputError(str(exc)) from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise GateInputError(
                f"{place} line {number}: not a judged window ({type(exc).__name__}: {exc})"
            ) from None
    return out


def _normalise(location: str) -> str:
    if location.startswith("file://"):
        location = location[len("file://") :]
    if location.startswith("s3://"):
        return location.rstrip("/")
    path = Path(location)
    if path.name == "gate.json" and not path.is_dir():  # even a FIFO: refused when read
        path = path.parent
    if not path.is_dir():
        raise GateInputError(f"{location}: no such run directory")
    return str(path)


def load_run(location: str, *, endpoint_url: str | None = None, verify: bool = True) -> dict:
    """{"location", "gate", "windows" (WindowVerdicts), "status", "params"} of a finished
    run. `verify` (every gate's reading): refused unless its manifest seals it. Without
    gate.json the gate is rebuilt from windows.jsonl and status.json; a gate without its
    conditions (an older run) gets them from campaign.json."""
    location = _normalise(location)
    if verify:
        try:
            sealed_run.check_sealed(location, endpoint_url=endpoint_url)
        except RunReadError as exc:
            raise GateInputError(str(exc)) from None
    gate = _json(location, "gate.json", endpoint_url)
    windows_bytes = read_file(location, "windows.jsonl", endpoint_url)
    try:
        status = run_reader.check_status(
            _json(location, "status.json", endpoint_url),
            run_reader.where(location, "status.json"),
        )
        campaign = run_reader.check_campaign(
            _json(location, "campaign.json", endpoint_url),
            run_reader.where(location, "campaign.json"),
        )
    except RunReadError as exc:
        raise GateInputError(str(exc)) from None
    params = (campaign or {}).get("params") or {}
    gate, windows = _judged(location, gate, windows_bytes, status, params)
    return {
        "location": location,
        "gate": gate,
        "windows": windows,
        "status": status,
        "params": params,
    }


def _judged(
    location: str,
    gate: dict | None,
    windows_bytes: bytes | None,
    status: dict | None,
    params: dict,
) -> tuple[dict, list[WindowVerdict]]:
    """The run's gate (gate.json checked against its schema, or rebuilt from its windows and
    status) and its windows."""
    windows = _windows(location, windows_bytes) if windows_bytes is not None else []
    if gate is not None:
        GateDocument.read(gate, run_reader.where(location, "gate.json"))
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
    return gate, windows


def load_gate(location: str, *, endpoint_url: str | None = None) -> tuple[dict, dict]:
    """(gate, params) of a finished run as history believes it (docs/SPEC.md §6.4): sealed
    as output/sealed_run.py `open_sealed` checks (manifest.json complete, every file it lists
    present with its size, none of the gate's files unlisted), and each file read hashed
    against the manifest as it is read: gate.json and campaign.json, and windows.jsonl and
    status.json only for a run without gate.json, whose gate is rebuilt from them as
    load_run does. A refusal is a GateInputError, the line load_run gives where both
    check; only an altered file history does not read goes unnoticed."""
    location = _normalise(location)
    try:
        sealed = sealed_run.open_sealed(location, endpoint_url=endpoint_url)
        gate = sealed.json("gate.json")
        windows_bytes = status = None
        if gate is None:
            windows_bytes = sealed.read("windows.jsonl")
            status = run_reader.check_status(
                sealed.json("status.json"), run_reader.where(location, "status.json")
            )
        campaign = run_reader.check_campaign(
            sealed.json("campaign.json"), run_reader.where(location, "campaign.json")
        )
    except RunReadError as exc:
        raise GateInputError(str(exc)) from None
    params = (campaign or {}).get("params") or {}
    gate, _ = _judged(location, gate, windows_bytes, status, params)
    return gate, params


__all__ = ["load_gate", "load_run", "read_file"]
