"""The gate's measured power: how often an A/A pair of the same build says `fail` (false
alarms), and how often an A/B pair with a slower wake says `fail` and names TimeToWake
(detections), against a single baseline run and against a 5-night history.

`collect` runs short campaigns one after another on this machine, each against a local
substrate started afresh for it (as the embedded one is) over the ate wire, in an interleaved
order so that the machine's own drift touches A and B alike: A, B(+20 %), A, B(+50 %), A,
B(+100 %), … . A B run's substrate adds a fixed delay to every wake (`wake:latency:fixed:D`)
where D is the given share of the A runs' TimeToWake median (measured by `--pilot` first, or
given with --wake-p50-ms). Every run's directory stays under --dir; `collected.json` there
lists them. `judge` then compares runs with the gate's own code (judge/compare.py):

  A/A pairs            run 2k+1 against run 2k of the A series (disjoint pairs)
  A/B pairs            each B run against the A run just before it
  history baselines    each later A or B run against the 5 A runs before it (baseline: auto)

and prints (and with --write-results writes to bench/RESULTS.md) the counts: false `fail`s
among the A/A pairs, and `fail`s naming TimeToWake among the A/B pairs per added latency.
A comparison that is void or has only inconclusive figures is counted as what it is.

  .venv/bin/python bench/gate_power.py collect --pilot            # one A run: the wake p50
  nohup .venv/bin/python bench/gate_power.py collect --a-runs 40 --b-runs 8 > gp.log 2>&1 &
  .venv/bin/python bench/gate_power.py judge --write-results
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_DIR = Path("/tmp/gate-power")
SHARES = (0.2, 0.5, 1.0)
WORKERS = 6


def campaign_values(out: Path, tag: str, hold_s: float, seed: int) -> dict[str, Any]:
    """The demo preset's first level (smoke script, turnover 12 sessions / 4 awake / 2 swaps/s,
    30 s windows), without its ramp: what a demo-length gate compares."""
    return {
        "name": "gatepower",
        "tag": tag,
        "out": str(out),
        "seed": seed,
        "script": "smoke",
        "think_scale": 0.05,
        "hold_minutes": hold_s / 60,
        "window_seconds": 30,
        "levels": [1.0],
        "thresholds": [
            "TimeToWake: p99 < 2s",
            "Step_*: failure_ratio < 0.01",
            "achieved_rps >= 0.8 * target",
        ],
        "abort": {
            "rules": ["Step_*: failure_ratio < 0.5 (min 10)"],
            "sliding_seconds": 10,
            "delay_seconds": 10,
        },
        "population": {
            "kind": "turnover",
            "sessions": 12,
            "awake": 4,
            "target_rps": 2,
            "registration_quiet_seconds": 2,
        },
        "target": {"protocol": "ate"},
    }


def one_run(out: Path, tag: str, hold_s: float, seed: int, faults: list[str]) -> dict[str, Any]:
    from agentsession_core.campaign.params import CampaignParams
    from agentsession_core.campaign.run import run_campaign_blocking
    from agentsession_core.substrate.local.launcher import LocalSubstrateProcess

    started = time.time()
    with LocalSubstrateProcess(workers=WORKERS, faults=faults, fault_seed=seed) as sub:
        values = campaign_values(out, tag, hold_s, seed)
        values["target"].update(substrate=sub.grpc_url, router=sub.url)
        result = run_campaign_blocking(CampaignParams.model_validate(values))
    figures = result.gate.get("figures") or {}
    p50 = (figures.get("TimeToWake.p50") or {}).get("value")
    return {
        "tag": tag,
        "run_dir": str(result.run_dir),
        "verdict": result.verdict,
        "reason": result.reason,
        "faults": faults,
        "seconds": round(time.time() - started, 1),
        "wake_p50_ms": p50,
    }


def collect(args: argparse.Namespace) -> int:
    args.dir.mkdir(parents=True, exist_ok=True)
    index_file = args.dir / "collected.json"
    done: list[dict[str, Any]] = json.loads(index_file.read_text()) if index_file.exists() else []
    if args.pilot:
        run = one_run(args.dir / "runs", "pilot", args.hold, 1, [])
        print(json.dumps(run, indent=2))
        return 0
    p50 = args.wake_p50_ms
    if p50 is None:
        pilots = [r["wake_p50_ms"] for r in done if r["tag"].startswith("a-") and r["wake_p50_ms"]]
        if not pilots:
            print("give --wake-p50-ms (run --pilot first)", file=sys.stderr)
            return 2
        p50 = sorted(pilots)[len(pilots) // 2]
    a_plan = [(f"a-{i:02d}", []) for i in range(args.a_runs)]
    b_plan = []
    for i in range(args.b_runs):
        for share in SHARES:
            added = round(share * p50, 2)
            b_plan.append((f"b{int(share * 100)}-{i:02d}", [f"wake:latency:fixed:{added}ms"]))
    # B runs spread evenly among the A runs, the first run an A: drift touches both alike.
    plan: list[tuple[str, list[str]]] = []
    total = len(a_plan) + len(b_plan)
    for k in range(total):
        b_due = (k * len(b_plan)) // total - ((k - 1) * len(b_plan)) // total if k else 0
        source = b_plan if b_due and b_plan else a_plan if a_plan else b_plan
        plan.append(source.pop(0))
    have = {r["tag"] for r in done}
    deadline = time.time() + args.max_minutes * 60
    for number, (tag, faults) in enumerate(plan):
        if tag in have:
            continue
        if time.time() > deadline:
            print(f"stopped at --max-minutes before {tag}", flush=True)
            break
        run = one_run(args.dir / "runs", tag, args.hold, 100 + number, faults)
        done.append(run)
        index_file.write_text(json.dumps(done, indent=1))
        print(
            f"{tag}: {run['verdict']} in {run['seconds']} s, wake p50 {run['wake_p50_ms']}",
            flush=True,
        )
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="the gate's false-alarm and detection rates")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="run the A and B campaigns")
    c.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    c.add_argument("--pilot", action="store_true", help="one A run, to read its wake p50")
    c.add_argument("--hold", type=float, default=60.0, help="seconds of hold per campaign")
    c.add_argument("--a-runs", type=int, default=40)
    c.add_argument("--b-runs", type=int, default=8, help="B runs per added latency")
    c.add_argument("--wake-p50-ms", type=float, default=None)
    c.add_argument("--max-minutes", type=float, default=100.0, help="stop starting runs after")
    c.set_defaults(handler=collect)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main(argv=None))
