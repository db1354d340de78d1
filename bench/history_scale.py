"""`agentsession history` over many sealed nights (issue 29): wall time, CPU time and peak
memory of the real command for N = 100, 1,000 and 10,000 nights, and where the time goes.

The nights are laid out as a campaign writes them (docs/SPEC.md §7):
``<root>/runs/nightly/run_date=YYYY-MM-DD/run_ts=<unix>/run_tag=nNNNNN/`` with gate.json
(schema 2: windows, headline, `figures` for all 14 headline metrics with their intervals,
conditions and a baseline comparison), campaign.json and status.json (from a real
campaign's, tests/data/history), windows.jsonl and small stats files (stats.jsonl,
stats.csv, stats_history.csv, hold_seconds.jsonl, logs.txt, report.html: `--filler-kib`
in all, 64 KiB by default; a real 20-minute run's are about 4 MiB), sealed by the project's
own writer, `RunDir.write_manifest`. The figures are seeded noise as bench/changepoints.py
models it (p50-like figures Student-t(4)·0.12 in log, p99-like normal 0.35 in log plus a
3x-40x spike on one night in five) with two steps: every TimeToWake figure +60 % from night
0.4·N on and every Step_* figure +50 % from 0.7·N; the two nights after the first step fail
with TimeToWake.p50 regressed; every 29th night is void; every 997th run was never sealed
(no manifest.json), so it is listed with its error. A layout is built once per N under
`--dir` and reused (a marker file holds its version and size).

Each N runs the real command in a child process,
``[sys.executable, "-m", "agentsession_core", "history", ROOT, "-o", OUT/history.html]``,
with `--cap` seconds at most (killed then: the row says so); wall time, CPU time (user +
system) and peak RSS come from the child's own rusage (os.wait4). `--profile N` runs that N
once more under cProfile and keeps the top of the profile.

  .venv/bin/python bench/history_scale.py --nights 100 1000 10000 --cap 600 \\
      --profile 1000 --json /tmp/history-before.json
  .venv/bin/python bench/history_scale.py --report /tmp/history-before.json \\
      /tmp/history-after.json [--notes NOTES.md]    # rewrites RESULTS.md's section
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import pstats
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from agentsession_core.output.run_dir import RunDir

HERE = Path(__file__).resolve().parent
TEMPLATE = (
    HERE.parent
    / "tests/data/history/runs/nightly/run_date=2026-12-01/run_ts=1796143873/run_tag=n11"
)
LAYOUT_VERSION = 1
SEED = 20290029
T0 = 1_800_000_000  # the first night's run_ts
DAY = 86_400
SECTIONS = ("TimeToWake", "WakeFirstTouch", "Step_*")
PERCENTILES = ("p50", "p90", "p99", "p99_9")
BASE_MS = {
    "TimeToWake": (23.0, 53.0, 310.0, 520.0),
    "WakeFirstTouch": (31.0, 60.0, 330.0, 560.0),
    "Step_*": (27.0, 108.0, 230.0, 420.0),
}
STEPS = {"TimeToWake": (0.4, 1.6), "Step_*": (0.7, 1.5)}  # (from night · N, factor)
VOID_EVERY = 29
UNSEALED_EVERY = 997
FILLER = ("stats.jsonl", "stats.csv", "stats_history.csv", "hold_seconds.jsonl", "logs.txt")


# ---------------------------------------------------------------- the layout
def _noise(rng: np.random.Generator, percentile: str) -> float:
    if percentile in ("p50", "p90"):
        return float(np.exp(0.12 * rng.standard_t(4)))
    factor = float(np.exp(0.35 * rng.standard_normal()))
    if rng.random() < 0.2:
        factor *= float(rng.uniform(3.0, 40.0))
    return factor


def _figure(value: float, n: int, rng: np.random.Generator, unit: str = "ms") -> dict:
    se = 0.03 + 0.2 * float(rng.random())
    return {
        "value": value,
        "low": value * math.exp(-2.58 * se),
        "high": value * math.exp(2.58 * se),
        "n": n,
        "beyond": n // 2,
        "estimable": True,
        "unit": unit,
        "se_log": se,
        "blocks": 8,
    }


def night_gate(night: int, nights: int, rng: np.random.Generator, template: dict) -> dict:
    """One night's gate.json (schema 2), its figures drawn around BASE_MS with the steps."""
    figures: dict[str, dict] = {}
    headline: dict[str, dict] = {}
    for section in SECTIONS:
        at, factor = STEPS.get(section, (2.0, 1.0))
        scale = factor if night >= at * nights else 1.0
        n = 1200 if section != "WakeFirstTouch" else 300
        row: dict[str, float] = {"count": float(n), "failure_ratio": 0.0, "failures": 0.0}
        for percentile, base in zip(PERCENTILES, BASE_MS[section], strict=True):
            value = base * scale * _noise(rng, percentile)
            figures[f"{section}.{percentile}"] = _figure(value, n, rng)
            row[percentile] = value
        headline[section] = row
    failure = 0.001 * float(np.exp(0.5 * rng.standard_normal()))
    rate = 2.0 * float(np.exp(0.01 * rng.standard_normal()))
    figures["requests.failure_ratio"] = _figure(failure, 3000, rng, "ratio")
    figures["requests.achieved_rps"] = _figure(rate, 3000, rng, "1/s")
    headline["requests"] = {"count": 3000.0, "failure_ratio": failure, "achieved_rps": rate}
    first_step = math.ceil(STEPS["TimeToWake"][0] * nights)
    void = night % VOID_EVERY == VOID_EVERY - 1
    regressed = ["TimeToWake.p50"] if first_step <= night < first_step + 2 else []
    verdict = "void" if void else ("fail" if regressed else "pass")
    start = T0 + DAY * night + 60
    windows = [
        {
            "abort_reason": None,
            "end_unix": float(start + 600 * (i + 1)),
            "index": i,
            "level": 1.0,
            "missed": [],
            "outcome": "void" if void else "pass",
            "start_unix": float(start + 600 * i),
            "void_reason": "the generator was saturated" if void else None,
        }
        for i in range(6)
    ]
    compared = [
        {
            "metric": metric,
            "better": "lower",
            "baseline": f["value"],
            "current": f["value"],
            "change": 0.0,
            "interval": [-0.1, 0.1],
            "samples": {"current": f["n"], "baseline": f["n"]},
            "status": "regressed" if metric in regressed else "unchanged",
            "log_change": 0.0,
            "se_log": f["se_log"],
            "spread_log": 0.1,
        }
        for metric, f in figures.items()
    ]
    gate = dict(template)
    gate.update(
        schema=2,
        verdict=verdict,
        reason=(
            "a window was void"
            if void
            else f"6 window(s) passed; against the baseline: {len(compared)} compared"
        ),
        run={"name": "nightly", "tag": f"n{night:05d}", "windows_planned": 6},
        windows=windows,
        headline=headline,
        confidence=0.99,
        figures=figures,
        baseline={
            "status": "compared",
            "runs": 5,
            "spread_from": "measured over 5 runs",
            "metrics": compared,
            "regressions": regressed,
        },
    )
    return gate


