"""A table of judged figures (gate.json's `JudgedFigure`, judge/gate_document.py): each
figure with both sides' values, the change with its interval, the samples and what the gate
made of it. The baseline section (report/compare.py: baseline against this run) and the
paired section (report/paired.py: reference against candidate, with their ratio) both draw
it; they differ only in what the sides are called and which fields hold their values."""

from __future__ import annotations

from dataclasses import dataclass

from agentsession_core.judge.gate_document import JudgedFigure
from agentsession_core.report.svg_chart import esc
from agentsession_core.report.tables import fmt, table


@dataclass(frozen=True)
class Sides:
    """The two sides' column labels and the JudgedFigure fields holding their values."""

    other: str  # "baseline", "reference"
    this: str  # "this run", "candidate"
    other_field: str
    this_field: str


def _value(m: JudgedFigure, field: str) -> str:
    value = getattr(m, field)
    if value is None:
        return "–"
    return f"{value:.2f} ms" if m.unit == "ms" else fmt(value, 3)


def _ratio(m: JudgedFigure) -> str:
    shown = "–" if m.ratio is None else f"{m.ratio:.3f}"
    if m.ratio_interval:
        low, high = m.ratio_interval
        shown += f" <span class=dim>[{low:.3f}, {high:.3f}]</span>"
    return shown


def _change(m: JudgedFigure) -> str:
    shown = "–" if m.change is None else f"{m.change:+.1%}"
    if m.interval:
        shown += f" <span class=dim>[{m.interval[0]:+.1%}, {m.interval[1]:+.1%}]</span>"
    elif m.why:
        shown += f" <span class=dim>({esc(m.why)})</span>"
    return shown


def _count(value: float | None) -> str:
    if value is None:
        return "–"
    return str(int(value)) if float(value).is_integer() else fmt(value, 1)


def _status(m: JudgedFigure) -> str:
    return m.status or ("regressed" if m.regression else "unchanged")


def judged_table(metrics: list[JudgedFigure], sides: Sides, css: str = "") -> str:
    """The table, the ratio column only when a figure has a ratio (the paired comparison)."""
    ratios = any(m.ratio is not None for m in metrics)
    rows = []
    for m in metrics:
        status = _status(m)
        samples = m.samples or {}
        ratio = f"<td>{_ratio(m)}</td>" if ratios else ""
        rows.append(
            f'<tr class="{"bad" if status == "regressed" else ""}"><td>{esc(m.metric)}</td>'
            f"<td>{_value(m, sides.other_field)}</td><td>{_value(m, sides.this_field)}</td>"
            f"{ratio}<td>{_change(m)}</td>"
            f"<td>{_count(samples.get(sides.other_field))} / "
            f"{_count(samples.get(sides.this_field))}</td>"
            f"<td>{esc(m.better or '')} is better</td>"
            f"<td>{'REGRESSION' if status == 'regressed' else esc(status)}</td></tr>"
        )
    head = ["metric", sides.other, sides.this]
    if ratios:
        head.append(f"{sides.this} / {sides.other} [interval]")
    head += [
        "change (+ = worse) [interval]",
        f"samples ({sides.other} / {sides.this})",
        "",
        "judged",
    ]
    return table(head, rows, css)


__all__ = ["Sides", "judged_table"]
