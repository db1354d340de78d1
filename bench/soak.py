"""A fault soak: one `agentsession run` turnover hold against a local substrate this script
starts, for --minutes (default 30), while the substrate's faults change every few minutes
through its control endpoint (PUT /v1/debug/faults) on a seeded schedule: fault phases
(wake refusals 20 %, 1 % op failures, added latency, a 2 s router 503 blip, a share of hung
requests, reset connections) with quiet periods between them.

Every --sample-seconds (10) it samples the generator process (the run's own process: RSS, open
file descriptors from /proc/PID/fd, the engine's tasks in flight and the resident gauge from
its /metrics), and the substrate (its actors in the run's atespace, how many RUNNING, the RSS
of its server and workers). At the end it judges, from the samples and the run's own
artifacts (gauges.jsonl: the resident gauge once a second):

  memory     the generator's RSS, median of the last sixth of the hold (minutes 25-30 of 30)
             at most 10 % above the median of its second sixth (minutes 5-10): a leak grows;
  fds        the same two medians: at most 10 % (+2) more;
  tasks      the same two medians: at most 10 % (+5) more (in flight: they swing with the
             swaps);
  leaks      no actor of the run left on the substrate, none listed as leaked;
  resident   outside the fault phases (and a settle margin after each), the resident set's
             mean gap within 2 % of awake (the engine's own bound, docs/SPEC.md §4.2);
  books      the booked ResidentShortfall (stats.jsonl's turnover_window) against the gauge's
             summed shortfall over the same turnover seconds: within 2 % of the gauge's, or
             within the bound of docs/SPEC.md §4.2 (one resident-second per failed wake).

--protocol ate runs it over the ate wire (gRPC control, protobuf bodies); --shards K splits
the generator over K Dask worker processes (a local cluster), whose RSS and fds are summed
with the coordinator's. Each variant has its own RESULTS.md section.

It prints a table of the samples and the verdicts, writes every sample as JSON, and exits 0
when every criterion holds, 1 otherwise. Not part of any test tier:

  .venv/bin/python bench/soak.py --minutes 3                  # a quick look
  nohup .venv/bin/python bench/soak.py > soak.log 2>&1 &      # the 30-minute soak
  .venv/bin/python bench/soak.py --write-results              # also rewrites RESULTS.md's section
  .venv/bin/python bench/soak.py --rejudge DIR/soak.json       # judge a finished soak again
  .venv/bin/python bench/soak.py --protocol ate --write-results
  .venv/bin/python bench/soak.py --shards 2 --write-results
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from results_file import RESULTS, write_section

from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.http import HttpSubstrate
from local_substrate.launcher import LocalSubstrateProcess

HERE = Path(__file__).resolve().parent
ATESPACE = "soak"
TOLERANCE = 0.10  # memory, fds, tasks: late median within this share of the early one
RESIDENT_TOLERANCE = 0.02  # the engine's own bound on the resident set's mean gap
BLIP_S = 2.0

# The fault phases: name -> rules. Each is one of the bad nights the issue lists; "blip"
# holds its rule for BLIP_S only, then the rest of its phase is quiet.
FAULTS: dict[str, list[str]] = {
    "refuse": ["wake:refuse:0.2"],
    "ops": ["router:fail:0.01"],
    "latency": ["router:latency:exp:30ms", "wake:latency:uniform:20ms:200ms"],
    "blip": ["router:unavailable:1"],
    "hang": ["router:hang:0.01"],
    "reset": ["router:reset:0.01", "control:reset:0.01"],
}


def say(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ---------------------------------------------------------------- the schedule
@dataclass
class Phase:
    kind: str  # quiet, or a FAULTS key
    start_s: float  # from the hold's start
    end_s: float
    rules: list[str]
    applied_unix: float = 0.0  # when its rules were put (0: never reached)
    cleared_unix: float = 0.0  # when they were cleared (blip: after BLIP_S; else its end)
    fired: list[dict[str, Any]] = field(default_factory=list)  # the rules' counts at the end

    @property
    def burst(self) -> bool:
        return bool(self.rules)


def schedule(seed: int, total_s: float, phase_s: float) -> list[Phase]:
    """Quiet, fault, quiet, fault, ..., quiet: every fault kind once in a seeded order, then
    again in another, until the hold is covered; faults last phase_s and quiet periods half
    that, each × U[0.8, 1.2) from the seeded stream. The last phase is quiet, so the hold
    ends as it began."""
    rng = random.Random(f"soak/{seed}")
    phases: list[Phase] = []
    kinds: list[str] = []
    t = 0.0
    quiet = True
    while t < total_s:
        if quiet:
            length, kind = 0.5 * phase_s * rng.uniform(0.8, 1.2), "quiet"
        else:
            if not kinds:
                kinds = sorted(FAULTS)
                rng.shuffle(kinds)
            length, kind = phase_s * rng.uniform(0.8, 1.2), kinds.pop(0)
        end = min(t + length, total_s)
        phases.append(Phase(kind, t, end, list(FAULTS.get(kind, []))))
        t, quiet = end, not quiet
    if phases and phases[-1].burst:  # end quiet: the last fault phase gives up its tail
        last = phases[-1]
        cut = last.start_s + 0.6 * (last.end_s - last.start_s)
        phases.append(Phase("quiet", cut, last.end_s, []))
        last.end_s = cut
    return phases


# ---------------------------------------------------------------- sampling
@dataclass
class Sample:
    t: float  # seconds from the hold's start
    unix: float
    phase: str
    rss_mib: float | None
    fds: int | None
    tasks: float | None  # agentsession_engine_tasks
    resident: float | None  # agentsession_turnover_resident{state="resident"}
    actors: int | None  # the run's actors on the substrate
    running: int | None
    substrate_rss_mib: float | None  # server + workers


def process_figures(pid: int, tree: bool) -> tuple[float | None, int | None]:
    """RSS and open fds of the generator: the run's process, with `tree` its children too
    (a sharded run's Dask scheduler and worker processes)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)] if tree else [root]
        rss = sum(p.memory_info().rss for p in procs) / 2**20
        fds = sum(len(os.listdir(f"/proc/{p.pid}/fd")) for p in procs)
    except (psutil.Error, OSError):
        return None, None
    return rss, fds


def tree_rss_mib(pid: int) -> float | None:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs) / 2**20
    except psutil.Error:
        return None


