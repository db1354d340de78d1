"""The inline SVG time chart of report.html: no scripts, no external assets, so the report stays
one self-contained file (docs/SPEC.md §7).

A chart is drawn over a shared time axis (seconds since the run's first second, so every
chart of a report lines up), with:

* lines (a percentile, a rate, a gauge state), each with its own colour and dash pattern and
  a legend entry, broken where seconds are missing, with a dot where a point stands alone;
* stacked bars (failures per second by code);
* bands (judged windows shaded by outcome), vertical marks (level changes), and horizontal
  rules (thresholds, limits, a target) with a legend entry and their value written at the
  line's end; a rule far above the data is not allowed to flatten it: its legend entry says
  it lies above the chart.

Long runs are reduced to at most ``chart_scale.MAX_POINTS`` buckets per line: latencies keep
the worst second of each bucket (percentiles are never averaged), rates and counts the mean.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentsession_core.report.chart_scale import (
    Point,
    bucket_seconds,
    fmt_offset,
    fmt_value,
    nice_ticks,
    reduce_points,
    text_width,
    time_step,
)

# A rule above OFF_SCALE x the data's top does not stretch the axis: the legend names it.
OFF_SCALE = 4.0
MARK_LABEL_PX = 130  # marks closer than this put their labels on the next row
MARK_ROWS = 3


def esc(value: Any) -> str:
    """HTML-escaped text. A URL shown as text (a substrate or endpoint parameter, a reason)
    keeps its look but not its form in the source ("://" as character references), so the
    page holds no URL literal at all: nothing in it can be mistaken for a request."""
    return html.escape(str(value), quote=True).replace("://", ":&#47;&#47;")


@dataclass(frozen=True)
class Line:
    label: str
    points: Sequence[Point]
    colour: str
    dash: str = ""  # an SVG stroke-dasharray
    width: float = 1.6
    reduce: Literal["max", "mean"] = "max"
    dots: bool = False  # every point a dot, none joined (e.g. the probes of a search)


@dataclass(frozen=True)
class Rule:
    """A horizontal rule at y over [x0, x1] (unix s; None: the whole width): `label` goes to
    the legend (rules with the same label share one entry), `value` is written at the
    segment's right end, above the line or, for a lower bound (`below`), under it."""

    y: float
    label: str
    colour: str = "#b71c1c"
    x0: float | None = None
    x1: float | None = None
    dash: str = "7 4"
    value: str = ""
    below: bool = False


@dataclass(frozen=True)
class Mark:
    """A vertical mark at x (unix s), labelled at the top."""

    x: float
    label: str
    colour: str = "#37474f"


@dataclass(frozen=True)
class Band:
    x0: float
    x1: float
    colour: str
    label: str = ""


@dataclass
class Chart:
    title: str
    unit: str
    t0: float
    t1: float
    lines: list[Line] = field(default_factory=list)
    bars: list[Line] = field(default_factory=list)  # stacked, in order
    rules: list[Rule] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    width: int = 1400
    height: int = 250
    empty: str = "no data"
    y_max: float | None = None  # a fixed top (e.g. a percentage)
    rules_in_scale: bool = False  # always scale to show the rules (limits far from the data)
    min_legend_rows: int = 1  # charts side by side share one legend height (render_charts)
    # A value axis instead of time (t0..t1 are values; labels carry this unit, e.g. "x"):
    # points are never bucketed and lines join across any gap.
    x_unit: str | None = None

    def has_data(self) -> bool:
        return any(line.points for line in (*self.lines, *self.bars))


class _Frame:
    """The chart's geometry: plot area and scales."""

    def __init__(self, chart: Chart, y_hi: float, y_step: float, legend_rows: int) -> None:
        self.w, self.h = chart.width, chart.height + 18 * (legend_rows - 1)
        self.left, self.right, self.bottom = 58, 14, 26
        self.top = 30 + 18 * legend_rows
        self.pw = self.w - self.left - self.right
        self.ph = self.h - self.top - self.bottom
        self.t0, self.span = chart.t0, max(1.0, chart.t1 - chart.t0)
        self.x_unit = chart.x_unit
        if chart.x_unit is not None:
            self.span = max(1e-9, chart.t1 - chart.t0)
        self.y_hi, self.y_step = y_hi, y_step

    def x(self, t: float) -> float:
        return self.left + min(max((t - self.t0) / self.span, 0.0), 1.0) * self.pw

    def y(self, v: float) -> float:
        return self.top + self.ph - min(max(v / self.y_hi, 0.0), 1.02) * self.ph


