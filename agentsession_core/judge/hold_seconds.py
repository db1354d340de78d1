"""The first level's judged hold, second by second: what each headline figure's uncertainty is
computed from (docs/SPEC.md §6.2).

A window's headline is one sum of its seconds; its interval needs the seconds themselves,
because neighbouring seconds move together (a slow restore stalls several wakes at once) and a
block bootstrap resamples runs of seconds, not single samples (judge/uncertainty.py). So the
campaign keeps, for every second of the hold that the headline covers, each headline row's
latency histogram and failures, every request's count and failures, and the achieved
successes, and writes them to hold_seconds.jsonl: the gate can be recomputed from the run's
files alone (another confidence, a later comparison), as report.html is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import orjson

from agentsession_core.judge.verdict import HEADLINE_ROWS, achieved, headline_rows, select
from agentsession_core.measure.histogram import NUM_BUCKETS, LogHistogram
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.stats import CANDIDATE, row_arm

HOLD_SECONDS_FILE = "hold_seconds.jsonl"
_KEYS = ("t", "window", "sections", "requests", "request_failures", "achieved")


@dataclass
class SectionSeconds:
    """One headline row's seconds as a dense matrix over the slots any second used: column 0
    is the zero bucket, column j+1 the slot `slots[j]` (so a bootstrap replicate is one
    weighted sum of rows, then a quantile)."""

    slots: np.ndarray  # (K,) int64
    counts: np.ndarray  # (S, K + 1) int64
    lo: np.ndarray  # (S,) each second's min (inf for an empty second)
    hi: np.ndarray  # (S,) each second's max (-inf for an empty second)
    failures: np.ndarray  # (S,) int64

    @classmethod
    def of_histograms(cls, hists: list[LogHistogram], failures: Iterable[int]) -> SectionSeconds:
        dicts = [h.to_dict() for h in hists]
        used = sorted({s for d in dicts for s in d["slots"]})
        column = {slot: j + 1 for j, slot in enumerate(used)}
        counts = np.zeros((len(dicts), len(used) + 1), dtype=np.int64)
        for i, d in enumerate(dicts):
            counts[i, 0] = d["zero"]
            for slot, n in zip(d["slots"], d["counts"], strict=True):
                counts[i, column[slot]] = n
        return cls(
            slots=np.asarray(used, dtype=np.int64),
            counts=counts,
            lo=np.asarray([h.min for h in hists], dtype=np.float64),
            hi=np.asarray([h.max for h in hists], dtype=np.float64),
            failures=np.asarray(list(failures), dtype=np.int64),
        )

    @property
    def samples(self) -> int:
        return int(self.counts.sum())

    def subset(self, index: np.ndarray) -> SectionSeconds:
        """These seconds only (positions in order), over the same slots."""
        return SectionSeconds(
            slots=self.slots,
            counts=self.counts[index],
            lo=self.lo[index],
            hi=self.hi[index],
            failures=self.failures[index],
        )


@dataclass
class HoldSeconds:
    """The seconds behind a run's headline (unix seconds, in order) and, per second, what
    each headline figure is a sum of."""

    seconds: list[int] = field(default_factory=list)
    windows: list[int] = field(default_factory=list)  # the judged window of each second
    sections: dict[str, SectionSeconds] = field(default_factory=dict)
    requests: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    request_failures: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    achieved: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.seconds)

    def subset(self, index: np.ndarray) -> HoldSeconds:
        """The seconds at these positions (in order)."""
        return HoldSeconds(
            seconds=[self.seconds[i] for i in index],
            windows=[self.windows[i] for i in index],
            sections={name: s.subset(index) for name, s in self.sections.items()},
            requests=self.requests[index],
            request_failures=self.request_failures[index],
            achieved=self.achieved[index],
        )

    # ------------------------------------------------------------ building
    @classmethod
    def of_records(cls, records: list[dict], arm: str = CANDIDATE) -> HoldSeconds:
        """From hold_seconds.jsonl's lines (or the recorder's, the same shape): one arm's
        (a paired run's reference records say `"arm": "reference"`; the candidate's, and an
        unpaired run's, say nothing)."""
        records = [r for r in records if r.get("arm", CANDIDATE) == arm]
        seen = {s for r in records for s in r["sections"]}
        # The fixed sections first, then a mix's per-script ones (judge/verdict.py headline).
        names = [s for s in HEADLINE_ROWS if s in seen] + sorted(seen - set(HEADLINE_ROWS))
        empty = {"zero": 0, "slots": [], "counts": [], "count": 0}
        sections = {}
        for name in names:
            hists, failures = [], []
            for r in records:
                found = r["sections"].get(name)
                hists.append(_histogram(found or empty))
                failures.append(int((found or {}).get("failures", 0)))
            sections[name] = SectionSeconds.of_histograms(hists, failures)
        return cls(
            seconds=[int(r["t"]) for r in records],
            windows=[int(r["window"]) for r in records],
            sections=sections,
            requests=np.asarray([r["requests"] for r in records], dtype=np.int64),
            request_failures=np.asarray([r["request_failures"] for r in records], dtype=np.int64),
            achieved=np.asarray([r["achieved"] for r in records], dtype=np.int64),
        )


def _histogram(d: dict) -> LogHistogram:
    # A second with no samples of this row has no layout to check.
    return LogHistogram.from_dict(d) if d.get("count") else LogHistogram()


def saturated_seconds(records: list[dict]) -> set[int]:
    """The seconds in which the generator saturated (`saturated` says why)."""
    return {int(r["t"]) for r in records if r.get("saturated")}


def second_records(
    recorder: Recorder,
    spans: list[tuple[int, int, int]],
    *,
    arm: str | None = None,
    saturated: dict[int, str] | None = None,
) -> list[dict]:
    """One record per whole second of each (window index, start_ns, end_ns) span, cut exactly
    as the windows were (Recorder.window). `arm`: one arm of a paired run, its records
    labelled (docs/SPEC.md §6.8); `saturated`: why the generator saturated, by second."""
    out: list[dict] = []
    seconds = [
        (index, second)
        for index, start_ns, end_ns in spans
        for second in range(recorder.second_of(start_ns), recorder.second_of(end_ns))
    ]
    # Every second has the run's sections (a mix's per-script ones from all its seconds), so
    # a second in which a script booked nothing is an empty second of its section.
    keys = {key for _, second in seconds for key in recorder.intervals.get(second, {})}
    if arm is not None:
        keys = {plain for key in keys for plain, owner in [row_arm(key)] if owner == arm}
    rows = headline_rows(keys)
    for index, second in seconds:
        window = recorder.window_seconds(second, second + 1)
        if arm is not None:
            window = window.arm(arm)
        sections = {}
        for name, pattern in rows.items():
            stats = select(window, pattern)
            if stats.count:
                sections[name] = {**stats.response.to_dict(), "failures": stats.failures}
        everything = select(window, None)
        record: dict = {
            "t": second,
            "window": index,
            "sections": sections,
            "requests": everything.count,
            "request_failures": everything.failures,
            "achieved": achieved(window)[1],
        }
        if arm is not None and arm != CANDIDATE:
            record["arm"] = arm
        if saturated and second in saturated:
            record["saturated"] = saturated[second]
        out.append(record)
    return out


def render(records: list[dict]) -> str:
    return "".join(orjson.dumps(r).decode() + "\n" for r in records)


def parse(text: str, where: str = HOLD_SECONDS_FILE) -> list[dict]:
    """hold_seconds.jsonl's records; ValueError naming the line of a bad one."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
            missing = [key for key in _KEYS if key not in record]
            if missing:
                raise KeyError(", ".join(missing))
            for section in record["sections"].values():
                if any(s < 0 or s >= NUM_BUCKETS for s in section["slots"]):
                    raise ValueError("histogram slots out of range")
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{where} line {number}: {type(exc).__name__}: {exc}") from None
        out.append(record)
    return out


__all__ = [
    "HOLD_SECONDS_FILE",
    "HoldSeconds",
    "SectionSeconds",
    "parse",
    "render",
    "saturated_seconds",
    "second_records",
]