def gauge_value(text: str, line_start: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(line_start):
            with contextlib.suppress(ValueError):
                return float(line.rsplit(" ", 1)[1])
    return None


async def actor_counts(client: HttpSubstrate) -> tuple[int | None, int | None]:
    try:
        actors = await client.list_actors(ATESPACE)
    except SubstrateError as exc:
        return (0, 0) if exc.code == "NOT_FOUND" else (None, None)
    return len(actors), sum(a.status == "RUNNING" for a in actors)


# ---------------------------------------------------------------- the soak
@dataclass
class Soak:
    args: argparse.Namespace
    root: Path
    phases: list[Phase] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    run_dir: Path | None = None
    exit_code: int | None = None
    hold_unix: float = 0.0
    after: dict[str, Any] = field(default_factory=dict)

    async def go(self) -> None:
        args = self.args
        total_s = args.minutes * 60.0
        phase_s = args.phase_seconds or max(15.0, total_s / 12)
        self.phases = schedule(args.seed, total_s, phase_s)
        substrate = LocalSubstrateProcess(
            workers=args.awake + 8,  # the residents, a swap's wake, replacements' primes
            store=self.root / "store",
            park_timeout=10,
            fault_seed=args.seed,
            start_timeout=args.start_timeout,  # 48 worker processes on a loaded machine
            log_path=self.root / "substrate.log",
        )
        await asyncio.to_thread(substrate.start)
        say(f"substrate on {substrate.url} ({args.awake + 8} workers)")
        client = HttpSubstrate(substrate.url, control_timeout=10)
        try:
            await self._run(substrate, client, total_s)
        finally:
            with contextlib.suppress(RuntimeError):
                await asyncio.to_thread(substrate.set_faults, [])
            self.after["actors"], _ = await actor_counts(client)
            await client.aclose()
            await asyncio.to_thread(substrate.stop)

    async def _run(
        self, substrate: LocalSubstrateProcess, client: HttpSubstrate, total_s: float
    ) -> None:
        args = self.args
        metrics_port = free_port()
        target = ["--substrate", substrate.url]
        if args.protocol == "ate":
            target = ["--substrate", substrate.grpc_url, "--router", substrate.url]
        command = [
            *(sys.executable, "-m", "agentsession_core", "run", "--progress", "plain"),
            *target,
            *("--protocol", args.protocol, "--atespace", ATESPACE),
            *("--out", str(self.root / "out"), "--name", "soak", "--seed", str(args.seed)),
            *("--population", "turnover", "--sessions", str(args.sessions)),
            *("--awake", str(args.awake), "--target-rps", str(args.rate)),
            *("--spawn-rate", "20", "--registration-quiet", "5s", "--script", "smoke"),
            *("--hold", f"{total_s:g}s", "--metrics-port", str(metrics_port)),
            # A hung request is given up after 5 s, not the default 120 s.
            *("--request-timeout-seconds", "5s", "--stop-grace-seconds", "5s"),
            *(("--shards", str(args.shards)) if args.shards > 1 else ()),
        ]
        with (self.root / "run.log").open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                *command, stdout=asyncio.subprocess.PIPE, stderr=log
            )
        say(f"run: pid {proc.pid}; log {self.root / 'run.log'}")
        try:
            await self._until_hold(proc)
            async with httpx.AsyncClient(timeout=5) as http:
                await self._hold(proc, substrate, client, http, metrics_port, total_s)
            stdout, _ = await asyncio.wait_for(proc.communicate(), args.end_timeout)
        except BaseException:
            if proc.returncode is None:
                proc.terminate()  # SIGTERM: the run stops, cleans up, writes its files
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), 120)
            raise
        self.exit_code = proc.returncode
        self.run_dir = Path(stdout.decode().strip().splitlines()[-1])
        say(f"run ended with {self.exit_code}: {self.run_dir}")

    async def _until_hold(self, proc: asyncio.subprocess.Process) -> None:
        """Registration and fill, bounded: status.json (rewritten every second) says hold."""
        deadline = time.monotonic() + self.args.start_timeout
        while True:
            if proc.returncode is not None:
                raise RuntimeError(f"the run ended before its hold (exit {proc.returncode})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no hold within {self.args.start_timeout:g} s")
            for path in (self.root / "out").glob("runs/**/status.json"):
                with contextlib.suppress(OSError, ValueError):
                    if json.loads(path.read_text())["phase"] == "hold":
                        self.hold_unix = time.time()
                        say("hold started")
                        return
            await asyncio.sleep(0.5)

    async def _hold(
        self,
        proc: asyncio.subprocess.Process,
        substrate: LocalSubstrateProcess,
        client: HttpSubstrate,
        http: httpx.AsyncClient,
        metrics_port: int,
        total_s: float,
    ) -> None:
        """Apply the phases on time and sample every sample_seconds, until the hold ends (the
        run exits, or the hold's length plus a minute passes: bounded in time and count)."""
        start = time.monotonic()
        every = self.args.sample_seconds
        next_sample = 0.0
        pending = list(self.phases)
        current: Phase | None = None
        most = int(total_s / every) + 10
        while proc.returncode is None and len(self.samples) < most:
            now = time.monotonic() - start
            if now > total_s + 60:
                break
            if pending and now >= pending[0].start_s:
                current = pending.pop(0)
                await self._enter(substrate, current)
            if current and current.kind == "blip" and not current.cleared_unix:
                if now >= current.start_s + BLIP_S:
                    current.fired = await self._put(substrate, [])
                    current.cleared_unix = time.time()
            if now >= next_sample:
                self.samples.append(
                    await self._sample(proc.pid, substrate, client, http, metrics_port, now)
                )
                s = self.samples[-1]
                say(
                    f"{s.t:7.0f}s {s.phase:8} rss {s.rss_mib or 0:6.1f} MiB  fds {s.fds}  "
                    f"tasks {s.tasks}  resident {s.resident}  actors {s.actors} "
                    f"(running {s.running})"
                )
                next_sample += every
            await asyncio.sleep(0.2)
        if current is not None and current.burst and not current.cleared_unix:
            current.fired = await self._put(substrate, [])
            current.cleared_unix = time.time()

    async def _enter(self, substrate: LocalSubstrateProcess, phase: Phase) -> None:
        # The phase before gives its rules' counts back as this one replaces them.
        before = [p for p in self.phases if p.applied_unix and not p.cleared_unix]
        fired = await self._put(substrate, phase.rules)
        now = time.time()
        for old in before:
            old.fired, old.cleared_unix = old.fired or fired, now
        phase.applied_unix = now
        if not phase.burst:
            phase.cleared_unix = now
        say(f"phase {phase.kind}: {', '.join(phase.rules) or 'no faults'}")

    async def _put(
        self, substrate: LocalSubstrateProcess, rules: list[str]
    ) -> list[dict[str, Any]]:
        """Replace the rules; the counts of the ones replaced (read just before)."""
        try:
            counts = (await asyncio.to_thread(substrate.faults))["rules"]
            await asyncio.to_thread(substrate.set_faults, rules)
        except (RuntimeError, OSError) as exc:
            say(f"faults: {exc}")
            return []
        return list(counts)

    async def _sample(
        self,
        pid: int,
        substrate: LocalSubstrateProcess,
        client: HttpSubstrate,
        http: httpx.AsyncClient,
        metrics_port: int,
        now: float,
    ) -> Sample:
        rss, fds = process_figures(pid, tree=self.args.shards > 1)
        tasks = resident = None
        with contextlib.suppress(httpx.HTTPError):
            text = (await http.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
            tasks = gauge_value(text, "agentsession_engine_tasks ")
            resident = gauge_value(text, 'agentsession_turnover_resident{state="resident"}')
        actors, running = await actor_counts(client)
        server = substrate.process.pid if substrate.process else None
        phase = next((p.kind for p in self.phases if p.start_s <= now < p.end_s), "end")
        return Sample(
            t=now,
            unix=time.time(),
            phase=phase,
            rss_mib=rss,
            fds=fds,
            tasks=tasks,
            resident=resident,
            actors=actors,
            running=running,
            substrate_rss_mib=tree_rss_mib(server) if server else None,
        )


# ---------------------------------------------------------------- judging
def gauge_per_second(run_dir: Path, name: str, labels: dict[str, str]) -> dict[int, float]:
    out: dict[int, float] = {}
    for line in (run_dir / "gauges.jsonl").read_text().splitlines():
        gauge = json.loads(line)
        if gauge["name"] == name and gauge["labels"] == labels:
            out[int(gauge["t"])] = gauge["value"]
    return out


def resident_per_second(run_dir: Path) -> dict[int, float]:
    return gauge_per_second(run_dir, "turnover_resident", {"state": "resident"})


def fill_from_gauges(soak: Soak) -> None:
    """A sharded run's /metrics (the coordinator's) has no engine-tasks or resident gauge:
    those samples take the run's merged gauges.jsonl at the sample's second instead."""
    if soak.run_dir is None or not (soak.run_dir / "gauges.jsonl").exists():
        return
    tasks = gauge_per_second(soak.run_dir, "engine_tasks", {})
    resident = resident_per_second(soak.run_dir)
    for sample in soak.samples:
        second = int(sample.unix) - 1  # the last closed second when it was taken
        if sample.tasks is None:
            sample.tasks = tasks.get(second)
        if sample.resident is None:
            sample.resident = resident.get(second)


def not_grown(early: list[float], late: list[float], slack: float) -> tuple[bool, str]:
    """The late median at most TOLERANCE (+ slack) above the early one: a leak grows, and a
    figure that fell (connections a reset phase closed) is no leak."""
    if not early or not late:
        return False, "too few samples"
    a, b = statistics.median(early), statistics.median(late)
    change = (b - a) / a if a else float("inf")
    return b - a <= TOLERANCE * a + slack, f"{a:.1f} -> {b:.1f} ({change:+.1%})"


def judge(soak: Soak) -> dict[str, Any]:
    args = soak.args
    fill_from_gauges(soak)
    total_s = args.minutes * 60.0
    sixth = total_s / 6
    # Samples after the hold see the cleanup (its connections, the actors going): not the load.
    early = [s for s in soak.samples if sixth <= s.t < 2 * sixth]
    late = [s for s in soak.samples if total_s - sixth <= s.t < total_s]
    verdicts: dict[str, Any] = {}

    def figures(samples: list[Sample], name: str) -> list[float]:
        return [float(v) for s in samples if (v := getattr(s, name)) is not None]

    for name, slack in (("rss_mib", 0.0), ("fds", 2.0), ("tasks", 5.0)):
        ok, text = not_grown(figures(early, name), figures(late, name), slack)
        verdicts[name] = {"ok": ok, "detail": text}
    status: dict[str, Any] = {}
    if soak.run_dir is not None:
        status = json.loads((soak.run_dir / "status.json").read_text())
    leaked = status.get("leaked_actors", ["no status.json"])
    left = soak.after.get("actors")
    verdicts["leaks"] = {
        "ok": left == 0 and leaked == [],
        "detail": f"{left} actors left on the substrate, {len(leaked)} listed as leaked",
    }
    verdicts["resident"] = judge_resident(soak)
    verdicts["books"] = judge_books(soak)
    verdicts["run"] = {
        "ok": soak.exit_code is not None,
        "detail": f"exit {soak.exit_code}, {status.get('status')}: {status.get('abort_reason')}",
    }
    return verdicts


def judge_resident(soak: Soak) -> dict[str, Any]:
    """Per-second resident gauge outside every fault phase and a settle margin after it."""
    if soak.run_dir is None:
        return {"ok": False, "detail": "no run directory"}
    per_second = resident_per_second(soak.run_dir)
    settle = min(15.0, soak.args.minutes * 60.0 / 24)
    bursts = [
        (p.applied_unix, (p.cleared_unix or p.applied_unix) + settle)
        for p in soak.phases
        if p.burst and p.applied_unix
    ]
    quiet = sorted(
        s
        for s in per_second
        if s >= soak.hold_unix + settle and not any(lo - 1 <= s <= hi for lo, hi in bursts)
    )
    awake = soak.args.awake
    if not quiet:
        return {"ok": False, "detail": "no quiet seconds"}
    values = [per_second[s] for s in quiet]
    gap = awake - statistics.fmean(values)
    ok = gap <= RESIDENT_TOLERANCE * awake
    return {
        "ok": ok,
        "detail": f"mean {awake - gap:.2f} of {awake} over {len(quiet)} quiet s "
        f"(gap {gap:.2f}, bound {RESIDENT_TOLERANCE * awake:.2f}); min {min(values):.0f}",
        "per_phase": phase_residents(soak, per_second),
    }


def judge_books(soak: Soak) -> dict[str, Any]:
    """The booked shortfall against the gauge's, over the turnover window's seconds (the
    fill's own gap is in the gauge only, docs/SPEC.md §4.2)."""
    if soak.run_dir is None:
        return {"ok": False, "detail": "no run directory"}
    rows = {}
    for line in (soak.run_dir / "stats.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[row["metric"]] = row["measurements"]
    window = rows.get("turnover_window")
    if window is None:
        return {"ok": False, "detail": "no turnover_window row in stats.jsonl"}
    gauged = 0.0
    for line in (soak.run_dir / "gauges.jsonl").read_text().splitlines():
        gauge = json.loads(line)
        if gauge["name"] == "turnover_resident" and gauge["labels"] == {"state": "shortfall"}:
            if window["start_unix"] <= gauge["t"] < window["end_unix"]:
                gauged += gauge["value"]
    booked = float(window["resident_shortfall_seconds"])
    events = rows.get("turnover_ResidentShortfall", {}).get("event_count", 0)
    failed_wakes = rows.get("rps_TimeToWake", {}).get("failure_count", 0)
    diff = abs(booked - gauged)
    share = diff / gauged if gauged else (0.0 if not diff else float("inf"))
    ok = events == booked and (share <= RESIDENT_TOLERANCE or diff <= failed_wakes)
    return {
        "ok": ok,
        "detail": f"booked {booked:.0f} resident-s (ResidentShortfall events {events}), "
        f"gauge {gauged:.0f}: differ by {diff:.0f} ({share:.1%}; bound 2 % or "
        f"{failed_wakes} failed wakes)",
    }


def phase_residents(soak: Soak, per_second: dict[int, float]) -> list[dict[str, Any]]:
    rows = []
    for p in soak.phases:
        if not p.applied_unix:
            continue
        lo, hi = soak.hold_unix + p.start_s, soak.hold_unix + p.end_s
        values = [v for s, v in per_second.items() if lo <= s < hi]
        rows.append(
            {
                "kind": p.kind,
                "from_s": round(p.start_s),
                "to_s": round(p.end_s),
                "resident_mean": round(statistics.fmean(values), 2) if values else None,
                "resident_min": min(values) if values else None,
                "fired": {r["rule"]: f"{r['fired']}/{r['seen']}" for r in p.fired},
            }
        )
    return rows


# ---------------------------------------------------------------- output
def render(soak: Soak, verdicts: dict[str, Any], command: str) -> str:
    args = soak.args
    lines = [
        f"## Fault soak{variant_title(args)}: one turnover run under changing faults",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(soak.hold_unix))}: `{command}` "
        f"({args.minutes:g} min hold, turnover {args.sessions} sessions, awake {args.awake}, "
        f"{args.rate:g} swaps/s, script smoke, {args.protocol} wire, "
        f"{args.shards} shard{'s' if args.shards > 1 else ''}, seed {args.seed}) on "
        f"{os.cpu_count()} cores shared with other work.",
        "",
        "| criterion | holds | figures |",
        "|---|---|---|",
    ]
    names = {
        "rss_mib": "generator RSS (MiB), 2nd sixth -> last sixth",
        "fds": "generator open fds",
        "tasks": "engine tasks in flight",
        "leaks": "no leaked actors",
        "resident": "resident set outside fault phases",
        "books": "booked shortfall vs the gauge",
        "run": "the run",
    }
    for key, label in names.items():
        v = verdicts[key]
        lines.append(f"| {label} | {'yes' if v['ok'] else '**no**'} | {v['detail']} |")
    lines += ["", "| phase | from s | to s | resident mean | min | faults fired/seen |"]
    lines.append("|---|---:|---:|---:|---:|---|")
    for row in verdicts["resident"].get("per_phase", []):
        fired = ", ".join(f"`{r}` {n}" for r, n in row["fired"].items()) or "-"
        lines.append(
            f"| {row['kind']} | {row['from_s']} | {row['to_s']} | {row['resident_mean']} | "
            f"{row['resident_min']} | {fired} |"
        )
    lines += ["", "| t (s) | phase | RSS MiB | fds | tasks | resident | actors | running |"]
    lines.append("|---:|---|---:|---:|---:|---:|---:|---:|")
    step = max(1, len(soak.samples) // 30)  # about 30 rows: every minute of a 30-min soak
    for s in soak.samples[::step]:
        lines.append(
            f"| {s.t:.0f} | {s.phase} | {s.rss_mib or 0:.1f} | {s.fds} | {s.tasks} | "
            f"{s.resident} | {s.actors} | {s.running} |"
        )
    return "\n".join(lines)


def variant_title(args: argparse.Namespace) -> str:
    parts = (["ate wire"] if args.protocol == "ate" else []) + (
        [f"{args.shards} shards"] if args.shards > 1 else []
    )
    return f" ({', '.join(parts)})" if parts else ""


def section_name(args: argparse.Namespace) -> str:
    """soak (the first: json, one process), soak-ate, soak-shards2, soak-ate-shards2."""
    return "-".join(
        ["soak"]
        + (["ate"] if args.protocol == "ate" else [])
        + ([f"shards{args.shards}"] if args.shards > 1 else [])
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="a turnover run under changing faults")
    p.add_argument("--minutes", type=float, default=30.0, help="the hold (default 30)")
    p.add_argument("--sessions", type=int, default=200)
    p.add_argument("--awake", type=int, default=40)
    p.add_argument("--rate", type=float, default=2.0, help="swaps per second")
    p.add_argument("--protocol", choices=("json", "ate"), default="json")
    p.add_argument("--shards", type=int, default=1, help="generator processes (Dask)")
    p.add_argument("--seed", type=int, default=11, help="the schedule's and the run's")
    p.add_argument("--sample-seconds", type=float, default=10.0)
    p.add_argument(
        "--phase-seconds", type=float, default=0.0, help="a fault phase (default: hold / 12)"
    )
    p.add_argument("--start-timeout", type=float, default=600.0, help="to the hold")
    p.add_argument("--end-timeout", type=float, default=300.0, help="hold end to exit")
    p.add_argument("--dir", type=Path, default=None, help="work dir (default: a temp one)")
    p.add_argument("--json", type=Path, default=None, help="samples (default: in --dir)")
    p.add_argument("--write-results", action="store_true", help="rewrite RESULTS.md's section")
    p.add_argument(
        "--rejudge",
        type=Path,
        default=None,
        metavar="JSON",
        help="judge and render a soak's samples file again (its run directory must exist); "
        "runs nothing",
    )
    return p


def saved(soak: Soak, verdicts: dict[str, Any]) -> dict[str, Any]:
    return {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(soak.args).items()},
        "hold_unix": soak.hold_unix,
        "run_dir": str(soak.run_dir),
        "exit_code": soak.exit_code,
        "after": soak.after,
        "phases": [asdict(p) for p in soak.phases],
        "samples": [asdict(s) for s in soak.samples],
        "verdicts": verdicts,
    }


