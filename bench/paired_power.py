"""The paired gate's measured power (`bench/gate_power.py paired …`): candidate and reference
side by side in one campaign, against today's way (one campaign after another, compared
afterwards), on the same runs.

`collect` runs paired campaigns one after another on this machine: each starts two local
substrates (6 workers each, the ate wire), the candidate's with `wake:latency:fixed:D` for a
B run and none for an A/A run, and runs one campaign with `target` on the first and
`reference` on the second. The plan interleaves the kinds (aa, b10, aa, b20, aa, b50, …) so
the machine's drift touches them alike; `--hog alternate` starts a CPU hog (a Python busy
loop, normal priority, one core) beside every other run, `always` beside every run. Every
run's directory stays under --dir; `collected.json` lists them with their kind and hog.

`judge` recomputes every comparison from the runs' hold_seconds.jsonl with this build's
code, for each decision rule (judge/decision.py) and margin:

  paired      each run's candidate against its own reference arm (judge/paired.py);
  sequential  today's way, from the same runs' candidate arms: an A/A pair is run 2k+1's
              candidate against run 2k's (disjoint pairs of aa runs), an A/B pair a B
              run's candidate against the candidate of the aa run before it
              (judge/compare.py, single baseline, gate.night_spread assumed);

and prints the false-fail and detection counts, each B group's realised change of the
TimeToWake p50 (the median paired ratio), the standard errors of both kinds of difference
and the void rate with and without the hog.

  .venv/bin/python bench/gate_power.py paired collect --hold 600 --window 600 \\
      --plan aa:20,b20:10,b10:5,b50:5 --shift-ms b10=2,b20=4,b50=10 --hog alternate
  .venv/bin/python bench/gate_power.py paired judge --dir /tmp/paired-power --write-results
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path("/tmp/paired-power")
KEPT_DIR = Path(__file__).resolve().parent / "data" / "paired-power"
# What `judge` reads of a run: kept in bench/data/ (hold_seconds compressed), the rest not.
KEPT_FILES = ("gate.json", "campaign.json", "windows.jsonl")
WORKERS = 6
RULES = ("significant", "margin-test", "whole-interval")
CONFIDENCE = 0.99


def campaign_values(out: Path, tag: str, hold_s: float, window_s: float, seed: int) -> dict:
    """gate_power's demo-level campaign (smoke, turnover 12 / 4 awake / 2 swaps/s), paired."""
    from gate_power import campaign_values as unpaired

    values = unpaired(out, tag, hold_s, seed, window_s)
    values["name"] = "pairedpower"
    values["max_regression"] = 0.1
    values["gate"] = {"min_blocks": 4}
    values["reference"] = {"protocol": "ate"}
    return values


@contextlib.contextmanager
def hog(on: bool) -> Iterator[None]:
    """A CPU hog at normal priority on one core while the run lasts (bounded by the run)."""
    if not on:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def one_run(
    out: Path, tag: str, args: argparse.Namespace, seed: int, shift_ms: float, with_hog: bool
) -> dict[str, Any]:
    from agentsession_core.campaign.params import CampaignParams
    from agentsession_core.campaign.standalone import run_campaign_blocking
    from local_substrate.launcher import LocalSubstrateProcess

    faults = [f"wake:latency:fixed:{shift_ms}ms"] if shift_ms else []
    started = time.time()
    with (
        LocalSubstrateProcess(workers=WORKERS, faults=faults, fault_seed=seed) as cand,
        LocalSubstrateProcess(workers=WORKERS, fault_seed=seed) as ref,
        hog(with_hog),
    ):
        values = campaign_values(out, tag, args.hold, args.window, seed)
        values["target"].update(substrate=cand.grpc_url, router=cand.url)
        values["reference"].update(substrate=ref.grpc_url, router=ref.url)
        result = run_campaign_blocking(CampaignParams.model_validate(values))
    paired = result.gate.get("paired") or {}
    wake = next((m for m in paired.get("metrics", []) if m["metric"] == "TimeToWake.p50"), {})
    return {
        "tag": tag,
        "kind": tag.split("-")[0],
        "hog": with_hog,
        "shift_ms": shift_ms,
        "run_dir": str(result.run_dir),
        "verdict": result.verdict,
        "reason": result.reason,
        "seconds": round(time.time() - started, 1),
        "wake_ratio": wake.get("ratio"),
        # This build's arms take turns at ticking first (engine/reference_arm.py ArmOrder);
        # runs collected before it lack the key: their candidate always ticked first.
        "arm_order": "turns",
    }


