"""Judging one step window (docs/SPEC.md §6): its outcome and its headline.

A step window is judged from its exact recorder Window against the thresholds of
``agentsession_core.judge.thresholds``. Its outcome is, in this order of precedence:

* ``aborted`` — an abort rule tripped during it (the caller passes ``abort_reason``); the
  window and the campaign end at once. A dead substrate is a failure whatever else happened.
* ``void`` — the generator itself was saturated (the caller passes ``void_reason`` from
  ``GeneratorHealth.is_void``); no threshold can be trusted, so none decides.
* ``break`` — a judged threshold was missed.
* ``pass`` — every threshold with enough samples held (rules with too few samples are
  reported but do not decide).

A row pattern matches a row's name across kinds, or its stats.jsonl metric name
``<kind>_<name>``: ``Step_*`` and ``http_Step_*`` both merge every http Step_ row, and
``TimeToWake`` and ``rps_TimeToWake`` both pick the rps/TimeToWake row; a rule may name the
load's own rows too (``ResidentShortfall``, ``QueueWait``), which "all requests" leaves out.

achieved_rps and its target share a unit (docs/SPEC.md §6). A turnover window (one with
TimeToWake or turnover rows, or the turnover gauge) achieves swaps: successful TimeToWake per
second (a wake owed for a failed one completes that swap), against target_rps × level. Any
other window achieves steps: successful http Step_* per second, against ``intended_rate``,
the steps the closed think model put due or the turns the Poisson schedule made arrive in the
window (closed/StepsDue, turns/Arrivals events per second).

A rule on a server figure (``server.parked_requests_max <= 8``, docs/SPEC.md §5.9) is judged
on the window's ServerWindow (measure/server_metrics.py) instead of its requests; a window
without server figures, or without that figure, leaves the rule not judged and says why.

The headline of a window: TimeToWake, WakeFirstTouch and the Step_* rows merged (latency
percentiles in ms, from the intended time), plus the request totals and failure ratio. A mix
of scripts (docs/SPEC.md §1.6) adds each script's own sections, `TimeToWake/<script>` and
`Step_*/<script>` (its rows, named as docs/SPEC.md §5.1 says), so the gate's figures and a
baseline comparison are per script too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

from agentsession_core.judge.thresholds import (
    LATENCY_STATS,
    QUANTILE_STATS,
    RATIO_STATS,
    References,
    Threshold,
)
from agentsession_core.measure.achieved import achieved
from agentsession_core.measure.health import HEALTH_KIND, counts_requests
from agentsession_core.measure.server_metrics import ServerWindow
from agentsession_core.measure.stats import (
    BREAKDOWN_MARK,
    INTENDED_ROWS,
    ROUTER_KIND,
    SCRIPT_SEPARATOR,
    RowKey,
    RowStats,
    Window,
    is_breakdown,
    row_script,
    script_row,
)

Outcome = Literal["pass", "break", "void", "aborted"]
OUTCOMES: tuple[str, ...] = ("pass", "break", "void", "aborted")
# Headline sections: name -> row-name pattern.
HEADLINE_ROWS = {"TimeToWake": "TimeToWake", "WakeFirstTouch": "WakeFirstTouch", "Step_*": "Step_*"}
HEADLINE_LATENCIES = ("p50", "p90", "p95", "p99", "p99_9", "max", "mean")


@dataclass
class ThresholdResult:
    threshold: str
    observed: float | None
    samples: int
    passed: bool | None  # None: not judged (too few samples, no target)
    detail: str
    bound: float | None = None  # the number observed was held to (the report draws it)


@dataclass
class WindowVerdict:
    index: int
    level: float
    start_unix: float
    end_unix: float
    outcome: Outcome
    results: list[ThresholdResult] = field(default_factory=list)
    headline: dict[str, dict[str, float]] = field(default_factory=dict)
    void_reason: str | None = None
    abort_reason: str | None = None
    # Seconds the generator saturated in; a paired run judges the window without them
    # (`left_out`), an unpaired one voids it past the void rule's allowance (measure/health.py).
    saturated_seconds: int = 0
    left_out_seconds: int = 0

    @property
    def broken(self) -> list[ThresholdResult]:
        return [r for r in self.results if r.passed is False]

    def to_dict(self) -> dict[str, Any]:
        """One windows.jsonl object."""
        return {
            "index": self.index,
            "level": self.level,
            "start_unix": self.start_unix,
            "end_unix": self.end_unix,
            "duration_s": max(0.0, self.end_unix - self.start_unix),
            "outcome": self.outcome,
            "void_reason": self.void_reason,
            "abort_reason": self.abort_reason,
            "saturated_seconds": self.saturated_seconds,
            "left_out_seconds": self.left_out_seconds,
            "thresholds": [asdict(r) for r in self.results],
            "headline": self.headline,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WindowVerdict:
        outcome = d["outcome"]
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
        return cls(
            index=int(d["index"]),
            level=float(d["level"]),
            start_unix=float(d["start_unix"]),
            end_unix=float(d["end_unix"]),
            outcome=outcome,
            results=[ThresholdResult(**r) for r in d.get("thresholds", [])],
            headline=d.get("headline") or {},
            void_reason=d.get("void_reason"),
            abort_reason=d.get("abort_reason"),
            saturated_seconds=int(d.get("saturated_seconds") or 0),
            left_out_seconds=int(d.get("left_out_seconds") or 0),
        )


# --------------------------------------------------------------------------- measuring
def matches(key: RowKey, pattern: str) -> bool:
    """Whether the row's name, or its metric name `<kind>_<name>`, matches `pattern`. A
    breakdown row (a pool's `TimeToWake:pool=fast`, a mix's `TimeToWake/coding-session`)
    only matches a pattern that names a label or a script too, so `rps_*` does not count its
    requests twice (stats.py)."""
    if is_breakdown(key) and BREAKDOWN_MARK not in pattern and SCRIPT_SEPARATOR not in pattern:
        return False
    kind, name = key
    return fnmatchcase(name, pattern) or fnmatchcase(f"{kind}_{name}", pattern)


def select(window: Window, pattern: str | None) -> RowStats:
    """Rows matching `pattern` (never the generator's own), merged; for None, every
    request row (not the load's own rows either)."""
    if pattern is None:
        return window.aggregate(counts_requests)
    return window.aggregate(lambda key: key[0] != HEALTH_KIND and matches(key, pattern))


def intended_rate(window: Window) -> float:
    """Steps (closed) or turns (turns) the load model asked for in the window, per second:
    achieved_rps's target outside turnover."""
    due = sum(window.row(*key).events for key in INTENDED_ROWS)
    return due / window.duration_s if window.duration_s > 0 else 0.0


def row_stat(stats: RowStats, stat: str, duration_s: float) -> float:
    if stat in QUANTILE_STATS:
        return stats.response.quantile(QUANTILE_STATS[stat])
    if stat == "max":
        return stats.response.max if stats.response.count else 0.0
    if stat == "mean":
        return stats.response.mean()
    if stat == "failure_ratio":
        return stats.failure_ratio()
    if stat == "failures":
        return float(stats.failures)
    if stat == "count":
        return float(stats.count)
    if stat == "rps":
        return stats.rps(duration_s)
    if stat == "events":
        return float(stats.events)
    if stat == "events_per_s":
        return stats.events / duration_s if duration_s > 0 else 0.0
    raise ValueError(f"not a row statistic: {stat!r}")


def _fmt(value: float, latency: bool) -> str:
    return f"{value:.1f} ms" if latency else f"{value:.4g}"


def evaluate(
    threshold: Threshold,
    window: Window,
    target: float | References | None,
    server: ServerWindow | None = None,
) -> ThresholdResult:
    """`target`: the window's references by name ({"target": …, "awake": …}), or the target
    number alone; `server`: the window's server figures, for `server.` rules (docs/SPEC.md
    §5.9)."""
    latency = threshold.stat in LATENCY_STATS
    if threshold.server is not None:
        found = server.figure(threshold.server) if server is not None else None
        if found is None:
            why = (
                "no server figures for this window"
                if server is None
                else f"no figure {threshold.server}"
            )
            return ThresholdResult(threshold.text, None, 0, None, f"not judged: {why}")
        observed, samples = found
        subject, latency = f"server {threshold.server}", False
    elif threshold.stat == "achieved_rps":
        observed, samples = achieved(window)
        subject = "achieved_rps"
    else:
        stats = select(window, threshold.rows)
        samples = stats.events if threshold.stat.startswith("events") else stats.count
        subject = f"{threshold.rows or 'all requests'} {threshold.stat}"
        observed = row_stat(stats, threshold.stat, window.duration_s)
    bound = threshold.bound(target)
    # A latency or a ratio of nothing is not a measurement, whatever the rule's minimum.
    needed = max(threshold.min_samples, 1 if latency or threshold.stat in RATIO_STATS else 0)
    if samples < needed:
        return ThresholdResult(
            threshold.text, None, samples, None, f"not judged: {samples} samples < min {needed}"
        )
    if bound is None:
        return ThresholdResult(
            threshold.text,
            observed,
            samples,
            None,
            f"not judged: the rule needs {threshold.reference} and the window has none",
        )
    passed = threshold.holds(observed, target)
    verb = "held" if passed else "missed"
    detail = (
        f"{verb}: {subject} = {_fmt(observed, latency)}, needs {threshold.op} "
        f"{_fmt(bound, latency)} ({samples} samples)"
    )
    return ThresholdResult(threshold.text, observed, samples, passed, detail, bound)


def _latencies(stats: RowStats) -> dict[str, float]:
    out = {key: row_stat(stats, key, 0.0) for key in HEADLINE_LATENCIES}
    out.update(
        count=float(stats.count),
        failures=float(stats.failures),
        failure_ratio=stats.failure_ratio(),
    )
    return out


def mix_scripts(keys: Iterable[RowKey]) -> list[str]:
    """The scripts of a mix whose rows are among `keys` (none in a run of one script)."""
    found = set()
    for key in keys:
        kind, name = key
        base, script = row_script(name)
        if script is not None and (
            (kind == ROUTER_KIND and base.startswith("Step_")) or is_breakdown(key)
        ):
            found.add(script)
    return sorted(found)


def script_sections(scripts: Iterable[str]) -> dict[str, str]:
    """Each script's headline sections: name -> row pattern (the name is the pattern)."""
    out = {}
    for script in scripts:
        for base in ("TimeToWake", "Step_*"):
            out[script_row(base, script)] = script_row(base, script)
    return out


def headline_rows(keys: Iterable[RowKey]) -> dict[str, str]:
    """The headline sections of a window with rows `keys`: HEADLINE_ROWS, then each
    script's in a mix."""
    return {**HEADLINE_ROWS, **script_sections(mix_scripts(keys))}


def headline(window: Window) -> dict[str, dict[str, float]]:
    """The window's headline metrics (sections present only when their rows saw requests)."""
    out: dict[str, dict[str, float]] = {}
    for section, pattern in headline_rows(window.rows).items():
        stats = select(window, pattern)
        if stats.count:
            out[section] = _latencies(stats)
    everything = select(window, None)
    rate, _ = achieved(window)
    out["requests"] = {
        "count": float(everything.count),
        "failures": float(everything.failures),
        "failure_ratio": everything.failure_ratio(),
        "rps": everything.rps(window.duration_s),
        "achieved_rps": rate,
    }
    return out


# --------------------------------------------------------------------------- judging
def judge_window(
    window: Window,
    thresholds: list[Threshold],
    *,
    index: int,
    level: float,
    target: float | References | None,
    void_reason: str | None = None,
    abort_reason: str | None = None,
    server: ServerWindow | None = None,
    saturated_seconds: int = 0,
) -> WindowVerdict:
    results = [evaluate(t, window, target, server) for t in thresholds]
    outcome: Outcome
    if abort_reason:
        outcome = "aborted"
    elif void_reason:
        outcome = "void"
    elif any(r.passed is False for r in results):
        outcome = "break"
    else:
        outcome = "pass"
    return WindowVerdict(
        index=index,
        level=level,
        start_unix=window.start_s,
        end_unix=window.end_s,
        outcome=outcome,
        results=results,
        headline=headline(window),
        void_reason=void_reason,
        abort_reason=abort_reason,
        saturated_seconds=saturated_seconds,
        left_out_seconds=window.left_out,
    )


__all__ = [
    "HEADLINE_ROWS",
    "OUTCOMES",
    "Outcome",
    "ThresholdResult",
    "WindowVerdict",
    "achieved",
    "evaluate",
    "headline",
    "headline_rows",
    "intended_rate",
    "judge_window",
    "matches",
    "mix_scripts",
    "script_sections",
    "select",
]
