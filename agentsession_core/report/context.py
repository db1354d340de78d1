"""What every chart of one report shares: the time axis, the judged windows as bands, the
level changes as marks, the threshold rules, and the styles that keep p50 / p90 / p99 apart.

Threshold rules arrive as data: any object with the fields of ``judge.thresholds.Threshold``
(output sits below judge and never imports it; the caller parses campaign.json's rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Protocol

from agentsession_core.report.chart_scale import fmt_value
from agentsession_core.report.data import Points, RowKey, RunData, number
from agentsession_core.report.svg_chart import Band, Chart, Line, Mark, Rule, esc

# p99 drawn first and widest, p90 dashed over it, p50 on top: three lines that stay apart
# even where two of them coincide (few samples in a second).
PERCENTILE_STYLE = {
    "p99": ("#c62828", "", 2.4),
    "p90": ("#ef6c00", "7 4", 2.0),
    "p50": ("#1565c0", "", 1.6),
}
MANUAL_COLOUR = "#d84315"  # a change by hand's mark, apart from the level marks
OUTCOME_COLOURS = {
    "pass": "#c8e6c9",
    "break": "#ffcdd2",
    "void": "#d6d6d6",
    "aborted": "#ef9a9a",
    "fail": "#ffcdd2",
}
LATENCY_STATS = ("p50", "p66", "p75", "p80", "p90", "p95", "p98", "p99", "p99_9", "max", "mean")
CHART_SIZES = {"wide": 1400, "half": 690, "small": 460}


class ThresholdRule(Protocol):
    """The fields of judge.thresholds.Threshold the report reads."""

    @property
    def text(self) -> str: ...
    @property
    def rows(self) -> str | None: ...
    @property
    def stat(self) -> str: ...
    @property
    def op(self) -> str: ...
    @property
    def value(self) -> float: ...
    @property
    def target_factor(self) -> float | None: ...
    @property
    def server(self) -> str | None: ...


def row_matches(key: RowKey, pattern: str) -> bool:
    """A rule's row pattern against a row: its name or its metric `<kind>_<name>` (the
    judge's rule, judge.verdict.matches)."""
    kind, name = key
    return fnmatchcase(name, pattern) or fnmatchcase(f"{kind}_{name}", pattern)


