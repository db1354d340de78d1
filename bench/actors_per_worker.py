"""Actors per worker process on the local substrate (docs/SPEC.md §2.7): what an idle actor
costs in memory, and how wakes slow down, as one worker process holds 1, 2, 4, 8, 16 actors.

For each capacity C a fresh local substrate with one worker of capacity C; C actors, each
filling one RAM array of --fill-mib, then idle. Memory: the worker's resident memory
(/proc/PID/status VmRSS, and RssAnon, its private part: VmRSS also counts the fork server's
pages the worker shares) before any actor and with all C idle, so *per actor* is the
process's whole RSS over C (what density pays: the process's own base shared by C) and
*delta per actor* what each actor added. Wakes, timed from the client, two ways:
  - single: one actor suspended and woken by its first router ping while the other C-1 sit
    idle in the same process (--reps times);
  - burst: all C suspended, then all woken at once by a ping each (--bursts times), so C
    restores compete for the one process.
p50 / p99 of each (the burst's over every actor of every burst).

    .venv/bin/python bench/actors_per_worker.py [--capacities 1,2,4,8,16] [--fill-mib 4]
        [--reps 30] [--bursts 8]

Writes its section into bench/RESULTS.md between its own markers (other sections kept).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import time
from pathlib import Path

from results_file import write_section

from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrate

MiB = 1 << 20
SPACE = "bench"


def percentile(values: list[float], p: float) -> float:
    """Nearest rank over sorted `values`: small samples, no interpolation to invent values."""
    return values[max(0, math.ceil(p / 100 * len(values)) - 1)]


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for pid {pid}")


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) in bytes."""
    return status_kib(pid, "VmRSS") * 1024, status_kib(pid, "RssAnon") * 1024


async def ping(sub: HttpSubstrate, name: str) -> float:
    start = time.perf_counter()
    await sub.request(SPACE, name, "ping", json={"message": "wake"})
    return time.perf_counter() - start


async def one_capacity(capacity: int, fill: int, reps: int, bursts: int) -> dict[str, float]:
    async with LocalSubstrate(
        workers=1,
        worker_capacity=capacity,
        templates={"bench/actor": f"{2 * fill // MiB + 16}Mi"},
        park_timeout=120,
    ) as local:
        sub = HttpSubstrate(local.url, control_timeout=300, router_timeout=300)
        try:
            await sub.ensure_atespace(SPACE)
            (worker,) = await asyncio.to_thread(lambda: local.proc.debug_workers()["workers"])
            pid = worker["pid"]
            await asyncio.sleep(0.5)  # let the fresh worker settle
            empty_rss, empty_anon = memory(pid)
            names = [f"a{i}" for i in range(capacity)]
            for name in names:
                await sub.create_actor(SPACE, name, "bench", "actor")
                await sub.request(
                    SPACE, name, "writeram", json={"key": "mem", "size": fill, "mode": "truncate"}
                )
            await asyncio.sleep(0.5)
            full_rss, full_anon = memory(pid)
            single = []
            for _ in range(reps):
                await sub.suspend_actor(SPACE, names[0])
                single.append(await ping(sub, names[0]))
            burst: list[float] = []
            for _ in range(bursts):
                await asyncio.gather(*(sub.suspend_actor(SPACE, n) for n in names))
                burst += await asyncio.gather(*(ping(sub, n) for n in names))
        finally:
            await sub.aclose()
    ms = 1000.0
    row = {
        "capacity": capacity,
        "empty_rss": empty_rss / MiB,
        "full_rss": full_rss / MiB,
        "per_actor": full_rss / capacity / MiB,
        "delta_per_actor": (full_rss - empty_rss) / capacity / MiB,
        "anon_delta_per_actor": (full_anon - empty_anon) / capacity / MiB,
        "single_p50": percentile(sorted(single), 50) * ms,
        "single_p99": percentile(sorted(single), 99) * ms,
        "burst_p50": percentile(sorted(burst), 50) * ms,
        "burst_p99": percentile(sorted(burst), 99) * ms,
    }
    print(
        "  ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()),
        flush=True,
    )
    return row


def table(rows: list[dict[str, float]], args: argparse.Namespace, seconds: float) -> str:
    lines = [
        "## Actors per worker process",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"`bench/actors_per_worker.py --capacities {args.capacities} --fill-mib "
        f"{args.fill_mib} --reps {args.reps} --bursts {args.bursts}` ({seconds:.0f} s), "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, Linux "
        f"{platform.release()}. One local-substrate worker process of capacity C holding C "
        f"idle actors, each with one {args.fill_mib} MiB RAM array. Memory from "
        "/proc/PID/status: *RSS / actor* is the process's whole VmRSS over C (its base is "
        "shared by C actors), *added / actor* what each actor added to VmRSS (and to "
        "RssAnon, the private pages). Wakes from the client, in ms: *single* one actor "
        "suspended and woken by a ping beside C-1 idle neighbours; *burst* all C suspended "
        "and woken at once.",
        "",
        "| C | worker RSS empty | RSS with C actors | RSS / actor | added / actor (VmRSS) "
        "| added / actor (RssAnon) | single wake p50 | p99 | burst wake p50 | p99 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {int(r['capacity'])} | {r['empty_rss']:.1f} MiB | {r['full_rss']:.1f} MiB | "
            f"{r['per_actor']:.1f} MiB | {r['delta_per_actor']:.2f} MiB | "
            f"{r['anon_delta_per_actor']:.2f} MiB | {r['single_p50']:.1f} | "
            f"{r['single_p99']:.1f} | {r['burst_p50']:.1f} | {r['burst_p99']:.1f} |"
        )
    first, last = rows[0], rows[-1]
    fill = args.fill_mib
    lines += [
        "",
        f"In short: the process's own ~{first['empty_rss']:.0f} MiB is what capacity shares; "
        f"RSS per idle actor falls from {first['per_actor']:.1f} MiB at C = "
        f"{int(first['capacity'])} to {last['per_actor']:.1f} MiB at C = "
        f"{int(last['capacity'])}, and an actor adds "
        f"{last['anon_delta_per_actor'] - fill:.2f} MiB of private memory beyond its "
        f"{fill} MiB array at C = {int(last['capacity'])}. A single wake does not slow "
        "with idle neighbours (its spread is the shared VM's); a burst of C wakes queues in "
        f"the one process: its p50 is {last['burst_p50'] / last['capacity']:.1f} ms per "
        f"actor at C = {int(last['capacity'])} (restores share one event loop and one GIL, "
        "docs/limits.md).",
    ]
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> list[dict[str, float]]:
    fill = args.fill_mib * MiB
    rows = []
    for capacity in (int(c) for c in args.capacities.split(",")):
        rows.append(await one_capacity(capacity, fill, args.reps, args.bursts))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacities", default="1,2,4,8,16", help="comma separated")
    parser.add_argument("--fill-mib", type=int, default=4, help="each actor's RAM array")
    parser.add_argument("--reps", type=int, default=30, help="single wakes per capacity")
    parser.add_argument("--bursts", type=int, default=8, help="bursts per capacity")
    parser.add_argument("--results", type=Path, default=Path(__file__).with_name("RESULTS.md"))
    args = parser.parse_args()
    started = time.monotonic()
    rows = asyncio.run(run(args))
    body = table(rows, args, time.monotonic() - started)
    print(body)
    write_section("actors_per_worker", body, args.results)


if __name__ == "__main__":
    main()
