"""Scales of report.html's charts: round y-axis steps, time-axis steps and labels, value
labels, reducing long series to bounded buckets, and guessing text widths (a static page has
no font metrics)."""

from __future__ import annotations

import math
from collections.abc import Sequence

MAX_POINTS = 600
Point = tuple[float, float]


def nice_ticks(value: float) -> tuple[float, float]:
    """(top, step) of a y axis showing 0..value in 3 to 5 round steps."""
    if value <= 0 or not math.isfinite(value):
        return 1.0, 0.25
    raw = value / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * 0.9999)
    return step * math.ceil(value / step - 1e-9), step


def nice_max(value: float) -> float:
    return nice_ticks(value)[0]


def time_step(span: float, ticks: int = 8) -> float:
    raw = max(span, 1.0) / ticks
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400):
        if step >= raw:
            return float(step)
    return 3600.0 * math.ceil(raw / 3600.0)


def fmt_offset(seconds: float) -> str:
    """Seconds since the run's start as an axis label: 45s, 2m, 1m30, 1h05."""
    s = round(seconds)
    if abs(s) < 120:
        return f"{s}s"
    if abs(s) < 3600:
        return f"{s // 60}m" if s % 60 == 0 else f"{s // 60}m{s % 60:02d}"
    return f"{s // 3600}h{(s % 3600) // 60:02d}"


def fmt_value(y: float) -> str:
    if y == 0:
        return "0"
    if abs(y) >= 10000:
        return f"{y / 1000:g}k"
    if abs(y) >= 100:
        return f"{y:.0f}"
    return f"{y:.3g}"


def reduce_points(points: Sequence[Point], bucket: float, how: str) -> list[Point]:
    """Points in buckets of `bucket` seconds: each bucket's worst ("max") or mean value."""
    if bucket <= 1 or not points:
        return sorted(points)
    grouped: dict[float, list[float]] = {}
    for x, y in points:
        grouped.setdefault(math.floor(x / bucket) * bucket, []).append(y)
    if how == "max":
        return [(x, max(ys)) for x, ys in sorted(grouped.items())]
    return [(x, sum(ys) / bucket) for x, ys in sorted(grouped.items())]


def bucket_seconds(t0: float, t1: float) -> float:
    span = max(1.0, t1 - t0)
    return 1.0 if span <= MAX_POINTS else float(math.ceil(span / MAX_POINTS))


# --------------------------------------------------------------------------- drawing


def text_width(text: str, size: float = 12.0) -> float:
    """About how wide `text` is in a sans-serif font (no font metrics in a static page)."""
    wide = sum(1 for c in text if c.isupper() or c.isdigit() or c in "mwMW_%")
    narrow = sum(1 for c in text if c in "ijlt.,:;!|' ()[]")
    return size * (0.7 * wide + 0.32 * narrow + 0.58 * (len(text) - wide - narrow))


__all__ = [
    "MAX_POINTS",
    "Point",
    "bucket_seconds",
    "fmt_offset",
    "fmt_value",
    "nice_max",
    "nice_ticks",
    "reduce_points",
    "text_width",
    "time_step",
]
