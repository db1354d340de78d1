"""Wake latency of the local substrate against snapshot size, beside the floor: the time
to simply read the same bytes from the store.

For each size (1 MiB … 256 MiB) one actor holds one RAM array of that size; each rep
suspends it and then wakes it three ways, timed from the client:
  - explicit: ResumeActor (control) returns RUNNING;
  - implicit: the first router ping to the suspended actor (parks, resumes, answers);
  - pause: PauseActor, then the first ping (local swap on the same worker).
The floor is reading the snapshot's array file from the store into a bytearray
(warm page cache, like the resume sees it). Medians over --reps.

    .venv/bin/python bench/wake_vs_snapshot.py [--reps 5] [--sizes 1,4,16,64,256]

Writes its table into bench/RESULTS.md between its own markers (other sections kept).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from results_file import write_section

from agentsession_core.substrate.http import HttpSubstrate
from local_substrate import store
from local_substrate.launcher import LocalSubstrate

MiB = 1 << 20


def read_floor(path: Path) -> float:
    start = time.perf_counter()
    size = path.stat().st_size
    array = bytearray(size)
    with open(path, "rb", buffering=0) as src:
        src.readinto(array)
    return time.perf_counter() - start


async def measure(sizes: list[int], reps: int, root: Path) -> list[dict[str, float]]:
    rows = []
    async with LocalSubstrate(workers=2, store=root, templates={"bench/big": "2Gi"}) as local:
        sub = HttpSubstrate(local.url, control_timeout=300, router_timeout=300)
        await sub.ensure_atespace("bench")
        for mib in sizes:
            name = f"s{mib}"
            await sub.create_actor("bench", name, "bench", "big")
            await sub.request(
                "bench",
                name,
                "writeram",
                json={"key": "mem", "size": mib * MiB, "mode": "overwrite"},
            )
            samples: dict[str, list[float]] = {
                k: [] for k in ("suspend", "explicit", "implicit", "pause", "floor")
            }
            for _ in range(reps):
                t = time.perf_counter()
                await sub.suspend_actor("bench", name)
                samples["suspend"].append(time.perf_counter() - t)
                snap = store.latest(store.actor_dir(root, "bench", name))
                assert snap is not None
                samples["floor"].append(await asyncio.to_thread(read_floor, snap / "ram" / "mem"))
                t = time.perf_counter()
                await sub.resume_actor("bench", name)
                samples["explicit"].append(time.perf_counter() - t)
                await sub.suspend_actor("bench", name)
                t = time.perf_counter()
                await sub.request("bench", name, "ping", json={"message": "wake"})
                samples["implicit"].append(time.perf_counter() - t)
                await sub.pause_actor("bench", name)
                t = time.perf_counter()
                await sub.request("bench", name, "ping", json={"message": "wake"})
                samples["pause"].append(time.perf_counter() - t)
            await sub.delete_actor("bench", name)
            row = {k: statistics.median(v) * 1000 for k, v in samples.items()}
            row["mib"] = mib
            rows.append(row)
            print(
                f"{mib:>4} MiB  " + "  ".join(f"{k} {row[k]:8.1f} ms" for k in samples), flush=True
            )
        await sub.aclose()
    return rows


def table(rows: list[dict[str, float]], reps: int) -> str:
    lines = [
        "## Local substrate: wake latency vs snapshot size",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"`bench/wake_vs_snapshot.py`, median of {reps} reps, 2 workers, store on "
        f"a temp dir (page cache warm), {os.cpu_count()} cores, "
        f"Python {platform.python_version()}. One RAM array per actor; times in ms from the "
        "client. *read floor* = reading the snapshot's bytes from the store into memory.",
        "",
        "| snapshot | suspend | resume (explicit) | wake (implicit ping) | wake after pause "
        "| read floor | explicit / floor |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = r["explicit"] / r["floor"] if r["floor"] else float("nan")
        lines.append(
            f"| {int(r['mib'])} MiB | {r['suspend']:.1f} | {r['explicit']:.1f} | "
            f"{r['implicit']:.1f} | {r['pause']:.1f} | {r['floor']:.1f} | {ratio:.1f}× |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sizes", default="1,4,16,64,256", help="MiB, comma separated")
    parser.add_argument("--results", type=Path, default=Path(__file__).with_name("RESULTS.md"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="wake-bench-") as root:
        rows = asyncio.run(measure(sizes, args.reps, Path(root)))
    section = table(rows, args.reps)
    print(section)
    write_section("wake_vs_snapshot", section, args.results)


if __name__ == "__main__":
    main()