def _path(frame: _Frame, points: list[Point], gap: float) -> tuple[str, list[Point]]:
    """An SVG path through the points, broken where more than `gap` seconds are missing;
    and the points that stand alone (drawn as dots)."""
    parts: list[str] = []
    alone: list[Point] = []
    run: list[Point] = []

    def close() -> None:
        if len(run) == 1:
            alone.append(run[0])
        elif run:
            parts.append("M" + " L".join(f"{frame.x(x):.1f},{frame.y(y):.1f}" for x, y in run))

    for point in points:
        if run and point[0] - run[-1][0] > gap:
            close()
            run = []
        run.append(point)
    close()
    return " ".join(parts), alone


_LegendEntry = tuple[str, str, str, float, str]  # (label, colour, dash, width, kind)


def _legend_entries(chart: Chart, y_hi: float) -> list[_LegendEntry]:
    out: list[_LegendEntry] = []
    for line in chart.lines:
        label = line.label if line.points else f"{line.label} (none)"
        kind = "dot" if line.dots else "line"
        out.append((label, line.colour, line.dash, max(line.width, 2.0), kind))
    out += [(bar.label, bar.colour, "", 0.0, "bar") for bar in chart.bars]
    seen: set[str] = set()
    for rule in chart.rules:
        if not rule.label or rule.label in seen:
            continue
        seen.add(rule.label)
        above = rule.y > y_hi * 1.02
        label = f"{rule.label} ({fmt_value(rule.y)}: above the chart)" if above else rule.label
        out.append((label, rule.colour, rule.dash, 1.6, "rule"))
    return out


def _legend_rows(entries: list[_LegendEntry], width: int) -> list[list[tuple[float, _LegendEntry]]]:
    rows: list[list[tuple[float, _LegendEntry]]] = [[]]
    x = 58.0
    for entry in entries:
        size = 44 + text_width(entry[0])
        if rows[-1] and x + size > width - 10:
            rows.append([])
            x = 58.0
        rows[-1].append((x, entry))
        x += size
    return rows


def _legend(rows: list[list[tuple[float, _LegendEntry]]]) -> list[str]:
    out = []
    for i, row in enumerate(rows):
        y = 36 + 18 * i
        for x, (label, colour, dash, width, kind) in row:
            if kind == "bar":
                out.append(
                    f'<rect x="{x:.0f}" y="{y - 9}" width="14" height="10" fill="{colour}"/>'
                )
            elif kind == "dot":
                out.append(f'<circle cx="{x + 12:.0f}" cy="{y - 4}" r="4.5" fill="{colour}"/>')
            else:
                pattern = f' stroke-dasharray="{dash}"' if dash else ""
                out.append(
                    f'<line x1="{x:.0f}" x2="{x + 24:.0f}" y1="{y - 4}" y2="{y - 4}" '
                    f'stroke="{colour}" stroke-width="{width:g}"{pattern}/>'
                )
            out.append(f'<text x="{x + 29:.0f}" y="{y}" class="lg">{esc(label)}</text>')
    return out


def _axes(frame: _Frame) -> list[str]:
    out = []
    for i in range(round(frame.y_hi / frame.y_step) + 1):
        v = frame.y_step * i
        y = frame.y(v)
        out.append(
            f'<line x1="{frame.left}" x2="{frame.left + frame.pw}" y1="{y:.1f}" y2="{y:.1f}" '
            f'class="grid"/><text x="{frame.left - 5}" y="{y + 4:.1f}" class="ax" '
            f'text-anchor="end">{fmt_value(v)}</text>'
        )
    if frame.x_unit is None:
        step = time_step(frame.span, max(3, frame.pw // 110))
    else:
        step = nice_ticks(frame.span)[1]
    k = 0
    while k * step <= frame.span + 1e-9:
        x = frame.x(frame.t0 + k * step)
        label = (
            fmt_offset(k * step)
            if frame.x_unit is None
            else f"{fmt_value(frame.t0 + k * step)}{frame.x_unit}"
        )
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.top + frame.ph}" '
            f'y2="{frame.top + frame.ph + 4}" class="tick"/><text x="{x:.1f}" '
            f'y="{frame.h - 8}" class="ax" text-anchor="middle">{label}</text>'
        )
        k += 1
    return out


