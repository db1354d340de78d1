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
  .venv/bin/python bench/gate_power.py keep --to bench/data/gate-power/demo   # for the repo

bench/data/gate-power/ keeps what `judge` reads of the recorded runs (gate.json,
hold_seconds.jsonl, campaign.json, status.json, windows.jsonl, sealed again), so the counts
in bench/RESULTS.md can be recomputed with a later gate: `judge --dir bench/data/gate-power/demo`.
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
VOIDS = True  # generator.void_when_saturated of the collected runs (collect --no-void: False)
WORKERS = 6


def campaign_values(
    out: Path, tag: str, hold_s: float, seed: int, window_s: float = 30.0
) -> dict[str, Any]:
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
        "window_seconds": window_s,
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
        # --no-void: judged though the generator saturated (a busy box's runs are the point)
        "generator": {"void_when_saturated": VOIDS},
    }


def one_run(
    out: Path, tag: str, hold_s: float, seed: int, faults: list[str], window_s: float = 30.0
) -> dict[str, Any]:
    from agentsession_core.campaign.params import CampaignParams
    from agentsession_core.campaign.standalone import run_campaign_blocking
    from local_substrate.launcher import LocalSubstrateProcess

    started = time.time()
    with LocalSubstrateProcess(workers=WORKERS, faults=faults, fault_seed=seed) as sub:
        values = campaign_values(out, tag, hold_s, seed, window_s)
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
    global VOIDS
    VOIDS = not args.no_void
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
        for share in args.shares:
            added = round(share * p50, 2)
            b_plan.append((f"b{int(share * 100)}-{i:02d}", [f"wake:latency:fixed:{added}ms"]))
    # B runs spread evenly among the A runs, the first run an A: drift touches both alike.
    plan: list[tuple[str, list[str]]] = []
    total = len(a_plan) + len(b_plan)
    for k in range(total):
        b_due = ((k + 1) * len(b_plan)) // total - (k * len(b_plan)) // total
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
        run = one_run(args.dir / "runs", tag, args.hold, 100 + number, faults, args.window)
        done.append(run)
        index_file.write_text(json.dumps(done, indent=1))
        print(
            f"{tag}: {run['verdict']} in {run['seconds']} s, wake p50 {run['wake_p50_ms']}",
            flush=True,
        )
    return 0


# --------------------------------------------------------------------------- judging
def load(run: dict[str, Any], confidence: float) -> dict[str, Any] | None:
    """The stored run, its figures recomputed from hold_seconds.jsonl by this build's code
    (so the counts are the current gate's, whatever built the run)."""
    from agentsession_core.judge.hold_seconds import HOLD_SECONDS_FILE, HoldSeconds, parse
    from agentsession_core.judge.stored_run import load_run
    from agentsession_core.judge.uncertainty import figures

    stored = load_run(str(run["location"]))
    loaded = {"location": stored.location, "gate": dict(stored.gate_json), "tag": run["tag"]}
    held = Path(run["location"]) / HOLD_SECONDS_FILE
    if held.exists():
        records = parse(held.read_text())
        seed = int(stored.params.get("seed", 0))
        loaded["gate"]["figures"] = figures(
            HoldSeconds.of_records(records), confidence=confidence, seed=seed
        )
    return loaded


def outcome(doc: dict[str, Any]) -> str:
    """What a release pipeline would see: fail naming TimeToWake, fail for another reason,
    pass, void."""
    if doc["verdict"] != "fail":
        return doc["verdict"]
    regressed = (doc.get("baseline") or {}).get("regressions") or []
    if any(m.startswith("TimeToWake.") for m in regressed):
        return "fail:TimeToWake"
    return "fail:other" if regressed else "fail:windows"


def compare_one(current: dict, baselines: list[dict], args: argparse.Namespace) -> str:
    from agentsession_core.judge.gate import with_baseline
    from agentsession_core.judge.gate_document import GateInputError
    from agentsession_core.judge.stored_run import StoredRun

    try:
        doc = with_baseline(
            current["gate"],
            [StoredRun.of(b["location"], b["gate"]) for b in baselines],
            args.max_regression,
            night_spread=args.night_spread,
            confidence=args.confidence,
            rule=args.rule,
        )
    except GateInputError:
        return "baseline refused"
    return outcome(doc)


