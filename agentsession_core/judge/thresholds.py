"""The threshold language: one readable line per pass/fail rule, k6 style.

Grammar (whitespace is free)::

    threshold := [ROWS ":"] STAT OP VALUE ["*" REF] ["(" OPTION {"," OPTION} ")"]
    ROWS      := a row name or fnmatch pattern, matched on the NAME across kinds, or on the
                 stats.jsonl metric name KIND_NAME ("TimeToWake" or "rps_TimeToWake",
                 "WakeFirstTouch", "Step_*" or "http_Step_*", "ResumeActor", "grpc_*");
                 a breakdown row by its label too ("TimeToWake:pool=slow",
                 "TimeToWake:pool=*"), never by a pattern without one;
                 in a mix of scripts one script's rows end in "/SCRIPT":
                 "TimeToWake/coding-session", "Step_*/personal-assistant", "*/smoke"
    STAT      := p50 | p66 | p75 | p80 | p90 | p95 | p98 | p99 | p99_9 | p(99) | p(99.9)
                 | max | mean | avg | failure_ratio | failures | count | rps
                 | events | events_per_s | achieved_rps
    OP        := "<" | "<=" | ">" | ">="
    VALUE     := a number; latency stats also take a duration ("2s", "500ms", "1.5m") and a
                 bare number there means milliseconds; failure_ratio also takes "1%"
    REF       := "target" | "awake"
    OPTION    := "min" N   (minimum samples before the rule is judged)
               | "abort"   (also evaluated every second on a sliding window; see judge)

Examples::

    TimeToWake: p99 < 2s
    Step_*: failure_ratio < 0.01 (min 50)
    achieved_rps >= 0.95 * target
    ResidentShortfall: events_per_s <= 0.02 * awake
    TimeToWake: failure_ratio < 0.5 (min 20, abort)
    TimeToWake/personal-assistant-light: p99 < 3s

Several rows matching ROWS are merged (their histograms added) before the stat is taken.
Without ROWS a row stat covers every request row of the window; ``achieved_rps`` is
run-level and takes no ROWS. ``events`` and ``events_per_s`` read count-only rows (their
stats.jsonl event_count and events_per_s): ``ResidentShortfall: events_per_s`` is the resident
set's mean gap, ``Backlog: events`` the swaps a tick could not start.

``VALUE * target`` multiplies by the rate achieved_rps is judged against, in its unit
(docs/SPEC.md §6): turnover, target_rps × level (swaps per second); closed, the steps the
think model put due in the window (closed/StepsDue per second); turns, the arrivals the seeded
Poisson schedule put in the window (turns/Arrivals per second, whose mean is sessions ×
turns_per_hour × level / 3600). ``VALUE * awake`` multiplies by turnover's `awake` (not judged
for other populations). Latencies are measured from the intended time.

Minimum samples: a rule with fewer samples than its minimum is not judged (passed=None).
The default minimum is 1 for latency and ratio stats and 0 for counts and rates, whose
value *is* the number of samples (zero wakes against a target is a real miss).

Server-side figures (docs/SPEC.md §5.9) are a second row source, judged on the window's
server figures instead of its requests::

    server_rule := "server." SERIES "_" FIGURE OP VALUE ["*" "target"] ["(" "min" N ")"]
    FIGURE      := rate | increase | start | end | min | max | mean | samples
    VALUE       := a number, or a byte quantity ("6Gi", "500Mi", "1e9")

e.g. ``server.snapshot_bytes_written_rate < 200Mi``, ``server.parked_requests_max <= 8``,
``server.wakes_rate >= 0.9 * target``. ``min N`` counts the series' samples in the window
(default 1). A server rule cannot abort: it is judged once per window, when the window's
figures are in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentsession_core.errors import UsageError
from agentsession_core.measure.histogram import percentiles_through
from agentsession_core.measure.server_metrics import FIGURES, split_figure
from agentsession_core.script.quantity import QuantityError, parse_duration, parse_quantity

# A rule may name any percentile stats.jsonl reports (docs/SPEC.md §7), so what a gate judges
# can always be found in the run's files.
QUANTILE_STATS = percentiles_through("p99_9")
LATENCY_STATS = (*QUANTILE_STATS, "max", "mean")
RATIO_STATS = ("failure_ratio",)
COUNT_STATS = ("failures", "count", "rps", "events", "events_per_s")
RUN_STATS = ("achieved_rps",)
STATS = LATENCY_STATS + RATIO_STATS + COUNT_STATS + RUN_STATS
SERVER_STAT = "server"  # a rule on a server-side figure (Threshold.server names it)
OPS = ("<=", ">=", "<", ">")
# What `VALUE * NAME` may scale by (the caller supplies the numbers per window).
REFERENCES = ("target", "awake")
References = Mapping[str, float | None]
_ALIASES = {"avg": "mean", "p100": "max"}
_PERCENTILE_CALL = re.compile(r"^p\(\s*([0-9]+(?:\.[0-9]+)?)\s*\)$")

_LINE = re.compile(
    r"""^\s*
    (?:(?P<rows>[A-Za-z0-9_*?\[\]!./\-]+
        (?::[A-Za-z0-9_*?\[\]!.\-]+=[A-Za-z0-9_*?\[\]!.\-]+)?)\s*:\s*)?
    (?P<stat>[A-Za-z_][A-Za-z0-9_]*(?:\(\s*[0-9.]+\s*\))?)\s*
    (?P<op><=|>=|<|>|==|!=|=)\s*
    (?P<value>[^\s*()]+)\s*
    (?P<factor>\*\s*(?P<target>[A-Za-z_]+)\s*)?
    (?:\((?P<options>[^)]*)\)\s*)?
    $""",
    re.VERBOSE,
)
_SERVER_LINE = re.compile(
    r"""^\s*server\.(?P<figure>[A-Za-z0-9_]+)\s*
    (?P<op><=|>=|<|>|==|!=|=)\s*
    (?P<value>[^\s*()]+)\s*
    (?P<factor>\*\s*(?P<target>[A-Za-z_]+)\s*)?
    (?:\((?P<options>[^)]*)\)\s*)?
    $""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Threshold:
    """One parsed rule; `value` is in ms for latency stats."""

    text: str
    rows: str | None
    stat: str
    op: str
    value: float
    target_factor: float | None = None
    min_samples: int = 1
    abort: bool = False
    reference: str = "target"  # what target_factor scales (REFERENCES)
    server: str | None = None  # a server figure, e.g. "snapshot_bytes_written_rate"

    def bound(self, target: float | References | None) -> float | None:
        """The number to compare against; None when it needs a reference and has none.
        `target` is the window's references by name, or the `target` number alone."""
        if self.target_factor is None:
            return self.value
        if isinstance(target, Mapping):
            scale = target.get(self.reference)
        else:
            scale = target if self.reference == "target" else None
        return None if scale is None else self.target_factor * scale

    def holds(self, observed: float, target: float | References | None) -> bool | None:
        bound = self.bound(target)
        if bound is None:
            return None
        return {
            "<": observed < bound,
            "<=": observed <= bound,
            ">": observed > bound,
            ">=": observed >= bound,
        }[self.op]