def _y_axis(
    chart: Chart, reduced: list[tuple[Line, list[Point]]], stacked: list[float]
) -> tuple[float, float]:
    if chart.y_max is not None:
        return chart.y_max, chart.y_max / 4
    data_hi = max([y for _, pts in reduced for _, y in pts] + stacked + [0.0])
    rules = [
        r.y
        for r in chart.rules
        if chart.rules_in_scale or data_hi == 0 or r.y <= OFF_SCALE * data_hi
    ]
    return nice_ticks(max([data_hi, *rules]) * 1.04)


@dataclass
class _Layout:
    """What a chart's drawing needs before it starts: reduced points, y axis, legend."""

    bucket: float
    reduced: list[tuple[Line, list[Point]]]
    bars: list[tuple[Line, list[Point]]]
    y_hi: float
    y_step: float
    legend: list[list[tuple[float, _LegendEntry]]]

    @classmethod
    def of(cls, chart: Chart) -> _Layout:
        bucket = 1.0 if chart.x_unit is not None else bucket_seconds(chart.t0, chart.t1)
        reduced = [(line, reduce_points(line.points, bucket, line.reduce)) for line in chart.lines]
        bars = [(bar, reduce_points(bar.points, bucket, "mean")) for bar in chart.bars]
        heights: dict[float, float] = {}
        for _, pts in bars:
            for x, y in pts:
                heights[x] = heights.get(x, 0.0) + y
        y_hi, y_step = _y_axis(chart, reduced, list(heights.values()))
        legend = _legend_rows(_legend_entries(chart, y_hi), chart.width)
        return cls(bucket, reduced, bars, y_hi, y_step, legend)


def render_charts(charts: Sequence[Chart], captions: Sequence[str] = ()) -> list[str]:
    """Charts shown side by side: the same legend height, so their plots line up."""
    rows = max((len(_Layout.of(c).legend) for c in charts if c.has_data()), default=1)
    for chart in charts:
        chart.min_legend_rows = rows
    return [
        render_chart(chart, captions[i] if i < len(captions) else "")
        for i, chart in enumerate(charts)
    ]