def tally(outcomes: list[str]) -> str:
    keys = ("fail:TimeToWake", "fail:other", "fail:windows", "pass", "void", "baseline refused")
    parts = [f"{k} {outcomes.count(k)}" for k in keys if outcomes.count(k)]
    return f"{len(outcomes)} pairs: " + ", ".join(parts)


def good(run: dict) -> bool:
    return run["gate"]["verdict"] == "pass"


def pairs_of(series: list[dict], history: int) -> dict[str, list[tuple[dict, list[dict]]]]:
    """What each comparison kind compares: (current run, its baselines). A pipeline takes the
    last passing A run as its single baseline (a void one would be refused), or the last
    `history` passing A runs; every A run after them is an A/A comparison, every B run an A/B
    one. `A/A disjoint` pairs run 2k+1 with run 2k alone, whatever their verdicts."""
    a_runs = [r for r in series if r["tag"].startswith("a-")]
    out: dict[str, list[tuple[dict, list[dict]]]] = {
        "A/A disjoint pairs": [(a_runs[k + 1], [a_runs[k]]) for k in range(0, len(a_runs) - 1, 2)]
    }
    groups = sorted(
        {r["tag"].split("-")[0] for r in series if r["tag"].startswith("b")},
        key=lambda g: int(g[1:]),
    )
    for label, depth in (("single baseline", 1), (f"{history}-night history", history)):
        for group in ("a", *groups):
            kind = "A/A" if group == "a" else f"A/B +{group[1:]}% of p50 added"
            found = []
            for i, run in enumerate(series):
                if run["tag"].split("-")[0] != group:
                    continue
                nights = [r for r in series[:i] if r["tag"].startswith("a-") and good(r)]
                if len(nights) >= depth:
                    found.append((run, nights[-depth:]))
            out[f"{kind}, {label}"] = found
    return out


SETTINGS = ((0.2, 0.99), (0.2, 0.95), (0.1, 0.95), (0.1, 0.99))
RULES = ("whole-interval", "significant", "margin-test")  # judge/decision.py
# B tags carry the added latency as a share of the A runs' p50 in percent (b20, b50, b100).