def probe(args: argparse.Namespace) -> int:
    """One A/A paired run (collect's settings) with the generator loop's lateness sampled
    every 10 ms and reported by place in the second: where in the second the run's own
    per-second work (the recorder's flush just after the whole second, the history and
    status.json written after it, the gauges at the half) keeps the loop busy, against where
    the arms tick (+0.25 s, +0.75 s)."""
    import asyncio

    import numpy as np

    from agentsession_core.run.run import Run

    slot_ns = 10_000_000
    late: dict[int, list[float]] = {}
    original = Run._report_every_second

    async def sample(recorder: Any) -> None:
        last = 0
        while True:
            now = max(time.monotonic_ns(), last)  # a timer may fire a hair early: next slot
            second = recorder.mono_ns_of_second(recorder.second_of(now))
            due = last = second + ((now - second) // slot_ns + 1) * slot_ns
            await asyncio.sleep((due - time.monotonic_ns()) / 1e9)
            slot = int((due - second) // slot_ns) % 100
            late.setdefault(slot, []).append((time.monotonic_ns() - due) / 1e6)

    async def reporting(self: Any, progress: Any) -> None:
        sampler = asyncio.create_task(sample(self.recorder))
        try:
            await original(self, progress)
        finally:
            sampler.cancel()

    Run._report_every_second = reporting  # type: ignore[method-assign]
    run = one_run(args.dir / "runs", "probe", args, args.seed, 0.0, False)
    print(f"probe run: {run['verdict']}, wake p50 candidate/reference {run['wake_ratio']}")
    print("loop lateness (ms) of a 10 ms timer by place in the second: mean, p90")
    for start in range(0, 100, 5):
        values = [v for slot in range(start, start + 5) for v in late.get(slot, [])]
        if values:
            print(
                f"  +{start * 10:3d}-{start * 10 + 49:3d} ms  mean {np.mean(values):6.2f}  "
                f"p90 {np.percentile(values, 90):6.2f}  ({len(values)} samples)"
            )
    return 0


def kept_index(kept: Path | None) -> list[dict[str, Any]]:
    index = kept / "collected.json" if kept is not None else None
    return json.loads(index.read_text()) if index is not None and index.exists() else []


def keep(args: argparse.Namespace) -> int:
    """Copy what `judge` reads of each collected run into `--to` (bench/data/paired-power:
    gate.json, campaign.json, windows.jsonl, hold_seconds.jsonl gzipped), merged with the
    runs kept there before, so a later session's collection adds to them (collect --kept)."""
    from agentsession_core.judge.hold_seconds import HOLD_SECONDS_FILE

    index = {r["tag"]: r for r in kept_index(args.to)}
    for entry in json.loads((args.dir / "collected.json").read_text()):
        source = Path(entry["run_dir"])
        source = source if source.is_absolute() else args.dir / source
        target = args.to / "runs" / entry["tag"]
        target.mkdir(parents=True, exist_ok=True)
        for name in KEPT_FILES:
            if (source / name).exists():
                (target / name).write_bytes((source / name).read_bytes())
        raw = (source / HOLD_SECONDS_FILE).read_bytes()
        (target / f"{HOLD_SECONDS_FILE}.gz").write_bytes(gzip.compress(raw, mtime=0))
        index[entry["tag"]] = {**entry, "run_dir": f"runs/{entry['tag']}"}
    (args.to / "collected.json").write_text(json.dumps(list(index.values()), indent=1))
    print(f"{len(index)} runs kept in {args.to}")
    return 0


def plan_of(text: str) -> list[str]:
    """`aa:20,b20:10` → tags interleaved so every kind is spread over the whole collection."""
    wanted = [(kind, int(n)) for kind, n in (part.split(":") for part in text.split(","))]
    total = sum(n for _, n in wanted)
    made = {kind: 0 for kind, _ in wanted}
    out: list[str] = []
    for step in range(total):
        # The kind furthest behind its even share at this step goes next.
        kind = min(wanted, key=lambda kn: (made[kn[0]] + 1) / kn[1] - (step + 1) / total)[0]
        out.append(f"{kind}-{made[kind]:02d}")
        made[kind] += 1
    return out


def collect(args: argparse.Namespace) -> int:
    args.dir.mkdir(parents=True, exist_ok=True)
    index_file = args.dir / "collected.json"
    done: list[dict[str, Any]] = json.loads(index_file.read_text()) if index_file.exists() else []
    shifts = {k: float(v) for k, v in (p.split("=") for p in args.shift_ms.split(","))}
    have = {r["tag"] for r in done} | {r["tag"] for r in kept_index(args.kept)}
    deadline = time.time() + args.max_minutes * 60
    for number, tag in enumerate(plan_of(args.plan)):
        if tag in have or (args.kinds and tag.split("-")[0] not in args.kinds.split(",")):
            continue  # a skipped kind keeps its place (and seed) in the plan for a later session
        if time.time() > deadline:
            print(f"stopped at --max-minutes before {tag}", flush=True)
            break
        kind = tag.split("-")[0]
        with_hog = args.hog == "always" or (args.hog == "alternate" and number % 2 == 1)
        run = one_run(args.dir / "runs", tag, args, 500 + number, shifts.get(kind, 0.0), with_hog)
        done.append(run)
        index_file.write_text(json.dumps(done, indent=1))
        print(
            f"{tag}{' (hog)' if with_hog else ''}: {run['verdict']} in {run['seconds']} s, "
            f"wake p50 candidate/reference {run['wake_ratio']}",
            flush=True,
        )
    return 0


# --------------------------------------------------------------------------- judging
def arms_of(location: Path) -> tuple[Any, Any, set[int], dict[str, Any]]:
    """(candidate HoldSeconds, reference HoldSeconds, saturated seconds, the stored gate)."""
    from agentsession_core.judge.hold_seconds import (
        HOLD_SECONDS_FILE,
        HoldSeconds,
        parse,
        saturated_seconds,
    )

    packed = location / f"{HOLD_SECONDS_FILE}.gz"
    text = (
        gzip.decompress(packed.read_bytes()).decode()
        if packed.exists()
        else (location / HOLD_SECONDS_FILE).read_text()
    )
    records = parse(text)
    gate = json.loads((location / "gate.json").read_text())
    return (
        HoldSeconds.of_records(records),
        HoldSeconds.of_records(records, "reference"),
        saturated_seconds(records),
        gate,
    )


def windows_verdict(gate: dict[str, Any]) -> str:
    """The paired run's verdict without any comparison: pass, fail (a window broke) or void
    (its saturated seconds were left out of its windows, docs/SPEC.md §6.8)."""
    from agentsession_core.judge.gate import decide

    return decide({**gate, "paired": None, "baseline": None})[0]


def unpaired_verdict(gate: dict[str, Any], seconds: int | None) -> str:
    """The verdict the candidate's windows would have had in an unpaired run: void by the
    void rule (measure/health.py) when a window's saturated seconds exceed 1 % of it, or
    any, in a window shorter than 100 s."""
    import math

    from agentsession_core.measure.health import VOID_FRACTION

    verdict = windows_verdict(gate)
    for window in gate.get("windows", []):
        length = window["end_unix"] - window["start_unix"] if seconds is None else seconds
        allowed = math.floor(VOID_FRACTION * length) if length >= 100 else 0
        if verdict == "pass" and window.get("saturated_seconds", 0) > allowed:
            return "void"
    return verdict


def outcome(verdict: str, regressions: list[str], void: bool = False) -> str:
    if verdict != "pass":
        return verdict if verdict == "void" else "fail:windows"
    if void:
        return "void"
    if any(m.startswith("TimeToWake.") for m in regressions):
        return "fail:TimeToWake"
    return "fail:other" if regressions else "pass"


def tally(outcomes: list[str]) -> str:
    keys = ("fail:TimeToWake", "fail:other", "fail:windows", "pass", "void")
    parts = [f"{k} {outcomes.count(k)}" for k in keys if outcomes.count(k)]
    return f"{len(outcomes):3d}: " + ", ".join(parts)


def judge(args: argparse.Namespace) -> int:
    from agentsession_core.judge.compare import Reference, compare
    from agentsession_core.judge.paired import kept_blocks, paired_comparison
    from agentsession_core.judge.uncertainty import figures

    collected = json.loads((args.dir / "collected.json").read_text())
    runs = []
    for entry in collected:
        location = Path(entry["run_dir"])
        if not location.is_absolute():
            location = args.dir / location
        candidate, reference, saturated, gate = arms_of(location)
        seed = int(json.loads((location / "campaign.json").read_text())["params"]["seed"])
        runs.append(
            {
                **entry,
                "candidate": candidate,
                "reference": reference,
                "saturated": saturated,
                "gate": gate,
                "seed": seed,
                "verdict_windows": windows_verdict(gate),
                "verdict_unpaired": unpaired_verdict(gate, None),
                "figures": figures(candidate, confidence=CONFIDENCE, seed=seed),
            }
        )
    if args.slice:
        runs = [part for r in runs for part in slices(r, args.slice)]
    kinds = sorted({r["kind"] for r in runs}, key=lambda k: (k != "aa", len(k), k))
    lines = [
        "runs: " + ", ".join(f"{sum(r['kind'] == k for r in runs)} {k}" for k in kinds),
        f"hold: {len(runs[0]['candidate'])} s judged per run{' (part)' if args.slice else ''}"
        " (median wakes per arm "
        f"{statistics.median(r['figures']['TimeToWake.p50']['n'] for r in runs):.0f})",
    ]
    for hogged in (False, True):
        mine = [r for r in runs if r["hog"] == hogged]
        if not mine:
            continue
        void = sum(1 for r in mine if r["verdict_unpaired"] == "void")
        kept = [
            kept_blocks(r["candidate"].seconds, r["saturated"], args.block_seconds) for r in mine
        ]
        saturated = [sum(t in r["saturated"] for t in r["candidate"].seconds) for r in mine]
        lines.append(
            f"{'with' if hogged else 'without'} the hog: {len(mine)} runs, saturated seconds "
            f"per run median {statistics.median(saturated):g} (max {max(saturated)}); void by "
            f"the unpaired rule: {void}; paired: runs that dropped a block "
            f"{sum(1 for _, _, dropped in kept if dropped)}, void (fewer than "
            f"{args.min_blocks} blocks left) "
            f"{sum(1 for _, total, dropped in kept if total - dropped < args.min_blocks)}"
        )
    paired_d: dict[str, list[float]] = {}
    paired_se: dict[str, list[float]] = {}
    margins = [float(m) for m in args.margins.split(",")]
    rules = args.rules.split(",")
    for margin in margins:
        for rule in rules:
            lines.append("")
            lines.append(f"max_regression {margin:.0%}, rule {rule}, confidence {CONFIDENCE:.0%}:")
            for kind in kinds:
                outcomes = []
                for r in (x for x in runs if x["kind"] == kind):
                    section = paired_comparison(
                        r["candidate"],
                        r["reference"],
                        saturated=r["saturated"],
                        max_regression=margin,
                        confidence=CONFIDENCE,
                        rule=rule,
                        seed=r["seed"],
                        min_blocks=args.min_blocks,
                        block_seconds=args.block_seconds,
                        min_beyond=args.min_beyond,
                    )
                    if margin == margins[0] and rule == rules[0]:
                        for m in section["metrics"]:
                            if m.get("se_log") is not None and m["metric"] == "TimeToWake.p50":
                                paired_d.setdefault(kind, []).append(m["log_change"])
                                paired_se.setdefault(kind, []).append(m["se_log"])
                    outcomes.append(
                        outcome(
                            r["verdict_windows"],
                            section["regressions"],
                            void=section["status"] == "void",
                        )
                    )
                lines.append(f"  paired      {kind:5s} {tally(outcomes)}")
            aa = [r for r in runs if r["kind"] == "aa"]
            for kind in kinds:
                pairs = []
                if kind == "aa":
                    pairs = [(aa[k + 1], aa[k]) for k in range(0, len(aa) - 1, 2)]
                else:
                    for i, r in enumerate(runs):
                        before = [x for x in runs[:i] if x["kind"] == "aa"]
                        if r["kind"] == kind and before:
                            pairs.append((r, before[-1]))
                # Today's way, by its void rule; and as if the rule were off (what the
                # comparison alone would say of the runs the rule voids).
                for label, verdict in (("sequential", "verdict_unpaired"), ("(no void)", "")):
                    outcomes = []
                    for current, base in pairs:
                        if verdict and base[verdict] != "pass":
                            outcomes.append("void")  # a void baseline is refused
                            continue
                        ref = Reference(
                            [base["tag"]],
                            {k: dict(v) for k, v in base["figures"].items()},
                            {k: args.night_spread for k in base["figures"]},
                        )
                        metrics = compare(
                            current["figures"],
                            ref,
                            max_regression=margin,
                            confidence=CONFIDENCE,
                            rule=rule,
                        )
                        regressed = [m["metric"] for m in metrics if m["status"] == "regressed"]
                        judged = current[verdict] if verdict else current["verdict_windows"]
                        outcomes.append(outcome(judged, regressed))
                    lines.append(f"  {label:11s} {kind:5s} {tally(outcomes)}")
    lines.append("")
    lines += order_bias(runs, args)
    lines.append("")
    lines += realised(runs, paired_d)
    lines.append("")
    lines += standard_errors(runs, paired_d, paired_se, args.night_spread)
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        from results_file import write_section

        write_section(args.section, results_body(args, text))
    return 0


def slices(run: dict[str, Any], seconds: int) -> list[dict[str, Any]]:
    """A run's hold cut into consecutive `seconds`-long parts, each judged as a run of that
    length would be: paired, its saturated blocks dropped; unpaired, void when any of its
    seconds saturated (a window shorter than 100 s allows none, measure/health.py)."""
    import numpy as np

    from agentsession_core.judge.uncertainty import figures

    out = []
    total = len(run["candidate"])
    for number, start in enumerate(range(0, total - seconds + 1, seconds)):
        index = np.arange(start, start + seconds)
        candidate = run["candidate"].subset(index)
        saturated = {t for t in candidate.seconds if t in run["saturated"]}
        verdict = run["verdict_windows"]  # a part is shorter than 100 s: no saturation allowed
        out.append(
            {
                **run,
                "tag": f"{run['tag']}/{number}",
                "candidate": candidate,
                "reference": run["reference"].subset(index),
                "verdict_unpaired": "void" if saturated and verdict == "pass" else verdict,
                "figures": figures(candidate, confidence=CONFIDENCE, seed=run["seed"]),
            }
        )
    return out


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval for the median of `values` (order statistics, binomial):
    the widest symmetric pair of order statistics whose coverage is at least `confidence`."""
    from scipy.stats import binom

    ordered, n = sorted(values), len(values)
    k = int(binom.ppf((1 - confidence) / 2, n, 0.5))  # P(X <= k - 1) <= alpha / 2
    while k > 0 and binom.cdf(k - 1, n, 0.5) * 2 > 1 - confidence:
        k -= 1
    k = max(k, 1)
    return ordered[k - 1], ordered[n - k]


def order_bias(runs: list[dict], args: argparse.Namespace) -> list[str]:
    """The order bias of the A/A runs: TimeToWake p50 candidate/reference per run (its paired
    interval at the judge's confidence, and whether it covers 1; computed however few wakes
    lie past the p50, which a verdict would call inconclusive), their median with a 95 %
    interval; and, for runs whose arms took turns at ticking first, the ratio over the
    seconds in which each arm led (does a bias follow the arm or the place in the second?)."""
    import math

    import numpy as np

    from agentsession_core.engine.reference_arm import ArmOrder
    from agentsession_core.judge.paired import kept_blocks, paired_comparison
    from agentsession_core.judge.uncertainty import Blocks, block_figures
    from agentsession_core.measure.histogram import GAMMA

    def wake_p50(hold: Any) -> float:
        figure = block_figures(hold, Blocks(len(hold)))["TimeToWake.p50"][0]
        return float(figure(np.ones((1, Blocks(len(hold)).count)))[0])

    def log_mean(hold: Any) -> float:
        """The mean log wake time of these seconds, up to a constant (the slots are
        log-spaced buckets)."""
        section = hold.sections["TimeToWake"]
        counts = section.counts[:, 1:].sum(axis=0)
        return float((counts * section.slots).sum() / max(1, counts.sum()) * math.log(GAMMA))

    out = [
        f"A/A order bias: TimeToWake p50 candidate/reference, {CONFIDENCE:.0%} paired intervals:"
    ]
    for order in ("always", "turns"):
        aa = [
            r
            for r in runs
            if r["kind"] == "aa" and (r.get("arm_order") == "turns") == (order == "turns")
        ]
        if not aa:
            continue
        ratios: list[float] = []
        covering = 0
        led: dict[str, list[float]] = {"candidate": [], "reference": []}
        geo: dict[str, list[float]] = {"candidate": [], "reference": []}
        for r in aa:
            section = paired_comparison(
                r["candidate"],
                r["reference"],
                saturated=r["saturated"],
                max_regression=0.1,
                confidence=CONFIDENCE,
                seed=r["seed"],
                min_blocks=args.min_blocks,
                block_seconds=args.block_seconds,
                min_beyond=1,  # a measurement, not a verdict: every run's interval
            )
            wake = next((m for m in section["metrics"] if m["metric"] == "TimeToWake.p50"), None)
            if wake is None or wake.get("ratio_interval") is None:
                continue
            ratios.append(wake["ratio"])
            low, high = wake["ratio_interval"]
            covering += low <= 1.0 <= high
            if order != "turns":
                continue
            # Second k of the steady load (the level's first window starts on it).
            first = int(r["gate"]["windows"][0]["start_unix"])
            arms = ArmOrder(r["seed"])
            positions, _, _ = kept_blocks(r["candidate"].seconds, r["saturated"], 1)
            for leader in led:
                index = np.asarray(
                    [
                        i
                        for i in positions
                        if arms.leader(r["candidate"].seconds[i] - first) == leader
                    ],
                    dtype=np.int64,
                )
                c = wake_p50(r["candidate"].subset(index))
                f = wake_p50(r["reference"].subset(index))
                led[leader].append(math.log(c + 1.0) - math.log(f + 1.0))
                geo[leader].append(
                    log_mean(r["candidate"].subset(index)) - log_mean(r["reference"].subset(index))
                )
        if not ratios:
            continue
        low, high = median_interval(ratios)
        out.append(
            f"  {'arms take turns' if order == 'turns' else 'candidate always first':22s} "
            f"{len(ratios):3d} runs  median ratio {statistics.median(ratios):.3f} "
            f"({statistics.median(ratios) - 1:+.1%}), 95 % interval of the median "
            f"[{low - 1:+.1%}, {high - 1:+.1%}]; intervals covering 1: {covering} of {len(ratios)}"
        )
        out.append("      per run: " + " ".join(f"{x - 1:+.1%}" for x in sorted(ratios)))
        for leader, ds in led.items():
            if ds:
                out.append(
                    f"      seconds the {leader} led: median ratio "
                    f"{math.exp(statistics.median(ds)):.3f} "
                    f"({math.expm1(statistics.median(ds)):+.1%}) over {len(ds)} runs"
                )
        for figure, split in (("p50", led), ("geometric mean", geo)):
            if len(split["candidate"]) < 2:
                continue
            # Per run, on the log scale: what going first costs (half the difference between
            # the seconds each arm led) and what being the candidate costs (their mean).
            pairs = list(zip(split["candidate"], split["reference"], strict=True))
            for label, effect in (
                ("going first (either arm)", [(c - r) / 2 for c, r in pairs]),
                ("being the candidate (either order)", [(c + r) / 2 for c, r in pairs]),
            ):
                mean = statistics.mean(effect)
                se = statistics.stdev(effect) / math.sqrt(len(effect))
                out.append(
                    f"      wake {figure:14s}: cost of {label:34s} {math.expm1(mean):+.1%} "
                    f"(log {mean:+.3f} ± {se:.3f} se over {len(effect)} runs)"
                )
    return out


def realised(runs: list[dict], paired_d: dict[str, list[float]]) -> list[str]:
    """Each kind's realised change of the TimeToWake p50, candidate over reference (the
    median of its runs' paired ratios), and the added latency that made it."""
    import math

    out = ["TimeToWake p50, candidate / reference (median over runs; the change to find):"]
    for kind, ds in paired_d.items():
        shift = statistics.median(r["shift_ms"] for r in runs if r["kind"] == kind)
        p50 = statistics.median(
            r["figures"]["TimeToWake.p50"]["value"] for r in runs if r["kind"] == kind
        )
        middle = statistics.median(ds)
        out.append(
            f"  {kind:5s} {len(ds):3d} runs  +{shift:g} ms added  candidate p50 {p50:6.2f} ms  "
            f"ratio {math.exp(middle):.3f} ({math.expm1(middle):+.0%})"
        )
    return out


def standard_errors(
    runs: list[dict],
    paired_d: dict[str, list[float]],
    paired_se: dict[str, list[float]],
    night_spread: float,
) -> list[str]:
    """TimeToWake p50's difference: the paired bootstrap's se against the sequential one
    (both runs' own intervals plus the assumed night spread), and the sd of the differences
    actually seen across A/A runs (paired: each run's arms; sequential: disjoint pairs)."""
    import math

    aa = [r for r in runs if r["kind"] == "aa"]
    seq_d, seq_se = [], []
    for k in range(0, len(aa) - 1, 2):
        a, b = aa[k]["figures"]["TimeToWake.p50"], aa[k + 1]["figures"]["TimeToWake.p50"]
        if a.get("se_log") is None or b.get("se_log") is None:
            continue
        seq_d.append(math.log(b["value"] + 1.0) - math.log(a["value"] + 1.0))
        seq_se.append(math.sqrt(a["se_log"] ** 2 + b["se_log"] ** 2 + night_spread**2))
    out = ["TimeToWake p50 difference on the log scale, A/A runs:"]
    d, se = paired_d.get("aa", []), paired_se.get("aa", [])
    if len(d) >= 2:
        out.append(
            f"  paired      {len(d):3d} runs   se (bootstrap, median) {statistics.median(se):.3f}"
            f"   sd of the differences seen {statistics.stdev(d):.3f}"
            f"   mean {statistics.mean(d):+.3f}"
        )
    if len(seq_d) >= 2:
        out.append(
            f"  sequential  {len(seq_d):3d} pairs  se (own + night spread, median) "
            f"{statistics.median(seq_se):.3f}"
            f"   sd of the differences seen {statistics.stdev(seq_d):.3f}"
        )
    return out


def results_body(args: argparse.Namespace, text: str) -> str:
    return (
        f"## The paired gate's power: {args.title} (bench/gate_power.py paired)\n\n"
        "Paired campaigns of the demo preset's first level (smoke script, turnover 12 "
        "sessions / 4 awake / 2 swaps/s, ate wire): in each, the candidate arm against a "
        "local substrate of its own (6 workers) and the reference arm against another, at "
        "the same time from one generator, one campaign after another on this 2-core VM; "
        "A/A runs unchanged, B runs (bNN) with `wake:latency:fixed:D` on the candidate's "
        "substrate; `(hog)` runs with a CPU hog at normal priority on one core beside them. "
        "`paired` judges each run's candidate against its own reference arm; `sequential` "
        "is today's way on the same runs' candidate arms (disjoint A/A pairs; a B run "
        "against the A/A run before it). `fail:TimeToWake` = the gate failed the run naming "
        "a TimeToWake figure; `fail:windows` = a window broke; `void` = not judged. "
        "Recomputed from each run's hold_seconds.jsonl by this build's gate. Rerun: "
        "`python bench/gate_power.py paired collect …` then `paired judge --write-results`.\n\n"
        f"```\n{text}\n```\n"
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("paired", help="the paired gate: candidate and reference side by side")
    paired = p.add_subparsers(dest="paired_command", required=True)
    c = paired.add_parser("collect", help="run the paired campaigns")
    c.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    c.add_argument("--hold", type=float, default=60.0, help="seconds of hold per campaign")
    c.add_argument("--window", type=float, default=30.0, help="seconds per judged window")
    c.add_argument("--plan", default="aa:20,b20:10,b10:5,b50:5")
    c.add_argument("--shift-ms", default="b10=2,b20=4,b50=10", help="added wake ms per kind")
    c.add_argument("--hog", choices=("never", "alternate", "always"), default="alternate")
    c.add_argument("--max-minutes", type=float, default=600.0, help="stop starting runs after")
    c.add_argument("--kept", type=Path, default=None, help="skip the plan's runs already kept here")
    c.add_argument("--kinds", default="", help="run only these kinds of the plan (aa,b20)")
    c.set_defaults(handler=collect)
    pr = paired.add_parser("probe", help="one A/A run: the loop's lateness by place in the second")
    pr.add_argument("--dir", type=Path, default=Path("/tmp/paired-probe"))
    pr.add_argument("--hold", type=float, default=60.0)
    pr.add_argument("--window", type=float, default=60.0)
    pr.add_argument("--seed", type=int, default=500)
    pr.set_defaults(handler=probe)
    k = paired.add_parser("keep", help="keep what judge reads of each run in bench/data/")
    k.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    k.add_argument("--to", type=Path, default=KEPT_DIR)
    k.set_defaults(handler=keep)
    j = paired.add_parser("judge", help="count false fails and detections")
    j.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    j.add_argument("--night-spread", type=float, default=0.1)
    j.add_argument("--min-blocks", type=int, default=8)
    j.add_argument("--block-seconds", type=int, default=5)
    j.add_argument("--min-beyond", type=int, default=50, help="a paired percentile's samples")
    j.add_argument(
        "--slice",
        type=int,
        default=0,
        help="judge each run's hold in consecutive parts of this many seconds, each as a run "
        "of that length (e.g. 60: demo-length parts of 10-minute runs)",
    )
    j.add_argument("--margins", default="0.1,0.2", help="max_regression values to judge at")
    j.add_argument("--rules", default=",".join(RULES), help="decision rules to judge by")
    j.add_argument("--write-results", action="store_true")
    j.add_argument("--section", default="paired_power", help="RESULTS.md section to write")
    j.add_argument("--title", default="10-minute runs", help="the section's title")
    j.set_defaults(handler=judge)


__all__ = ["add_parsers"]
