"""The runs stored under a campaign's `out` directory or `dest` prefix, in the upstream layout
``<prefix>/runs/<name>/run_date=YYYY-MM-DD/run_ts=<unix>/run_tag=<tag>/`` (docs/SPEC.md §7),
oldest first: the one reading of the layout, for `baseline: auto` and `agentsession history`.
Every directory (or prefix) in the layout is a run, readable or not: a reader that skips a
bad one says so."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from agentsession_core.output.run_dir import ACCEPTANCE
from agentsession_core.output.upload import is_s3, list_objects

_LAYOUT = re.compile(
    r"^(?P<prefix>.*?)/?runs/(?P<name>[^/]+)/run_date=(?P<date>[^/]+)/"
    r"run_ts=(?P<ts>\d+)/run_tag=(?P<tag>[^/]+)/?$"
)


@dataclass(frozen=True, order=True)
class RunRef:
    run_ts: int
    run_date: str
    tag: str
    name: str
    location: str
    prefix: str
    # Whether the listing showed an acceptance record beside the run (judge/acceptance.py):
    # known from an s3 listing (so readers ask no store about the others); None: not known
    # (a local run, where looking is one stat).
    accepted: bool | None = field(default=None, compare=False)


def parse_location(location: str) -> RunRef | None:
    """Where a run sits in the layout (None: not in it)."""
    text = location.removeprefix("file://").rstrip("/")
    found = _LAYOUT.match(text)
    if found is None:
        return None
    return RunRef(
        run_ts=int(found["ts"]),
        run_date=found["date"],
        tag=found["tag"],
        name=found["name"],
        location=text,
        prefix=found["prefix"] or ".",
    )


def find_runs(
    prefix: str, name: str | None = None, *, endpoint_url: str | None = None
) -> list[RunRef]:
    """Every run under `prefix` (of campaign `name`, or all), oldest first by run_ts."""
    root = prefix.removeprefix("file://").rstrip("/")
    campaigns = name or "*"
    if is_s3(root):
        keys = list_objects(
            f"{root}/runs" + (f"/{name}" if name else ""), endpoint_url=endpoint_url
        )
        base = f"{root}/runs" + (f"/{name}" if name else "")
        depth = 3 if name else 4  # run_date/run_ts/run_tag (under the name)
        dirs = {"/".join(k.split("/")[:depth]) for k in keys if k.count("/") >= depth}
        present = set(keys)
        accepted = {d for d in dirs if f"{d}/{ACCEPTANCE}" in present}
        refs = [
            replace(ref, accepted=d in accepted)
            for d in dirs
            if (ref := parse_location(f"{base}/{d}")) is not None
        ]
        return sorted(refs)
    pattern = f"runs/{campaigns}/run_date=*/run_ts=*/run_tag=*"
    locations = [str(p) for p in Path(root).glob(pattern) if p.is_dir()]
    refs = [ref for loc in locations if (ref := parse_location(loc)) is not None]
    return sorted(refs)


__all__ = ["RunRef", "find_runs", "parse_location"]