@dataclass
class ReportContext:
    data: RunData
    rules: Sequence[ThresholdRule] = ()
    t0: float = 0.0
    t1: float = 1.0
    bands: list[Band] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)

    @classmethod
    def of(cls, data: RunData, rules: Sequence[ThresholdRule] = ()) -> ReportContext:
        t0, t1 = data.span()
        ctx = cls(data, rules, t0, t1)
        previous: float | None = None
        for w in data.windows:
            start, end = number(w.get("start_unix")), number(w.get("end_unix"))
            if start is None or end is None:
                continue
            outcome = str(w.get("outcome"))
            ctx.bands.append(
                Band(start, end, OUTCOME_COLOURS.get(outcome, "#eeeeee"), f"w{w.get('index')}")
            )
            level = number(w.get("level"))
            if level is not None and level != previous:
                label = f"{level:g}×" if previous is not None else f"hold {level:g}×"
                ctx.marks.append(Mark(start, label))
                previous = level
        turnover = number(data.stats_row("turnover_window").get("start_unix"))
        if not ctx.marks and turnover is not None:  # an unjudged run: where turnover began
            ctx.marks.append(Mark(turnover, "turnover"))
        for change in data.changes:  # by hand, through the control API (docs/SPEC.md §5.10)
            at = number(change.get("at_unix"))
            if at is not None:
                ctx.marks.append(Mark(at, f"manual: {change.get('label')}", MANUAL_COLOUR))
        return ctx

    def chart(self, title: str, unit: str, *, size: str = "wide", height: int = 0) -> Chart:
        """A chart on the report's time axis, windows and level marks; `size` is "wide"
        (the page's width), "half" or "small" (a third), so text keeps one size."""
        width = CHART_SIZES[size]
        return Chart(
            title,
            unit,
            self.t0,
            self.t1,
            bands=list(self.bands),
            marks=list(self.marks),
            width=width,
            height=height or (210 if size == "small" else 250),
        )

    # ------------------------------------------------------------ thresholds
    def latency_rules(self, key: RowKey | None) -> list[Rule]:
        """Latency thresholds that name this row (None: the all-requests chart)."""
        out = []
        for rule in self.rules:
            if rule.stat not in LATENCY_STATS or rule.target_factor is not None:
                continue
            if key is None and rule.rows is not None:
                continue
            if key is not None and (rule.rows is None or not row_matches(key, rule.rows)):
                continue
            colour = PERCENTILE_STYLE.get(rule.stat, ("#6a1b9a", "", 0))[0]
            value = f"{rule.op} {fmt_value(rule.value)} ms"
            out.append(Rule(rule.value, rule.text, colour, value=value, below=">" in rule.op))
        return out

    def achieved_rules(self) -> list[Rule]:
        """achieved_rps thresholds: per window at the bound the judge held it to (`* target`
        is in the population's own unit, docs/SPEC.md §6), or one number for the whole run."""
        out = []
        for rule in self.rules:
            if rule.stat != "achieved_rps":
                continue
            below = ">" in rule.op
            if rule.target_factor is None:
                value = f"{rule.op} {fmt_value(rule.value)}"
                out.append(Rule(rule.value, rule.text, value=value, below=below))
                continue
            for x0, x1, bound in self.window_bounds(rule.text):
                value = f"{rule.op} {fmt_value(bound)}"
                out.append(Rule(bound, rule.text, x0=x0, x1=x1, value=value, below=below))
        return out

    def window_bounds(self, text: str) -> list[tuple[float, float, float]]:
        """(start, end, bound) of each window that judged the rule `text` against a number."""
        out = []
        for w in self.data.windows:
            start, end = number(w.get("start_unix")), number(w.get("end_unix"))
            result = next(
                (r for r in w.get("thresholds") or [] if r.get("threshold") == text), None
            )
            bound = number((result or {}).get("bound"))
            if start is not None and end is not None and bound is not None:
                out.append((start, end, bound))
        return out

    def window_levels(self) -> list[tuple[float | None, float | None, float]]:
        """(start, end, level) of each stretch of windows at one level; in a run without
        windows, of each level set by hand."""
        out: list[tuple[float | None, float | None, float]] = []
        if not self.data.windows:
            return self.manual_levels()
        for w in self.data.windows:
            start, end, level = (number(w.get(k)) for k in ("start_unix", "end_unix", "level"))
            if start is None or end is None:
                continue
            level = 1.0 if level is None else level
            if out and out[-1][2] == level and out[-1][1] == start:
                out[-1] = (out[-1][0], end, level)
            else:
                out.append((start, end, level))
        return out

    def manual_levels(self) -> list[tuple[float | None, float | None, float]]:
        """(start, end, level) between the levels set by hand ([] when none was)."""
        changes = [
            (at, level, number(c.get("level_before")) or 1.0)
            for c in self.data.changes
            if c.get("name") == "level"
            and (at := number(c.get("at_unix"))) is not None
            and (level := number(c.get("level"))) is not None
        ]
        if not changes:
            return []
        out: list[tuple[float | None, float | None, float]] = [(None, changes[0][0], changes[0][2])]
        for i, (at, level, _) in enumerate(changes):
            end = changes[i + 1][0] if i + 1 < len(changes) else None
            out.append((at, end, level))
        return out

    def untracked_rules(self) -> list[ThresholdRule]:
        """Rules no chart draws (failure ratios, counts): named in captions instead. A rule on
        a server figure is drawn by the server section (server.py)."""
        return [
            r
            for r in self.rules
            if r.stat not in LATENCY_STATS and r.stat != "achieved_rps" and r.server is None
        ]


def section(anchor: str, title: str, body: str, intro: str = "") -> str:
    """A report section: its <h2> carries the id the page's index links to."""
    lead = f'<p class="meta">{intro}</p>' if intro else ""
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{lead}{body}</section>'


def grid(parts: list[str], columns: int = 3) -> str:
    return f'<div class="grid{columns}">{"".join(parts)}</div>'


def percentile_lines(series: dict[str, Points], prefix: str = "") -> list[Line]:
    return [
        Line(f"{prefix}{key}", series.get(key, []), colour, dash, width)
        for key, (colour, dash, width) in PERCENTILE_STYLE.items()
    ]


def sum_points(series: Sequence[Points]) -> Points:
    total: dict[float, float] = {}
    for points in series:
        for t, v in points:
            total[t] = total.get(t, 0.0) + v
    return sorted(total.items())


def minus(a: Points, b: Points) -> Points:
    sub = dict(b)
    return [(t, max(0.0, v - sub.get(t, 0.0))) for t, v in a]


__all__ = [
    "CHART_SIZES",
    "OUTCOME_COLOURS",
    "PERCENTILE_STYLE",
    "ReportContext",
    "ThresholdRule",
    "grid",
    "minus",
    "percentile_lines",
    "row_matches",
    "section",
    "sum_points",
]
