"""The inline SVG line chart of report.html: no scripts, no external assets, so the report
stays one self-contained file (docs/SPEC.md §7).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 760, 220, 60, 110, 24, 30


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def line_chart(
    title: str,
    series: dict[str, tuple[str, list[tuple[float, float]]]],
    *,
    unit: str,
    t0: float,
    bands: Sequence[tuple[float, float, str]] = (),
) -> str:
    """An inline SVG: series = {label: (colour, [(unix s, y)])}; bands shade x ranges."""
    points = [p for _, pts in series.values() for p in pts]
    if not points:
        return f'<p class="empty">{esc(title)}: no data</p>'
    xs = [x - t0 for x, _ in points] + [b[1] - t0 for b in bands] + [b[0] - t0 for b in bands]
    x_lo, x_hi = min(0.0, *xs), max(1.0, *xs)
    y_hi = _nice_max(max(y for _, y in points))
    plot_w, plot_h = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B

    def sx(x: float) -> float:
        return _PAD_L + (x - t0 - x_lo) / (x_hi - x_lo) * plot_w

    def sy(y: float) -> float:
        return _PAD_T + plot_h - (y / y_hi) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'role="img" aria-label="{esc(title)}">',
        f'<text x="{_PAD_L}" y="15" class="ct">{esc(title)}</text>',
    ]
    for x0, x1, colour in bands:
        parts.append(
            f'<rect x="{sx(x0):.1f}" y="{_PAD_T}" width="{max(0.5, sx(x1) - sx(x0)):.1f}"'
            f' height="{plot_h}" fill="{colour}" opacity="0.6"/>'
        )
    for i in range(5):
        y = y_hi * i / 4
        parts.append(
            f'<line x1="{_PAD_L}" x2="{_PAD_L + plot_w}" y1="{sy(y):.1f}" '
            f'y2="{sy(y):.1f}" class="grid"/>'
        )
        parts.append(
            f'<text x="{_PAD_L - 4}" y="{sy(y) + 4:.1f}" class="ax" text-anchor="end">{y:g}</text>'
        )
    for i in range(6):
        x = x_lo + (x_hi - x_lo) * i / 5
        parts.append(
            f'<text x="{sx(x + t0):.1f}" y="{_H - 10}" class="ax" '
            f'text-anchor="middle">{x:.0f}s</text>'
        )
    parts.append(
        f'<text x="8" y="{_PAD_T + plot_h / 2:.0f}" class="ax" '
        f'transform="rotate(-90 8 {_PAD_T + plot_h / 2:.0f})">{esc(unit)}</text>'
    )
    for n, (label, (colour, pts)) in enumerate(series.items()):
        if not pts:
            continue
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(pts))
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
        )
        ly = _PAD_T + 14 + n * 16
        parts.append(
            f'<rect x="{_W - _PAD_R + 10}" y="{ly - 9}" width="10" height="10" '
            f'fill="{colour}"/><text x="{_W - _PAD_R + 24}" y="{ly}" '
            f'class="ax">{esc(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


__all__ = ["esc", "line_chart"]
