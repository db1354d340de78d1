"""A finished run read back (a directory or an s3:// prefix): its gate.json, windows, status
and parameters as typed parts — what `agentsession gate`, `gate --baseline`, a campaign's
`baseline`, `baseline: auto` and history believe of a run, and `ag.load_run` returns.

`load_run` is the one way in: the location is opened as a run's files
(output/stored_files.py `open_files`), and a run is believed only when sealed (the same
module's `check_sealed`, `open_sealed`):
`verify=True`, every gate's reading, checks every file the manifest lists, hashed;
`verify="files read"`, history's (docs/SPEC.md §6.4), the same manifest by presence and size,
hashing only the files it reads (gate.json and campaign.json, and windows.jsonl and
status.json only for a run without gate.json); `verify=False` believes an unsealed run.
Every file is read through output/run_reader.py (regular files only, capped, JSON without NaN
or runaway nesting) and gate.json is validated against its model (judge/gate_document.py
`GateDocument.read`). A file that is missing is absent; any other problem is a
GateInputError naming the file (exit 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agentsession_core.judge.conditions import conditions
from agentsession_core.judge.gate import gate_document
from agentsession_core.judge.gate_document import GateDocument, GateInputError
from agentsession_core.judge.verdict import WindowVerdict
from agentsession_core.output import run_reader
from agentsession_core.output.run_reader import RunReadError
from agentsession_core.output.stored_files import check_sealed, open_files, open_sealed

Verify = bool | Literal["files read"]


class Accepted(Protocol):
    """What a stored run carries of its acceptance (judge/acceptance.py `Acceptance`, which
    reads the run through this module: declared here so neither imports the other)."""

    @property
    def reason(self) -> str: ...

    @property
    def by(self) -> str: ...

    @property
    def accepted_unix(self) -> float: ...


@dataclass(frozen=True)
class StoredRun:
    """A finished run as a gate believes it. `gate` is gate.json as its model (or the gate
    rebuilt from windows.jsonl and status.json for a run that has none); `gate_json` the
    same document as stored, a dict, which is what a reader hands on and what `gate --write`
    writes back byte for byte (never the model dumped: that would turn 1200 into 1200.0 and
    reorder keys). Both carry `location` (where the run was read) and, for a run written
    before gate.json held them, the `conditions` from campaign.json. `windows` are
    windows.jsonl's (empty when the file was not read: history's reading of a run with
    gate.json); `status` is status.json (None: absent or not read), `params` campaign.json's
    parameters ({} when absent). `acceptance`: the run's believed acceptance, when a reader
    looked for one (judge/acceptance.py `accepted`; `baseline: auto` does), else None."""

    location: str
    gate: GateDocument
    gate_json: dict[str, Any]
    windows: list[WindowVerdict] = field(default_factory=list)
    status: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    acceptance: Accepted | None = None

    @classmethod
    def of(
        cls,
        location: str,
        gate_json: dict[str, Any],
        *,
        windows: list[WindowVerdict] | None = None,
        status: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> StoredRun:
        """A run from its gate document (a GateInputError naming `location`'s gate.json when
        it is not one): where it was read, and the conditions an older run's gate.json lacks
        from its parameters, are added to a copy."""
        doc = dict(gate_json)
        doc.setdefault("location", location)
        if not doc.get("conditions") and params:
            doc["conditions"] = conditions(params)
        gate = GateDocument.read(doc, run_reader.where(location, "gate.json"))
        return cls(location, gate, doc, list(windows or []), status, dict(params or {}))

    @property
    def conditions(self) -> dict[str, Any] | None:
        return self.gate.conditions


def load_run(location: str, *, endpoint_url: str | None = None, verify: Verify = True) -> StoredRun:
    """The finished run at `location` (a directory, a file:// URL, its gate.json, or an s3://
    prefix), believed as `verify` says (this module's docstring). Without gate.json its gate
    is rebuilt from windows.jsonl and status.json."""
    try:
        files = open_files(location, endpoint_url=endpoint_url)
        location = files.location
        if verify == "files read":
            files = open_sealed(location, endpoint_url=endpoint_url)
        elif verify:
            check_sealed(location, endpoint_url=endpoint_url)
        gate = files.json("gate.json")
        windows_bytes = status = None
        if gate is None or verify != "files read":
            windows_bytes = files.read("windows.jsonl")
            status = run_reader.check_status(
                files.json("status.json"), run_reader.where(location, "status.json")
            )
        campaign = run_reader.check_campaign(
            files.json("campaign.json"), run_reader.where(location, "campaign.json")
        )
    except GateInputError:
        raise
    except RunReadError as exc:
        raise GateInputError(str(exc)) from None
    params = (campaign or {}).get("params") or {}
    windows = _windows(location, windows_bytes) if windows_bytes is not None else []
    if gate is None:
        if windows_bytes is None and (status or {}).get("status") != "refused":
            raise GateInputError(
                f"{location}: neither gate.json nor windows.jsonl (not a judged run)"
            )
        # A refused run (`agentsession run` writes no windows) is judged too: void, with
        # the reason (docs/SPEC.md §6).
        gate = gate_document(
            windows,
            abort_reason=(status or {}).get("abort_reason"),
            run_status=(status or {}).get("status", "completed"),
        )
    return StoredRun.of(location, gate, windows=windows, status=status, params=params)


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


__all__ = ["Accepted", "StoredRun", "Verify", "load_run"]
