"""The paired section of report.html: a paired campaign's two arms side by side (docs/SPEC.md
§6.8). The candidate is the run's own target, the reference the arm beside it; the table is
gate.json's `paired` section (handed in as data: the judge compares, the report renders),
each figure with both arms' values, the ratio candidate / reference with its interval and
what the gate made of it; the charts draw both arms' TimeToWake per second on the page's
time axis, so a stretch where they part is seen where it happened.
"""

from __future__ import annotations

from agentsession_core.judge.gate_document import Paired
from agentsession_core.measure.stats import REFERENCE, TIME_TO_WAKE_ROW, arm_row
from agentsession_core.report.context import ReportContext, grid, section
from agentsession_core.report.judged import Sides, judged_table
from agentsession_core.report.svg_chart import Line, esc, render_charts

CANDIDATE_COLOUR = "#c62828"
REFERENCE_COLOUR = "#757575"


PAIRED_SIDES = Sides("reference", "candidate", "reference", "candidate")


def paired_table(paired: Paired) -> str:
    if not paired.metrics:
        return f'<p class="nodata">{esc(paired.why or "no figure compared")}</p>'
    return judged_table(paired.metrics, PAIRED_SIDES, "wide")


def _over_time(ctx: ReportContext) -> str:
    kind, name = TIME_TO_WAKE_ROW
    mine = ctx.data.row(kind, name).view("latency")
    theirs = ctx.data.row(kind, arm_row(name, REFERENCE)).view("latency")
    charts = []
    for key in ("p50", "p99"):
        chart = ctx.chart(f"TimeToWake {key} per second, both arms", "ms", size="half")
        chart.lines = [
            Line("reference", theirs.get(key, []), REFERENCE_COLOUR, "6 3", 2.2),
            Line("candidate", mine.get(key, []), CANDIDATE_COLOUR, "", 2.0),
        ]
        charts.append(chart)
    return grid(render_charts(charts), 2)


def paired_section(ctx: ReportContext) -> str:
    paired = ctx.data.gate.paired if ctx.data.gate else None
    if paired is None:
        return ""
    limit = paired.max_regression or 0.0
    confidence = paired.confidence or 0.99
    dropped = paired.blocks_dropped or 0
    intro = (
        f"the candidate (target) and the reference arm ran side by side from one generator; "
        f"judged over {esc(paired.blocks)} paired blocks of "
        f"{esc(paired.block_seconds)} s ({dropped} dropped from both arms: the "
        f"generator saturated in them), {esc(paired.method)}; rule "
        f"<code>{esc(paired.rule)}</code>, a regression is worse by more than "
        f"{limit:.0%} at {confidence:.0%}; comparison {esc(paired.status)}"
    )
    if paired.status == "void":
        intro += f": {esc(paired.why)}"
    body = paired_table(paired) + "<h3>Over time</h3>" + _over_time(ctx)
    return section("paired", "Candidate against reference", body, intro)


__all__ = ["paired_section", "paired_table"]
