"""What starting one local-substrate worker costs: a fork from the pool's fork server
(local_substrate/worker_process.py, what the pool does now) against a fresh interpreter that
imports the worker (what a worker start cost before: `python -m local_substrate.worker`,
whose server setup this leaves out, so the comparison favours the old way).

Side by side in one run, in alternating rounds (the machine is shared and noisy): each round
starts WORKERS of each kind, one after the other, and books per start its wall time and its
CPU time (the fork's: the worker's own and the fork server's share; the interpreter's: what
the waited-for child used). Prints one JSON line and rewrites its section of RESULTS.md.

Run: .venv/bin/python bench/worker_start.py [rounds] [workers]
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from results_file import write_section  # bench/ is on the path

from local_substrate import worker_process


def cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def fork_server_pid() -> int:
    found = [
        c.pid
        for c in psutil.Process().children()
        if "multiprocessing.forkserver" in " ".join(c.cmdline())
    ]
    assert len(found) == 1, found
    return found[0]


async def forked(scratch: Path, n: int) -> list[tuple[float, float]]:
    """(wall s, CPU s) per worker forked, handshake included, one after the other."""
    server = fork_server_pid()
    out = []
    for i in range(n):
        before_server = cpu_s(server)
        started = time.perf_counter()
        proc, _port = await worker_process.start(
            ["--scratch", str(scratch / f"f{i}")], "bench-secret", 60
        )
        wall = time.perf_counter() - started
        cpu = cpu_s(proc.pid) + cpu_s(server) - before_server
        proc.close_pipe()
        await proc.wait()
        out.append((wall, cpu))
    return out


def interpreted(n: int) -> list[tuple[float, float]]:
    """(wall s, CPU s) per fresh interpreter that imports the worker and exits."""
    out = []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import local_substrate.fork_server"], check=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        out.append((wall, cpu))
    return out


async def main(rounds: int, workers: int) -> dict:
    fork: list[tuple[float, float]] = []
    fresh: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        # The fork server's own start (once per substrate) is not a worker's: made first.
        warm, _ = await worker_process.start(["--scratch", str(scratch / "warm")], "s", 60)
        warm.close_pipe()
        await warm.wait()
        for r in range(rounds):
            if r % 2 == 0:
                fork += await forked(scratch / f"r{r}", workers)
                fresh += await asyncio.to_thread(interpreted, workers)
            else:
                fresh += await asyncio.to_thread(interpreted, workers)
                fork += await forked(scratch / f"r{r}", workers)

    def med(samples: list[tuple[float, float]], i: int) -> float:
        return statistics.median(s[i] for s in samples)

    return {
        "bench": "worker_start",
        "starts_each": len(fork),
        "fork_wall_ms": round(med(fork, 0) * 1000, 1),
        "fork_cpu_ms": round(med(fork, 1) * 1000, 1),
        "interpreter_wall_ms": round(med(fresh, 0) * 1000, 1),
        "interpreter_cpu_ms": round(med(fresh, 1) * 1000, 1),
        "cpu_ratio": round(med(fresh, 1) / med(fork, 1), 1),
        "wall_ratio": round(med(fresh, 0) / med(fork, 0), 1),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def section(r: dict) -> str:
    return f"""## A worker's start: forked against a fresh interpreter (bench/worker_start.py)

{r["starts_each"]} starts of each kind in alternating rounds, one run, {r["cpus"]} cores, medians
per start. *Forked*: `worker_process.start` (a fork of the pool's fork server, the worker's
port bound, its handshake read): the worker's CPU and the fork server's. *Interpreter*: a
fresh `python` that imports the worker and exits (the old start, without its server setup).

| per start | forked | interpreter | ratio |
|---|---|---|---|
| CPU | {r["fork_cpu_ms"]} ms | {r["interpreter_cpu_ms"]} ms | {r["cpu_ratio"]}× |
| wall | {r["fork_wall_ms"]} ms | {r["interpreter_wall_ms"]} ms | {r["wall_ratio"]}× |
"""


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    result = asyncio.run(main(*(args + [6, 12][len(args) :])))
    print(json.dumps(result))
    write_section("worker_start", section(result))
