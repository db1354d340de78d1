"""What implicit mode's park checks cost the generator (issue 37, docs/SPEC.md §3.4): the
same turnover run with `population.park_check_share` 0 (no check), 0.01 (the default) and 1
(every park read back), in alternating rounds against one local substrate, each run the
generator's own process (the substrate started apart, so its CPU is not counted).

Figures per run: the generator's CPU (user + system, from the child's rusage) per swap, the
park checks made, TimeToWake p50 and p99; the table gives each share's median over the
rounds and its ratio to share 0's. The machine is shared: compare within the table only.

  .venv/bin/python bench/park_check_cost.py                  # 3 rounds, about 4 minutes
  .venv/bin/python bench/park_check_cost.py --write-results  # also its RESULTS.md section
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from results_file import write_section  # noqa: E402

from local_substrate.launcher import LocalSubstrateProcess  # noqa: E402

SHARES = (0.0, 0.01, 1.0)
TOKEN = "bench-park-check"


def one_run(url: str, share: float, out: Path, hold: int, seed: int) -> dict[str, Any]:
    """One `agentsession run` as its own process: its CPU from the wait's rusage."""
    cmd = [
        sys.executable, "-m", "agentsession_core", "run", "--hold", f"{hold}s",
        "--substrate", url, "--script", "smoke", "--think-scale", "0.05",
        "--population", "turnover", "--sessions", "40", "--awake", "8", "--target-rps", "10",
        "--registration-quiet-seconds", "1", "--park-check-share", str(share),
        "--seed", str(seed), "--out", str(out), "--progress", "plain",
        "--set", "generator.void_when_saturated=false",
    ]  # fmt: skip
    env = {**os.environ, "AGENTSESSION_TOKEN": TOKEN}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode not in (0, 1):
        raise SystemExit(f"run with share {share} exited {proc.returncode}: {err[-2000:]}")
    (stats,) = out.glob("runs/*/*/*/*/stats.csv")
    rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(stats.open())}
    wake = rows[("rps", "TimeToWake")]
    checks = rows.get(("grpc", "GetActor_ParkCheck"), {}).get("Request Count", "0")
    swaps = int(wake["Request Count"])
    return {
        "share": share,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "swaps": swaps,
        "checks": int(checks),
        "p50": float(wake["50%"]),
        "p99": float(wake["99%"]),
        "cpu_us_per_swap": 1e6 * (usage.ru_utime + usage.ru_stime) / max(1, swaps),
    }


def table(runs: list[dict[str, Any]], rounds: int, hold: int) -> str:
    base = statistics.median(r["cpu_us_per_swap"] for r in runs if r["share"] == 0.0)
    lines = [
        "## Park checks: what implicit mode's read-backs cost the generator "
        "(bench/park_check_cost.py)",
        "",
        f"{datetime.date.today().isoformat()}: the same turnover run (smoke script, 40 sessions, "
        f"8 awake, 10 swaps/s, {hold} s hold, JSON wire) against one local substrate started "
        f"apart, {rounds} rounds, the shares alternating within each round; CPU is the "
        "generator process's own (user + system over the whole run: registration, fill, hold, "
        "cleanup), per TimeToWake sample. Medians over the rounds; the machine is shared.",
        "",
        "| park_check_share | CPU µs per swap | ratio to 0 | swaps | park checks | "
        "TimeToWake p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for share in SHARES:
        mine = [r for r in runs if r["share"] == share]
        cpu = statistics.median(r["cpu_us_per_swap"] for r in mine)
        lines.append(
            f"| {share:g} | {cpu:.0f} | {cpu / base:.3f} | "
            f"{statistics.median(r['swaps'] for r in mine):.0f} | "
            f"{statistics.median(r['checks'] for r in mine):.0f} | "
            f"{statistics.median(r['p50'] for r in mine):.0f} | "
            f"{statistics.median(r['p99'] for r in mine):.0f} |"
        )
    per_round = ", ".join(f"{r['share']:g}: {r['cpu_us_per_swap']:.0f}" for r in runs)
    lines += [
        "",
        f"Each run's CPU µs per swap, in order: {per_round}.",
        "",
        "Reproduce: `.venv/bin/python bench/park_check_cost.py --write-results`.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hold", type=int, default=30, help="seconds of hold per run")
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalSubstrateProcess(
            workers=8, token=TOKEN, store=Path(tmp) / "store", log_path=Path(tmp) / "substrate.log"
        ) as sub,
    ):
        for round_ in range(args.rounds):
            order = SHARES if round_ % 2 == 0 else tuple(reversed(SHARES))
            for share in order:
                out = Path(tmp) / f"r{round_}-{share:g}"
                run = one_run(sub.url, share, out, args.hold, seed=11 + round_)
                print(
                    f"round {round_} share {share:g}: {run['cpu_us_per_swap']:.0f} µs/swap, "
                    f"{run['swaps']} swaps, {run['checks']} checks",
                    file=sys.stderr,
                    flush=True,
                )
                runs.append(run)
    body = table(runs, args.rounds, args.hold)
    print(body)
    if args.write_results:
        write_section("park_check_cost", body)


if __name__ == "__main__":
    main()