def reloaded(path: Path) -> Soak:
    """A finished soak from its samples file (the args as that soak ran)."""
    data = json.loads(path.read_text())
    args = parser().parse_args([])
    for key, value in data["args"].items():
        default = getattr(args, key, None)
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            value = type(default)(value)  # the first files saved every arg as a string
        setattr(args, key, value)
    soak = Soak(args, path.parent)
    soak.hold_unix = data["hold_unix"]
    soak.run_dir = Path(data["run_dir"])
    soak.exit_code = data["exit_code"]
    soak.after = data["after"]
    soak.phases = [Phase(**p) for p in data["phases"]]
    soak.samples = [Sample(**s) for s in data["samples"]]
    return soak


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.rejudge is not None:
        soak = reloaded(args.rejudge)
        out = args.rejudge
    else:
        root = args.dir or Path(tempfile.mkdtemp(prefix="agentsession-soak-"))
        root.mkdir(parents=True, exist_ok=True)
        say(f"soak: {args.minutes:g} min; work dir {root}")
        soak = Soak(args, root)
        asyncio.run(soak.go())
        out = args.json or root / "soak.json"
    verdicts = judge(soak)
    minutes = soak.args.minutes
    command = "python bench/soak.py" + (f" --minutes {minutes:g}" if minutes != 30 else "")
    command += f" --protocol {soak.args.protocol}" if soak.args.protocol != "json" else ""
    command += f" --shards {soak.args.shards}" if soak.args.shards > 1 else ""
    section = render(soak, verdicts, command)
    out.write_text(json.dumps(saved(soak, verdicts), indent=1))
    print(section)
    say(f"samples: {out}")
    if args.write_results:
        write_section(section_name(soak.args), section, RESULTS)
        say(f"wrote {RESULTS}")
    return 0 if all(v["ok"] for v in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
