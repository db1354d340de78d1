"""report.html: one self-contained page (inline SVG and CSS: no scripts, no request to
anywhere) rebuilt from a run's files alone, so an uploaded run renders the same as a local
one (docs/SPEC.md §7).

The page, top to bottom: the verdict and the headline figures; the judged windows with the
rule that decided each and every threshold against every window; a paired campaign's
candidate against its reference arm; the baseline comparison (when there is one); the
capacity search's knee curve and probes (when it ran; the knee's chart alone has a level
axis); throughput against target; failures by code; latency from the
intended time beside service time and start lag; per-step latency; generator health with its
void limits; the turnover gauge with the resident set asked for; the substrate's own figures
per window (server_summary.json) with its `server.` rules; ramp and drift; the whole-run
rows; the run's parameters and thresholds; links to the other artifacts. Every chart shares
one time axis, shades the windows by outcome, marks level changes and draws the thresholds
that apply to it. Every input is optional: what is missing says "no data".

The package's other modules: data (reading, through output/stored_files.py), context (what
charts share), svg_chart + chart_scale (SVG), charts / tables / params / compare / knee /
server / wake_split (sections; server_data reads server_summary.json's figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentsession_core.output.run_dir import atomic_write
from agentsession_core.output.stored_files import StoredFiles, open_files
from agentsession_core.report import charts, tables
from agentsession_core.report import params as run_info
from agentsession_core.report.compare import Comparison, baseline_section
from agentsession_core.report.context import ReportContext, ThresholdRule
from agentsession_core.report.data import RunData, load_run_data
from agentsession_core.report.knee import capacity_section
from agentsession_core.report.paired import paired_section
from agentsession_core.report.server import server
from agentsession_core.report.svg_chart import esc

REPORT = "report.html"
INDEX = (
    ("windows", "windows"),
    ("figures", "figures"),
    ("paired", "candidate vs reference"),
    ("baseline", "baseline"),
    ("capacity", "capacity"),
    ("throughput", "throughput"),
    ("failures", "failures"),
    ("latency", "latency"),
    ("steps", "steps"),
    ("health", "generator health"),
    ("gauge", "turnover gauge"),
    ("server", "server-side figures"),
    ("drift", "ramp & drift"),
    ("rows", "rows"),
    ("params", "parameters"),
    ("files", "artifacts"),
)

_CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;padding:16px 28px 40px;
color:#1f2328;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:30px 0 8px;padding-top:10px;
border-top:2px solid #e3e6ea}h3{font-size:15px;margin:16px 0 6px}
nav{margin:8px 0 12px;font-size:13px}nav a{margin-right:12px;color:#0b5cad;text-decoration:none}
.banner{color:#fff;padding:12px 18px;border-radius:6px;font-size:16px;margin:8px 0}
.verdict{font-weight:700;font-size:24px;margin-right:10px}.sub{font-size:14px;margin-top:4px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0 2px}
.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 14px;min-width:180px}
.card .k{font-size:12px;color:#57606a}.card .v{font-size:19px;font-weight:600}
table{border-collapse:collapse;margin:6px 0 10px}td,th{border:1px solid #d0d7de;padding:4px 9px;
text-align:left;font-size:13px;vertical-align:top}th{background:#f3f5f7}
table.wide{width:100%}td.oc{font-weight:600;text-align:center}td.why{max-width:560px}
tr.bad td{background:#ffcdd2}table.params td:first-child{font-family:ui-monospace,monospace}
.dim{color:#6e7781}.meta{color:#57606a;font-size:13px;margin:4px 0}
.nodata{color:#6e7781;font-style:italic;border:1px dashed #c4cad0;border-radius:6px;
display:flex;align-items:center;justify-content:center;margin:4px 0}p.nodata{padding:18px}
p.refused{border-left:4px solid #cf222e;background:#fff1f0;padding:8px 12px}
.grid3{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:8px 18px}
.grid2{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:8px 18px}
@media (max-width:1100px){.grid3,.grid2{grid-template-columns:minmax(0,1fr)}}
figure.chart{margin:4px 0 10px}figure.chart svg{width:100%;height:auto;display:block}
.cap{font-size:12px;color:#57606a;margin:0 0 0 58px}
svg .ct{font-size:14px;font-weight:600;fill:#1f2328}svg .ax{font-size:11px;fill:#57606a;
font-weight:400}svg .lg{font-size:12px;fill:#1f2328}svg .grid{stroke:#e6e8eb}
svg .tick{stroke:#8c959f}svg .bl{font-size:11px;fill:#57606a}svg .mk{font-size:12px;
font-weight:600;fill:#37474f}svg .rl{font-size:11.5px;font-weight:600;paint-order:stroke;
stroke:#fff;stroke-width:3px}div.ct{font-size:14px;font-weight:600;margin:4px 0}
ul.files{columns:3;font-size:13px}figure.chart .nodata{margin-top:26px}
figure>div.ct{padding-left:4%}
code{font-size:12.5px}td.nw{white-space:nowrap}
.pgrid{display:flex;flex-wrap:wrap;gap:0 18px;align-items:flex-start}
"""