def render_chart(chart: Chart, caption: str = "") -> str:
    """The chart as a <figure> holding one inline SVG (or a "no data" box)."""
    note = f'<figcaption class="cap">{caption}</figcaption>' if caption else ""
    if not chart.has_data():
        return (
            f'<figure class="chart"><div class="ct">{esc(chart.title)}</div>'
            f'<div class="nodata" style="height:{chart.height * 3 // 4}px">{esc(chart.empty)}</div>'
            f"{note}</figure>"
        )
    layout = _Layout.of(chart)
    bucket, reduced, bars, legend = layout.bucket, layout.reduced, layout.bars, layout.legend
    rows = max(len(legend), chart.min_legend_rows)
    frame = _Frame(chart, layout.y_hi, layout.y_step, rows)
    svg = [
        f'<svg viewBox="0 0 {frame.w} {frame.h}" role="img" aria-label="{esc(chart.title)}">',
        f'<text x="{frame.left}" y="16" class="ct">{esc(chart.title)}'
        f'<tspan class="ax" dx="8">{esc(chart.unit)}</tspan></text>',
    ]
    for band in chart.bands:
        x0, x1 = frame.x(band.x0), frame.x(band.x1)
        svg.append(
            f'<rect x="{x0:.1f}" y="{frame.top}" width="{max(0.5, x1 - x0):.1f}" '
            f'height="{frame.ph}" fill="{band.colour}" opacity="0.55"/>'
        )
        if band.label and x1 - x0 > 30:
            svg.append(
                f'<text x="{x0 + 3:.1f}" y="{frame.top + frame.ph - 4}" class="bl">'
                f"{esc(band.label)}</text>"
            )
    svg += _axes(frame)
    svg += _legend(legend)
    bar_w = max(0.8, frame.pw / frame.span * bucket * 0.85)
    base: dict[float, float] = {}
    for bar, pts in bars:
        for x, y in pts:
            below = base.get(x, 0.0)
            top, bottom = frame.y(below + y), frame.y(below)
            svg.append(
                f'<rect x="{frame.x(x):.1f}" y="{top:.1f}" width="{bar_w:.1f}" '
                f'height="{max(0.5, bottom - top):.1f}" fill="{bar.colour}"/>'
            )
            base[x] = below + y
    for line, pts in reduced:
        if line.dots:
            svg += [
                f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="5" '
                f'fill="{line.colour}" stroke="#fff" stroke-width="1"/>'
                for x, y in pts
            ]
            continue
        gap = math.inf if chart.x_unit is not None else 1.5 * bucket
        path, alone = _path(frame, pts, gap=gap)
        dash = f' stroke-dasharray="{line.dash}"' if line.dash else ""
        if path:
            svg.append(
                f'<path d="{path}" fill="none" stroke="{line.colour}" '
                f'stroke-width="{line.width:g}" stroke-linejoin="round"{dash}/>'
            )
        for x, y in alone:
            svg.append(
                f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="2.6" '
                f'fill="{line.colour}"/>'
            )
    svg += _rules(chart, frame)
    svg += _marks(chart, frame)
    svg.append("</svg>")
    suffix = ""
    if bucket > 1:
        suffix = f"{bucket:g} s buckets: latencies the worst second, rates the mean"
    return f'<figure class="chart">{"".join(svg)}{note}{_small(suffix)}</figure>'


def _marks(chart: Chart, frame: _Frame) -> list[str]:
    """The vertical marks. Labels of marks closer than MARK_LABEL_PX step down a row (up to
    MARK_ROWS, then round again), and one near the right edge ends at its line, so marks made
    seconds apart (changes by hand) stay readable."""
    out = []
    last_x, row = -math.inf, 0
    for mark in sorted(chart.marks, key=lambda m: m.x):
        x = frame.x(mark.x)
        row = (row + 1) % MARK_ROWS if x - last_x < MARK_LABEL_PX else 0
        last_x = x
        y = frame.top + 9 + 12 * row
        near_edge = x > frame.left + frame.pw - MARK_LABEL_PX
        tx, anchor = (x - 3, ' text-anchor="end"') if near_edge else (x + 3, "")
        # The class sets the usual colour; another (a change by hand) is set inline.
        fill = f' style="fill:{mark.colour}"' if mark.colour != Mark.colour else ""
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.top - 2}" y2="{frame.top + frame.ph}" '
            f'stroke="{mark.colour}" stroke-width="1.4" stroke-dasharray="3 3"/>'
            f'<text x="{tx:.1f}" y="{y}" class="mk"{anchor}{fill}>{esc(mark.label)}</text>'
        )
    return out


def _small(text: str) -> str:
    return f'<figcaption class="cap dim">{esc(text)}</figcaption>' if text else ""


def _rules(chart: Chart, frame: _Frame) -> list[str]:
    out = []
    for rule in chart.rules:
        if rule.y > frame.y_hi * 1.02:
            continue  # named in the legend as above the chart
        x0 = frame.x(chart.t0 if rule.x0 is None else rule.x0)
        x1 = frame.x(chart.t1 if rule.x1 is None else rule.x1)
        y = frame.y(rule.y)
        out.append(
            f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{rule.colour}" stroke-width="1.6" stroke-dasharray="{rule.dash}"/>'
        )
        if rule.value and x1 - x0 > 40:
            ty = y + 13 if rule.below else y - 4
            out.append(
                f'<text x="{x1 - 3:.1f}" y="{ty:.1f}" class="rl" text-anchor="end" '
                f'fill="{rule.colour}">{esc(rule.value)}</text>'
            )
    return out


__all__ = [
    "Band",
    "Chart",
    "Line",
    "Mark",
    "Rule",
    "esc",
    "render_chart",
    "render_charts",
]
