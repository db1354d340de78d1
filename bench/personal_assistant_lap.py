"""One lap of the personal-assistant built-in (a simulated day) at think scale 0.02 on the
embedded local substrate, cut into judged windows, and what the substrate's workers held
through it: each window's largest worker RSS from server_summary.json (the local
substrate's /metrics, sampled every second). The heap the script declares grows from 640 MiB
at 06:00 to 960 MiB by the evening, so the windows' peaks should climb with it.

    .venv/bin/python bench/personal_assistant_lap.py [--think-scale 0.02] [--window 300]
        [--hold-minutes 50] [--out /tmp/pa-lap]

One closed session on two local workers; the hold covers one lap (Σ think 24 h × the scale,
plus the ops' own time). Writes its table into bench/RESULTS.md between its own markers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
from pathlib import Path
from typing import Any

from results_file import write_section

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.standalone import run_campaign
from agentsession_core.script import load_script

MiB = 1 << 20
SCRIPT = "personal-assistant"


def lap_steps(run_dir: Path) -> int:
    """Successful steps of the run, from stats.jsonl (one lap is 61)."""
    total = 0
    for line in (run_dir / "stats.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["metric"].startswith("http_Step_"):
            measured = row["measurements"]
            total += int(measured["request_count"] - measured["failure_count"])
    return total


def rss_rows(summary: dict[str, Any]) -> list[tuple[int, float, float]]:
    """(window, largest worker RSS in MiB, mean of the workers' sum in MiB) per window."""
    out = []
    for window in summary["windows"]:
        figures = window["figures"]
        workers = [f for name, f in figures.items() if name.startswith("worker_rss_bytes_")]
        peak = max((f["max"] for f in workers), default=0.0)
        out.append((window["index"], peak / MiB, figures["workers_rss_bytes"]["mean"] / MiB))
    return out


async def main(args: argparse.Namespace) -> None:
    script = load_script(SCRIPT)
    params = CampaignParams(
        name="pa-lap",
        tag="bench",
        out=args.out,
        script=SCRIPT,
        think_scale=args.think_scale,
        seed=1,
        hold_minutes=args.hold_minutes,
        window_seconds=args.window,
        levels=[1],
        population={"kind": "closed", "sessions": 1, "registration_quiet_seconds": 1},
        target={"local_workers": 2, "request_timeout_seconds": 300},
        thresholds=["Step_*: failure_ratio < 0.05"],
        cleanup={"timeout_seconds": 120},
    )
    started = time.monotonic()
    result = await run_campaign(params, handle_signals=True)
    took = time.monotonic() - started
    run_dir = result.run_dir
    summary = json.loads((run_dir / "server_summary.json").read_text())
    rows = rss_rows(summary)
    steps = lap_steps(run_dir)
    lines = [
        "## personal-assistant: one lap on the local substrate, worker RSS through the day",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"`bench/personal_assistant_lap.py --think-scale {args.think_scale} --window "
        f"{args.window:g} --hold-minutes {args.hold_minutes:g}` ({took / 60:.1f} min), one closed "
        f"session, 2 local workers, suspend between steps; {platform.python_version()}. "
        f"{steps} steps succeeded ({len(script.steps)} a lap); gate verdict "
        f"{json.loads((run_dir / 'gate.json').read_text())['verdict']}. Worker RSS from "
        "server_summary.json (the local substrate's /metrics, one sample a second): the "
        "largest worker's peak in each window (the awake actor's worker), and the workers' "
        "mean sum.",
        "",
        "| window | largest worker RSS, peak (MiB) | workers' RSS, mean (MiB) |",
        "|---:|---:|---:|",
        *(f"| {i} | {peak:.0f} | {mean:.0f} |" for i, peak, mean in rows),
    ]
    body = "\n".join(lines)
    print(body)
    write_section("personal_assistant_lap", body)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--think-scale", type=float, default=0.02)
    parser.add_argument("--window", type=float, default=300.0)
    parser.add_argument("--hold-minutes", type=float, default=50.0)
    parser.add_argument("--out", default="/tmp/pa-lap")
    asyncio.run(main(parser.parse_args()))