def judge(args: argparse.Namespace) -> int:
    collected = json.loads((args.dir / "collected.json").read_text())
    for run in collected:  # kept runs name their directory relative to --dir
        run["location"] = str(args.dir / run["run_dir"])
    series = [load(r, args.confidence) for r in collected if r["tag"] != "pilot"]
    a_runs = [r for r in series if r["tag"].startswith("a-")]
    groups = sorted({r["tag"].split("-")[0] for r in series if r["tag"].startswith("b")})
    counts = ", ".join(
        f"{sum(1 for r in series if r['tag'].split('-')[0] == g)} {g}" for g in groups
    )
    wakes = sorted(
        r["gate"]["figures"]["TimeToWake.p50"]["n"]
        for r in a_runs
        if good(r) and "TimeToWake.p50" in r["gate"]["figures"]
    )
    median = wakes[len(wakes) // 2] if wakes else 0
    lines = [f"runs: {len(a_runs)} A, {counts}; a passing A run judged {median} wakes (median)"]
    voids = sum(1 for r in series if r["gate"]["verdict"] == "void")
    lines.append(f"void runs (generator saturated in a window): {voids} of {len(series)}")
    kinds = pairs_of(series, args.history)
    for rule in RULES:
        for max_regression, confidence in SETTINGS:
            lines.append("")
            lines.append(
                f"rule {rule}, max_regression {max_regression:.0%}, confidence "
                f"{confidence:.0%}, night_spread {args.night_spread}:"
            )
            for kind, pairs in kinds.items():
                if not pairs:
                    continue
                settings = argparse.Namespace(
                    max_regression=max_regression,
                    confidence=confidence,
                    night_spread=args.night_spread,
                    rule=rule,
                )
                outcomes = [compare_one(run, base, settings) for run, base in pairs]
                lines.append(f"  {kind:42s} {tally(outcomes)}")
    lines.append("")
    lines += realised(series)
    lines.append("")
    lines += spread_table(a_runs)
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        from results_file import write_section

        write_section(args.section, results_body(args, text))
    return 0


def realised(series: list[dict]) -> list[str]:
    """What each added wake latency did to the passing runs' TimeToWake p50 and p90 (median
    over runs), against the A runs': the change a comparison had to find."""
    import statistics

    groups: dict[str, list[dict]] = {}
    for run in series:
        if good(run):
            groups.setdefault(run["tag"].split("-")[0], []).append(run)
    out = ["TimeToWake of the passing runs (median over runs; change against the A runs):"]
    base: dict[str, float] = {}
    for group in sorted(groups, key=lambda g: (g != "a", len(g), g)):
        runs = groups[group]
        cells = []
        for metric in ("TimeToWake.p50", "TimeToWake.p90"):
            value = statistics.median(r["gate"]["figures"][metric]["value"] for r in runs)
            base.setdefault(metric, value)
            cells.append(
                f"{metric.split('.')[1]} {value:6.2f} ms ({value / base[metric] - 1:+.0%})"
            )
        out.append(f"  {group:5s} {len(runs):3d} runs  " + "  ".join(cells))
    return out


def spread_table(a_runs: list[dict]) -> list[str]:
    """Per figure, over disjoint A/A pairs of passing runs: the sd of the log difference,
    what the two runs' own intervals explain of it, and the rest (the run-to-run spread a
    single-run baseline must assume: `gate.night_spread`)."""
    import numpy as np

    from agentsession_core.judge.uncertainty import FLOORS

    pairs = [
        (a_runs[k], a_runs[k + 1])
        for k in range(0, len(a_runs) - 1, 2)
        if good(a_runs[k]) and good(a_runs[k + 1])
    ]
    out = [f"run-to-run spread over {len(pairs)} passing A/A pairs (log scale):"]
    metrics = sorted({m for a, b in pairs for m in a["gate"]["figures"]})
    for metric in metrics:
        d, own = [], []
        for a, b in pairs:
            fa, fb = a["gate"]["figures"].get(metric), b["gate"]["figures"].get(metric)
            if not fa or not fb or fa.get("se_log") is None or not fa.get("estimable"):
                continue
            if not fb.get("estimable"):
                continue
            floor = FLOORS[fa["unit"]]
            d.append(np.log(fb["value"] + floor + 1e-12) - np.log(fa["value"] + floor + 1e-12))
            own.append(fa["se_log"] ** 2 + fb["se_log"] ** 2)
        if len(d) < 3:
            continue
        total = float(np.std(d, ddof=1))
        explained = float(np.sqrt(np.mean(own)))
        rest = float(np.sqrt(max(total**2 - explained**2, 0.0)))
        out.append(
            f"  {metric:24s} sd {total:.3f}  own intervals {explained:.3f}  rest {rest:.3f}"
            f"  ({len(d)} pairs)"
        )
    return out


def results_body(args: argparse.Namespace, text: str) -> str:
    collected = json.loads((args.dir / "collected.json").read_text())
    first = next((r for r in collected if r["tag"] != "pilot"), None)
    hold = "?"
    if first is not None:
        params = json.loads((args.dir / first["run_dir"] / "campaign.json").read_text())["params"]
        hold = f"{params['hold_minutes'] * 60:g} s hold in {params['window_seconds']:g} s windows"
    return (
        f"## The gate's power: {args.title} (bench/gate_power.py)\n\n"
        f"Campaigns of the demo preset's first level ({hold}; smoke script, turnover 12 "
        "sessions / 4 awake / 2 swaps/s, ate wire), each against a local substrate started "
        f"for it, one after another on this 2-core VM while {args.beside}; A runs unchanged, "
        "B runs with `wake:latency:fixed:D` on the substrate, D "
        "the given share of the A runs' wake p50 (tag bNN = NN %). Figures recomputed from "
        "each run's hold_seconds.jsonl by this build's gate. `fail:TimeToWake` = the gate "
        "failed the run naming a TimeToWake figure; `void` = the run being judged was void "
        "(its generator saturated), which the gate never turns into a fail; `baseline "
        "refused` = the baseline was void. Rerun: `python bench/gate_power.py collect "
        "[--hold S --window S --shares …]` then `judge --write-results`.\n\n"
        f"```\n{text}\n```\n"
    )


KEPT_FILES = ("campaign.json", "gate.json", "hold_seconds.jsonl", "status.json", "windows.jsonl")


def keep(args: argparse.Namespace) -> int:
    """Copy what `judge` reads of each collected run (KEPT_FILES, sealed again) into --to, so
    the counts can be recomputed later from the repository alone."""
    import shutil

    from agentsession_core.output.run_dir import RunDir

    collected = json.loads((args.dir / "collected.json").read_text())
    kept = []
    for run in collected:
        source = Path(run["run_dir"])
        relative = source.relative_to(args.dir)
        target = args.to / relative
        target.mkdir(parents=True, exist_ok=True)
        for name in KEPT_FILES:
            if (source / name).exists():
                shutil.copyfile(source / name, target / name)
        RunDir(target).write_manifest()
        kept.append({**run, "run_dir": str(relative)})
    (args.to / "collected.json").write_text(json.dumps(kept, indent=1))
    print(f"kept {len(kept)} runs under {args.to}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="the gate's false-alarm and detection rates")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="run the A and B campaigns")
    c.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    c.add_argument("--pilot", action="store_true", help="one A run, to read its wake p50")
    c.add_argument("--hold", type=float, default=60.0, help="seconds of hold per campaign")
    c.add_argument("--window", type=float, default=30.0, help="seconds per judged window")
    c.add_argument("--a-runs", type=int, default=40)
    c.add_argument("--b-runs", type=int, default=8, help="B runs per added latency")
    c.add_argument("--wake-p50-ms", type=float, default=None)
    c.add_argument("--max-minutes", type=float, default=100.0, help="stop starting runs after")
    c.add_argument(
        "--no-void",
        action="store_true",
        help="judge runs whose generator saturated (generator.void_when_saturated off): a "
        "busy box's A/A pairs, as a pipeline beside other work would judge them",
    )
    c.add_argument(
        "--shares",
        type=lambda text: tuple(float(x) for x in text.split(",")),
        default=SHARES,
        help="added wake latencies as shares of the A runs' p50 (default 0.2,0.5,1.0)",
    )
    c.set_defaults(handler=collect)
    j = sub.add_parser("judge", help="compare the collected runs with the gate's code")
    j.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    j.add_argument("--max-regression", type=float, default=0.2)
    j.add_argument("--confidence", type=float, default=0.99)
    j.add_argument("--night-spread", type=float, default=None)
    j.add_argument("--history", type=int, default=5)
    j.add_argument("--write-results", action="store_true")
    j.add_argument("--section", default="gate_power", help="RESULTS.md section to write")
    j.add_argument(
        "--beside",
        default="other work ran beside them at nice 19",
        help="what ran beside the runs, as the section says it",
    )
    j.add_argument("--title", default="demo-length runs", help="the section's title")
    j.set_defaults(handler=judge)
    k = sub.add_parser("keep", help="copy what judge reads of each run into the repository")
    k.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    k.add_argument("--to", type=Path, required=True)
    k.set_defaults(handler=keep)
    from paired_power import add_parsers

    add_parsers(sub)  # `paired collect` / `paired judge`: bench/paired_power.py
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "night_spread", 0) is None:
        from agentsession_core.judge.compare import DEFAULT_NIGHT_SPREAD

        args.night_spread = DEFAULT_NIGHT_SPREAD
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main(argv=None))