def _filler(kib: int) -> dict[str, bytes]:
    """The same small stats files for every night (their bytes do not matter: history reads
    none of them, the sealed check hashes them)."""
    line = b'{"type":"interval","name":"TimeToWake","count":60,"p50":23.1,"p99":310.4}\n'
    per_file = max(1, kib * 1024 // len(FILLER))
    body = (line * (per_file // len(line) + 1))[:per_file]
    return dict.fromkeys(FILLER, body) | {"report.html": b"<!DOCTYPE html><p>report</p>\n"}


def build(root: Path, nights: int, filler_kib: int) -> Path:
    """The layout of `nights` sealed nights under root (reused when already built)."""
    marker = root / "layout.json"
    wanted = {"version": LAYOUT_VERSION, "nights": nights, "filler_kib": filler_kib}
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return root
    if root.exists():
        subprocess.run(["rm", "-rf", str(root)], check=True)
    started = time.perf_counter()
    template = json.loads((TEMPLATE / "gate.json").read_text())
    campaign = json.loads((TEMPLATE / "campaign.json").read_text())
    status = json.loads((TEMPLATE / "status.json").read_text())
    files = _filler(filler_kib)
    rng = np.random.default_rng(SEED)
    for night in range(nights):
        ts = T0 + DAY * night
        date = time.strftime("%Y-%m-%d", time.gmtime(ts))
        tag = f"n{night:05d}"
        run = root / "runs/nightly" / f"run_date={date}" / f"run_ts={ts}" / f"run_tag={tag}"
        run.mkdir(parents=True)
        gate = night_gate(night, nights, rng, template)
        campaign["params"]["tag"] = tag
        status.update(started_unix=float(ts), updated_unix=float(ts + 3700))
        (run / "gate.json").write_text(json.dumps(gate, indent=2, sort_keys=True))
        (run / "campaign.json").write_text(json.dumps(campaign, indent=1))
        (run / "status.json").write_text(json.dumps(status, indent=2))
        (run / "windows.jsonl").write_text("".join(json.dumps(w) + "\n" for w in gate["windows"]))
        for name, body in files.items():
            (run / name).write_bytes(body)
        if night % UNSEALED_EVERY != UNSEALED_EVERY - 1:
            RunDir(run).write_manifest()  # sealed, as a finished run is
    marker.write_text(json.dumps(wanted))
    print(f"built {nights} nights in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return root


# ---------------------------------------------------------------- measuring
def _peak_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _limit_memory(gib: float) -> Any:
    def limit() -> None:  # in the child, before exec: a runaway fails, not the machine
        size = int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    return limit


def run_history(
    root: Path,
    out: Path,
    cap: float,
    *,
    profile: Path | None = None,
    mem_gib: float = 8.0,
    src: Path | None = None,
) -> dict[str, Any]:
    """The command once: wall, CPU and peak RSS (the child's rusage), or how far it got;
    its address space is capped at `mem_gib` (a MemoryError is then its outcome). `src`: a
    copy of the code to run instead of this checkout's (on PYTHONPATH, from `out`)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("history.json", "history.html"):
        (out / name).unlink(missing_ok=True)
    head = [sys.executable]
    if profile is not None:
        head += ["-m", "cProfile", "-o", str(profile)]
    command = [
        *head,
        "-m",
        "agentsession_core",
        "history",
        str(root),
        "-o",
        str(out / "history.html"),
    ]
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_limit_memory(mem_gib),
        cwd=out,
        env={**os.environ, "PYTHONPATH": str(src)} if src else None,
    )
    os.set_blocking(proc.stdout.fileno(), False)  # type: ignore[union-attr]
    peak = 0
    status = rusage = None
    capped = False
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _peak_kib(proc.pid) or 0)
        if time.perf_counter() - started > cap:
            capped = True
            peak = max(peak, _peak_kib(proc.pid) or 0)
            os.killpg(proc.pid, signal.SIGKILL)
            _, status, rusage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.2)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout = proc.stdout.read() if proc.stdout else b""  # type: ignore[union-attr]
    stderr = proc.stderr.read() if proc.stderr else b""  # type: ignore[union-attr]
    row: dict[str, Any] = {
        "wall_s": round(wall, 2),
        "cpu_s": round(rusage.ru_utime + rusage.ru_stime, 2),
        "peak_rss_mib": round(max(peak, rusage.ru_maxrss) / 1024, 1),
        "exit": proc.returncode,
        "capped": capped,
        # The machine is shared: its 1-minute load average before and after the run.
        "load": [round(load_before, 1), round(os.getloadavg()[0], 1)],
    }
    if capped:
        row["note"] = f"killed after {cap:.0f} s: no output yet"
        return row
    if proc.returncode != 0:
        row["note"] = (stderr or b"").decode(errors="replace")[-500:]
        return row
    row["stdout"] = (stdout or b"").decode().splitlines()[0] if stdout else ""
    doc = json.loads((out / "history.json").read_text())
    row["runs"] = len(doc["runs"])
    row["unreadable"] = sum(1 for r in doc["runs"] if r["error"])
    row["change_points"] = len(doc["change_points"])
    row["change_points_by_metric"] = _by_metric(doc["change_points"])
    row["history_json_mib"] = round((out / "history.json").stat().st_size / 2**20, 2)
    row["history_html_mib"] = round((out / "history.html").stat().st_size / 2**20, 2)
    return row


def _by_metric(cps: list[dict]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for cp in cps:
        out.setdefault(cp["metric"], []).append(cp["night"])
    return out


def profile_top(path: Path, lines: int = 25) -> list[str]:
    text = io.StringIO()
    stats = pstats.Stats(str(path), stream=text)
    stats.sort_stats("cumulative").print_stats(lines)
    return [line for line in text.getvalue().splitlines() if line.strip()][-lines - 1 :]


# ---------------------------------------------------------------- the report
def _cell(row: dict | None, key: str, fmt: str) -> str:
    if row is None:
        return "–"
    if row.get("capped"):
        return f"> {row['wall_s']:.0f} (killed)" if key == "wall_s" else format(row[key], fmt)
    return format(row[key], fmt)


def report(files: list[Path]) -> str:
    docs = [json.loads(f.read_text()) for f in files]
    nights = sorted({int(n) for d in docs for n in d["rows"]})
    head = "| nights |" + "".join(
        f" {d['label']} wall s | {d['label']} CPU s | {d['label']} peak RSS MiB |" for d in docs
    )
    lines = [
        "## History at scale: N sealed nights (bench/history_scale.py)",
        "",
        "The real command (`python -m agentsession_core history ROOT -o OUT/history.html`) "
        "over N generated sealed nights of one campaign (the layout, gate.json schema 2 with "
        "all 14 headline figures and a baseline comparison, campaign.json, status.json, "
        "windows.jsonl and small stats files, sealed by `RunDir.write_manifest`; two steps, "
        "void and failed nights, one run in 997 never sealed; see the script's docstring). "
        "Wall and CPU time (user + system) and peak RSS are the child's own (os.wait4); "
        "the page cache was warm. Shared 2-core VM, another benchmark running beside it.",
        "",
        head,
        "|---:|" + "---:|---:|---:|" * len(docs),
    ]
    for n in nights:
        line = f"| {n:,} |"
        for d in docs:
            row = d["rows"].get(str(n))
            line += (
                f" {_cell(row, 'wall_s', '.1f')} | {_cell(row, 'cpu_s', '.1f')} |"
                f" {_cell(row, 'peak_rss_mib', '.0f')} |"
            )
        lines.append(line)
    for d in docs:
        lines += ["", f"{d['label']}: " + "; ".join(_outcome(n, r) for n, r in d["rows"].items())]
    for d in docs:
        if d.get("profile"):
            lines += [
                "",
                f"{d['label']}, cProfile at {d['profile']['nights']:,} nights (cumulative, top):",
                "",
                "```",
                *d["profile"]["top"],
                "```",
            ]
    lines += [
        "",
        "Reproduce (a layout is built once per N under --dir, then reused):",
        "",
        "```",
        ".venv/bin/python bench/history_scale.py --nights 100 1000 10000 --cap 600 \\",
        "    --profile 1000 --label after --json /tmp/history-after.json",
        ".venv/bin/python bench/history_scale.py --report /tmp/history-before.json "
        "/tmp/history-after.json --notes NOTES.md",
        "```",
    ]
    return "\n".join(lines) + "\n"


def _outcome(n: str, row: dict) -> str:
    if row.get("capped"):
        return f"{int(n):,}: {row['note']}"
    if row.get("exit"):
        return f"{int(n):,}: exit {row['exit']}"
    return (
        f"{int(n):,}: {row['runs']:,} runs listed ({row['unreadable']} unreadable), "
        f"{row['change_points']} change points, history.json {row['history_json_mib']} MiB, "
        f"history.html {row['history_html_mib']} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/history-scale"))
    parser.add_argument("--filler-kib", type=int, default=64)
    parser.add_argument("--cap", type=float, default=600.0, help="seconds a run may take")
    parser.add_argument("--mem-gib", type=float, default=8.0, help="the child's address space")
    parser.add_argument("--src", type=Path, help="run a copy of the code (e.g. the old one)")
    parser.add_argument("--profile", type=int, help="also profile the run of this N")
    parser.add_argument("--label", default="before")
    parser.add_argument("--json", type=Path, help="where the rows go")
    parser.add_argument("--report", type=Path, nargs="+", help="rewrite RESULTS.md's section")
    parser.add_argument("--notes", type=Path, help="markdown appended to the section")
    args = parser.parse_args()
    if args.report:
        sys.path.insert(0, str(HERE))
        from results_file import publish

        publish("history_scale", report(args.report), args.notes)
        return
    doc: dict[str, Any] = {"label": args.label, "filler_kib": args.filler_kib, "rows": {}}
    for n in args.nights:
        root = build(args.dir / f"n{n}" / "dest", n, args.filler_kib)
        row = run_history(
            root, args.dir / f"n{n}" / "out", args.cap, mem_gib=args.mem_gib, src=args.src
        )
        doc["rows"][str(n)] = row
        print(json.dumps({"nights": n, **row}), file=sys.stderr)
        if args.json:
            args.json.write_text(json.dumps(doc, indent=1))
    if args.profile:
        root = build(args.dir / f"n{args.profile}" / "dest", args.profile, args.filler_kib)
        prof = args.dir / f"n{args.profile}" / "history.prof"
        row = run_history(
            root,
            args.dir / f"n{args.profile}" / "out",
            args.cap,
            profile=prof,
            mem_gib=args.mem_gib,
            src=args.src,
        )
        doc["profile"] = {"nights": args.profile, "row": row, "top": profile_top(prof)}
        print("\n".join(doc["profile"]["top"]), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