def _fail(where: str, text: str, why: str) -> UsageError:
    return UsageError(f"{where}: {why} in threshold {text!r}")


def _stat(raw: str, where: str, text: str) -> str:
    call = _PERCENTILE_CALL.match(raw)
    if call:  # k6 spelling: p(99) -> p99, p(99.9) -> p99_9
        number = call.group(1)
        if "." in number:
            number = number.rstrip("0").rstrip(".")
        raw = "p" + number.replace(".", "_")
    stat = _ALIASES.get(raw, raw)
    if stat not in STATS:
        raise _fail(where, text, f"unknown statistic {raw!r} (one of {', '.join(STATS)})")
    return stat


def _number(raw: str, where: str, text: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise _fail(where, text, f"{raw!r} is not a number") from None
    if not math.isfinite(value):
        raise _fail(where, text, f"{raw!r} is not a finite number")
    return value


def _value(raw: str, stat: str, where: str, text: str) -> float:
    if stat in LATENCY_STATS and re.search(r"[a-zµ]", raw):
        try:
            return parse_duration(raw) / 1e6
        except QuantityError as exc:
            raise _fail(where, text, str(exc)) from None
    if stat in RATIO_STATS and raw.endswith("%"):
        return _number(raw[:-1], where, text) / 100.0
    return _number(raw, where, text)


def _options(raw: str | None, where: str, text: str) -> tuple[int | None, bool]:
    min_samples: int | None = None
    abort = False
    if raw is None:
        return None, False
    for part in (p.strip() for p in raw.split(",")):
        words = part.split()
        if words == ["abort"]:
            abort = True
        elif len(words) == 2 and words[0] == "min" and words[1].isdigit():
            min_samples = int(words[1])
        else:
            raise _fail(where, text, f"unknown option {part!r} (use 'min N' or 'abort')")
    return min_samples, abort


def parse_threshold(text: str, *, where: str = "thresholds", abort: bool = False) -> Threshold:
    """Parse one rule; `abort=True` marks it as an abort rule whatever its options say."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"{where}: empty threshold")
    if text.lstrip().startswith("server."):
        return _server_threshold(text, where, abort)
    m = _LINE.match(text)
    if m is None:
        raise _fail(where, text, "expected '[ROWS:] STAT OP VALUE [* target] [(min N)]'")
    stat = _stat(m["stat"], where, text)
    op = m["op"]
    if op not in OPS:
        raise _fail(where, text, f"operator {op!r} is not one of {' '.join(OPS)}")
    rows = m["rows"]
    if stat in RUN_STATS and rows is not None:
        raise _fail(where, text, f"{stat} is run-level and takes no row pattern")
    factor: float | None = None
    reference = "target"
    if m["factor"]:
        reference = m["target"]
        if reference not in REFERENCES:
            raise _fail(
                where, text, f"only '* target' or '* awake' may scale a value, not {reference!r}"
            )
        if stat in LATENCY_STATS:
            raise _fail(where, text, "a latency cannot be scaled by the target")
        factor = _number(m["value"], where, text)
        value = factor
    else:
        value = _value(m["value"], stat, where, text)
    if value < 0 or (factor is not None and factor < 0):
        raise _fail(where, text, "a threshold value cannot be negative")
    min_samples, abort_option = _options(m["options"], where, text)
    if min_samples is None:
        min_samples = 0 if stat in COUNT_STATS + RUN_STATS else 1
    return Threshold(
        text=text.strip(),
        rows=rows if stat not in RUN_STATS else None,
        stat=stat,
        op=op,
        value=value,
        target_factor=factor,
        min_samples=min_samples,
        abort=abort or abort_option,
        reference=reference,
    )


def _server_threshold(text: str, where: str, abort: bool) -> Threshold:
    m = _SERVER_LINE.match(text)
    if m is None:
        raise _fail(where, text, "expected 'server.SERIES_FIGURE OP VALUE [* target] [(min N)]'")
    figure = m["figure"]
    if split_figure(figure) is None:
        raise _fail(where, text, f"{figure!r} does not end in a figure ({', '.join(FIGURES)})")
    op = m["op"]
    if op not in OPS:
        raise _fail(where, text, f"operator {op!r} is not one of {' '.join(OPS)}")
    min_samples, abort_option = _options(m["options"], where, text)
    if abort or abort_option:
        raise _fail(where, text, "a server figure is judged per window and cannot abort")
    factor: float | None = None
    if m["factor"]:
        if m["target"] != "target":
            raise _fail(where, text, f"only '* target' may scale a value, not {m['target']!r}")
        factor = value = _number(m["value"], where, text)
    else:
        try:
            value = _number(m["value"], where, text)
        except UsageError:
            try:  # a byte quantity: 6Gi, 500Mi
                value = float(parse_quantity(m["value"]))
            except QuantityError:
                raise _fail(where, text, f"{m['value']!r} is not a number or a size") from None
    if value < 0:
        raise _fail(where, text, "a threshold value cannot be negative")
    return Threshold(
        text=text.strip(),
        rows=None,
        stat=SERVER_STAT,
        op=op,
        value=value,
        target_factor=factor,
        min_samples=1 if min_samples is None else min_samples,
        server=figure,
    )


def parse_thresholds(
    texts: Sequence[str], *, where: str = "thresholds", abort: bool = False
) -> list[Threshold]:
    """Parse a list; errors name the entry, e.g. ``thresholds[2]``."""
    if isinstance(texts, str):
        texts = [texts]
    return [parse_threshold(t, where=f"{where}[{i}]", abort=abort) for i, t in enumerate(texts)]


__all__ = [
    "LATENCY_STATS",
    "QUANTILE_STATS",
    "RATIO_STATS",
    "REFERENCES",
    "SERVER_STAT",
    "STATS",
    "References",
    "Threshold",
    "parse_threshold",
    "parse_thresholds",
]