def render(
    data: RunData,
    *,
    rules: Sequence[ThresholdRule] = (),
    comparison: Comparison | None = None,
    out_dir: Path | None = None,
) -> str:
    """The whole page. `rules` are the run's parsed thresholds (drawn on the charts);
    `comparison` a baseline run and the gate's judgement against it; `out_dir` where the
    page will live (artifact links are relative to it; None: the run directory)."""
    ctx = ReportContext.of(data, rules)
    if out_dir is None:
        out_dir = data.local_dir
    optional = {
        "paired": paired_section(ctx),
        "baseline": baseline_section(ctx, comparison),
        "capacity": capacity_section(data),
    }
    index = " ".join(
        f'<a href="#{anchor}">{label}</a>' for anchor, label in INDEX if optional.get(anchor, True)
    )
    sections = [
        tables.windows(ctx),
        tables.figures(data),
        optional["paired"],
        optional["baseline"],
        optional["capacity"],
        charts.throughput(ctx),
        charts.failures(ctx),
        charts.latency(ctx),
        charts.steps(ctx),
        charts.health(ctx),
        charts.gauges(ctx),
        server(ctx),
        tables.drift_and_ramp(data),
        tables.rows_table(data),
        run_info.parameters(data),
        run_info.artifacts(data, out_dir),
    ]
    title = f"agentsession report: {data.name}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{esc(title)}</h1><p class="meta">{tables.meta_line(data)}</p>'
        f"<nav>{index}</nav>{tables.banner(data)}{tables.cards(data)}"
        f"{''.join(sections)}</body></html>\n"
    )


def read_run(location: str | Path | StoredFiles, *, endpoint_url: str | None = None) -> RunData:
    """A run's report data from a directory, an s3:// prefix or its StoredFiles (file and
    network work: call it from a thread)."""
    source = (
        location
        if isinstance(location, StoredFiles)
        else open_files(str(location), endpoint_url=endpoint_url)
    )
    return load_run_data(source)


def render_report(
    run_dir: str | Path,
    *,
    rules: Sequence[ThresholdRule] = (),
    comparison: Comparison | None = None,
    out_dir: Path | None = None,
) -> str:
    return render(read_run(run_dir), rules=rules, comparison=comparison, out_dir=out_dir)


def write_report(run_dir: str | Path, *, rules: Sequence[ThresholdRule] = ()) -> Path:
    """Render a local run's report.html from its files and write it atomically (file work:
    call it from a thread)."""
    run_dir = Path(run_dir)
    return atomic_write(run_dir / REPORT, render_report(run_dir, rules=rules))


__all__ = ["REPORT", "Comparison", "read_run", "render", "render_report", "write_report"]
