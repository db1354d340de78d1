"""Cold resumes per second one generator core sustains with `wake_probe: none` against the
local substrate's control API (issue 37), on both wires side by side.

The real Engine runs a cold-resume population (docs/SPEC.md §4.7: a fleet of suspended actors
resumed at a rate, each suspended again) with `resume_mode: explicit` and `wake_probe: none`
(a wake is ResumeActor alone, no router request), against a local substrate started
`--no-data-plane` (pod-less workers: its lifecycle calls are records only), over the ate wire
(ateapi.Control, gRPC) and the JSON wire, at rising rates. Sustained = achieved resumes within
1 % of those intended, start lag p99 <= 5 ms, no failure and no second whose fleet ran out.

The generator runs pinned to core 0, the substrate to core 1 (when taskset is there). The
substrate's own CPU is part of the figure: at some rate either core fills first, and the
table shows both.

  .venv/bin/python bench/cold_resume.py                   # about 3 minutes
  .venv/bin/python bench/cold_resume.py --quick           # about a minute
  .venv/bin/python bench/cold_resume.py --write-results   # also rewrites its RESULTS.md section
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from results_file import RESULTS, write_section

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PY = sys.executable
GEN_CORE, TARGET_CORE = "0", "1"
WIRES = ("ate", "json")
RATE_TOLERANCE = 0.01
LAG_P99_MS = 5.0


def say(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def pinned(core: str, cmd: list[str]) -> list[str]:
    return ["taskset", "-c", core, *cmd] if shutil.which("taskset") else cmd


async def cold_resume(wire: str, rate: float, seconds: float, warmup: float) -> dict[str, Any]:
    """One cold-resume at `rate` resumes/s over `wire`; its figures over whole seconds."""
    import psutil
    from generators import PING_SCRIPT, _flush_every_second, _until_second, _whole_seconds

    from agentsession_core.engine.engine import Engine
    from agentsession_core.engine.params import RunParams
    from agentsession_core.engine.target import client_for
    from agentsession_core.measure.recorder import Recorder
    from agentsession_core.measure.stats import (
        CONTROL_KIND,
        FLEET_EXHAUSTED_ROW,
        ROUTER_KIND,
        TIME_TO_WAKE_ROW,
    )
    from agentsession_core.script import load_script
    from local_substrate.launcher import LocalSubstrate

    sessions = int(2 * rate) + 64  # a second's resumes twice over: the fleet never runs out
    local = LocalSubstrate(
        workers=64, worker_capacity=64, data_plane=False, extra_args=[], start_timeout=120
    )
    local.proc.args = pinned(TARGET_CORE, local.proc.args)
    async with local:
        control = local.grpc_url if wire == "ate" else local.url
        target: dict[str, Any] = {
            "template": "benchmark-workloads/glutton",
            "request_timeout_seconds": 30.0,
            "substrate": control,
            "protocol": wire,
        }
        if wire == "ate":
            target["router"] = local.url
        params = RunParams(
            script=PING_SCRIPT,
            think_scale=0.0,
            seed=7,
            target=target,
            population={
                "kind": "cold-resume",
                "sessions": sessions,
                "target_rps": rate,
                "resume_mode": "explicit",
                "wake_probe": "none",
                "lifecycle_mode": "suspend",
                "registration_quiet_seconds": 0.0,
                "spawn_rate": 1_000.0,  # registration, before the measured seconds
                "swap_pacing": "even",
            },
            cleanup={"stop_grace_seconds": 2.0},
        )
        substrate = client_for(params.target, control, local.url if wire == "ate" else None)
        recorder = Recorder()
        engine = Engine(params, substrate, load_script(PING_SCRIPT), recorder, atespace="bench")
        await engine.preflight()
        flusher = asyncio.create_task(_flush_every_second(recorder))
        t_reg = time.monotonic()
        await engine.register()
        await engine.fill()
        registered = time.monotonic() - t_reg
        await asyncio.sleep(warmup)
        first, last = _whole_seconds(engine, seconds)
        await _until_second(engine, first)
        server = psutil.Process(local.proc.process.pid) if local.proc.process else None
        s0 = server.cpu_times() if server else None
        c0 = time.process_time()
        await _until_second(engine, last)
        cpu = time.process_time() - c0
        s1 = server.cpu_times() if server else None
        recorder.flush()
        window = recorder.window_seconds(first, last)
        flusher.cancel()
        await asyncio.gather(flusher, return_exceptions=True)
        await engine.stop()
        await substrate.aclose()
    duration = window.duration_s
    wake = window.row(*TIME_TO_WAKE_ROW)
    resume = window.row(CONTROL_KIND, "ResumeActor")
    park = window.row(CONTROL_KIND, "SuspendActor")
    routed = sum(s.count for key, s in window.rows.items() if key[0] == ROUTER_KIND)
    server_cpu = (
        (s1.user + s1.system - s0.user - s0.system) / duration if s0 and s1 else float("nan")
    )
    return {
        "wire": wire,
        "rate": rate,
        "sessions": sessions,
        "seconds": duration,
        "resumes": wake.count,
        "suspends": park.count,
        "failures": wake.failures + park.failures + resume.failures,
        "exhausted": window.row(*FLEET_EXHAUSTED_ROW).events,
        "router_requests": routed,
        "ratio": (wake.count - wake.failures) / (rate * duration),
        "lag_p50_ms": wake.start_lag.quantile(0.5),
        "lag_p99_ms": wake.start_lag.quantile(0.99),
        "wake_p50_ms": wake.response.quantile(0.5),
        "wake_p99_ms": wake.response.quantile(0.99),
        "cpu_fraction": cpu / duration,
        "cpu_us_per_resume": cpu / duration / rate * 1e6,
        "server_cpu_fraction": server_cpu,
        "registration_s": registered,
    }


def sustained(r: dict[str, Any]) -> bool:
    return (
        abs(r["ratio"] - 1.0) <= RATE_TOLERANCE
        and r["lag_p99_ms"] <= LAG_P99_MS
        and r["failures"] == 0
        and r["exhausted"] == 0
    )


def generate(argv: list[str]) -> int:
    import uvloop

    parser = argparse.ArgumentParser()
    parser.add_argument("--wire", choices=WIRES, required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    args = parser.parse_args(argv)
    result = uvloop.run(cold_resume(args.wire, args.rate, args.seconds, args.warmup))
    print(json.dumps(result))
    return 0


def one(wire: str, rate: float, hold: float) -> dict[str, Any]:
    cmd = [PY, str(Path(__file__).resolve()), "gen", "--wire", wire, "--rate", str(rate)]
    done = subprocess.run(
        pinned(GEN_CORE, [*cmd, "--seconds", str(hold)]),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{wire} at {rate:g} failed ({done.returncode}): {done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure(quick: bool, rates: list[float]) -> dict[str, Any]:
    hold = 4.0 if quick else 8.0
    started = time.monotonic()
    out: dict[str, Any] = {"mode": "quick" if quick else "full", "load_before": os.getloadavg()}
    out["runs"] = []
    for rate in rates:
        for wire in WIRES:  # side by side: each rate on both wires, one after the other
            say(f"cold-resume: {wire} at {rate:g} resumes/s, {hold:g} s")
            try:
                result = one(wire, rate, hold)
            except RuntimeError as exc:  # a wire that cannot even register its fleet: said
                last = str(exc).strip().splitlines()[-1][:160]
                result = {"wire": wire, "rate": rate, "error": last}
            result["sustained"] = "error" not in result and sustained(result)
            out["runs"].append(result)
            say(json.dumps(result))
    for wire in WIRES:
        passing = [r["rate"] for r in out["runs"] if r["wire"] == wire and r["sustained"]]
        out[f"highest_{wire}"] = max(passing) if passing else 0.0
    out["load_after"] = os.getloadavg()
    out["seconds_taken"] = round(time.monotonic() - started, 1)
    out["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    from run import machine

    out["machine"] = machine()
    return out


def render(r: dict[str, Any], command: str) -> str:
    lines = [
        "## Cold resumes per second with `wake_probe: none` (bench/cold_resume.py)",
        "",
        f"Run {r['date']} ({r['mode']} mode, `{command}`, {r['seconds_taken']:g} s) on "
        f"{r['machine']}; load average (1 min) {r['load_before'][0]:.1f} before, "
        f"{r['load_after'][0]:.1f} after (the machine is shared: absolute rates move, the "
        "wires' ratio comes from this one run). The generator ran pinned to core 0, the local "
        "substrate (`--no-data-plane`: pod-less workers, lifecycle calls as records) to core 1.",
        "",
        "The real Engine, a cold-resume population (`resume_mode: explicit`, `wake_probe: none`, "
        "`lifecycle_mode: suspend`, `swap_pacing: even`, a fleet of 2 × rate + 64), each resume "
        "a ResumeActor then a SuspendActor, counted over whole recorder seconds after a warm-up; "
        "sustained = achieved resumes within 1 % of intended, start lag p99 ≤ 5 ms, no failure, "
        "no second whose fleet ran out:",
        "",
        "| resumes/s | wire | achieved / intended | resumes (suspends) | start lag p50 / p99 ms "
        "| wake p50 / p99 ms | generator CPU | CPU per resume | substrate CPU | failures "
        "| fleet exhausted | router requests | sustained |",
        "|---:|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for x in r["runs"]:
        if "error" in x:
            lines.append(f"| {x['rate']:,.0f} | {x['wire']} | failed: {x['error']} |" + " |" * 10)
            continue
        lines.append(
            f"| {x['rate']:,.0f} | {x['wire']} | {x['ratio']:.4f} | {x['resumes']:,} "
            f"({x['suspends']:,}) | {x['lag_p50_ms']:.2f} / **{x['lag_p99_ms']:.2f}** | "
            f"{x['wake_p50_ms']:.2f} / {x['wake_p99_ms']:.2f} | {x['cpu_fraction']:.0%} | "
            f"{x['cpu_us_per_resume']:.0f} µs | {x['server_cpu_fraction']:.0%} | "
            f"{x['failures']} | {x['exhausted']} | {x['router_requests']} | "
            f"{'yes' if x['sustained'] else 'no'} |"
        )
    ate, js = r["highest_ate"], r["highest_json"]
    ratio = f"{ate / js:.1f}×" if js else "n/a"
    lines += [
        "",
        f"**Highest sustained: {ate:,.0f} cold resumes/s on the ate wire, {js:,.0f} on the "
        f"JSON wire (ate / JSON {ratio})**, one generator core each, with no router request.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["gen"]:
        return generate(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rates", default="100,250,500,1000")
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args(argv)
    rates = [float(x) for x in args.rates.split(",")]
    result = measure(args.quick, rates)
    command = "python bench/cold_resume.py" + (" --quick" if args.quick else "")
    if args.rates != "100,250,500,1000":
        command += f" --rates {args.rates}"
    text = render(result, command)
    print(text)
    if args.write_results:
        write_section("cold_resume", text, RESULTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
