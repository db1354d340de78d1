"""Change-point libraries on nightly-like series of a headline figure (issue 17).

Each candidate runs in a virtualenv of its own, because their pins conflict with each other
(Apache Otava 0.8 pins numpy 2.2.0 and scipy <1.17; MongoDB's signal-processing-algorithms
2.1.6 pins numpy <2): this script measures one library per process and writes its counts as
JSON, and `--report` merges those files into bench/RESULTS.md's `changepoints` section.

  python3 -m venv /tmp/cp-otava && /tmp/cp-otava/bin/pip install apache-otava
  python3 -m venv /tmp/cp-spa && /tmp/cp-spa/bin/pip install signal-processing-algorithms
  python3 -m venv /tmp/cp-ruptures && /tmp/cp-ruptures/bin/pip install ruptures
  /tmp/cp-otava/bin/python bench/changepoints.py --library otava --json /tmp/otava.json
  ...  (one line per library; `agentsession` runs the project's own change_points)
  python bench/changepoints.py --report /tmp/*.json

The series (numpy seeded streams, one spawned per series, so every library sees the very
same series): log latency per night = base + noise (+ log(1 + step) from night k on), k
drawn in [3, n - 3]. The noise is what A/A runs of one build showed on the local substrate
(docs: notes upstream-2026-12 §6): p50 within about ±30-40 % (Student t, 4 degrees of
freedom, scale 0.12 in log), p99 several-fold (normal, 0.35 in log, plus one night in five
carrying a slow-wake spike of 3x-40x). A detection is a change point within ±1 night of k;
every other change point is false. Every library sees log values.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

SEED = 20261217
SERIES = 200  # per metric, length and step
LENGTHS = (10, 20, 30)
STEPS = (0.0, 0.2, 0.5, 1.0)
METRICS = ("p50", "p99")
Detector = Callable[[np.ndarray], list[int]]


# ---------------------------------------------------------------- the series
def series(rng: np.random.Generator, metric: str, n: int, step: float) -> tuple[np.ndarray, int]:
    k = int(rng.integers(3, n - 2))
    if metric == "p50":
        values = np.log(200.0) + 0.12 * rng.standard_t(4, n)
    else:
        values = np.log(800.0) + 0.35 * rng.standard_normal(n)
        spikes = rng.random(n) < 0.2
        values[spikes] += np.log(rng.uniform(3.0, 40.0, int(spikes.sum())))
    values[k:] += np.log1p(step)
    return values, k


def all_series() -> list[tuple[str, int, float, np.ndarray, int]]:
    streams = np.random.SeedSequence(SEED).spawn(len(METRICS) * len(LENGTHS) * len(STEPS))
    out = []
    i = 0
    for metric in METRICS:
        for n in LENGTHS:
            for step in STEPS:
                rng = np.random.default_rng(streams[i])
                i += 1
                for _ in range(SERIES):
                    values, k = series(rng, metric, n, step)
                    out.append((metric, n, step, values, k))
    return out


# ---------------------------------------------------------------- the candidates
def otava(max_pvalue: float) -> Detector:
    from otava.analysis import compute_change_points

    def detect(values: np.ndarray) -> list[int]:
        points, _ = compute_change_points(list(values), window_len=30, max_pvalue=max_pvalue)
        return [int(p.index) for p in points]

    return detect


def otava_permutation(seed: int, max_pvalue: float) -> Detector:
    from otava.analysis import compute_change_points_orig

    def detect(values: np.ndarray) -> list[int]:
        points, _ = compute_change_points_orig(list(values), max_pvalue=max_pvalue, seed=seed)
        return [int(p.index) for p in points]

    return detect


def spa(pvalue: float, seed: int) -> Detector:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    def detect(values: np.ndarray) -> list[int]:
        # Its permutation test draws from numpy's global generator: seed it per series.
        np.random.seed(seed)
        return sorted(int(i) for i in e_divisive(values, pvalue=pvalue, permutations=100))

    return detect


def ruptures_pelt(scale: float) -> Detector:
    import ruptures

    def detect(values: np.ndarray) -> list[int]:
        # A BIC-like penalty from a robust noise estimate (the spread of night-to-night
        # differences), since PELT itself has no notion of significance.
        mad = float(np.median(np.abs(np.diff(values) - np.median(np.diff(values)))))
        sigma = max(mad / 0.6745 / np.sqrt(2.0), 1e-6)
        pen = scale * sigma**2 * np.log(len(values))
        ends = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(values).predict(pen=pen)
        return [int(e) for e in ends[:-1]]  # the last "end" is the series' length

    return detect


def ours() -> Detector:
    from agentsession_core.judge.changepoints import change_points

    def detect(values: np.ndarray) -> list[int]:
        return [c.index for c in change_points(list(values), log=False)]

    return detect


def candidates(library: str) -> dict[str, Detector]:
    if library == "otava":
        return {
            "otava t-test p<=0.001": otava(0.001),
            "otava t-test p<=0.01": otava(0.01),
            "otava permutation p<=0.01": otava_permutation(SEED, 0.01),
            "otava permutation p<=0.05": otava_permutation(SEED, 0.05),
        }
    if library == "spa":
        return {
            "spa e_divisive p<=0.05": spa(0.05, SEED),
            "spa e_divisive p<=0.01": spa(0.01, SEED),
        }
    if library == "ruptures":
        return {
            "ruptures pelt l2 pen=2σ²ln n": ruptures_pelt(2.0),
            "ruptures pelt l2 pen=4σ²ln n": ruptures_pelt(4.0),
        }
    if library == "agentsession":
        return {"agentsession change_points": ours()}
    raise SystemExit(f"unknown library {library!r}")


# ---------------------------------------------------------------- measuring
def measure(name: str, detect: Detector) -> list[dict]:
    cells: dict[tuple[str, int, float], dict] = {}
    for metric, n, step, values, k in all_series():
        cell = cells.setdefault(
            (metric, n, step),
            {
                "candidate": name,
                "metric": metric,
                "n": n,
                "step": step,
                "series": 0,
                "detected": 0,
                "false": 0,
                "with_false": 0,
                "seconds": 0.0,
            },
        )
        started = time.perf_counter()
        found = detect(values)
        cell["seconds"] += time.perf_counter() - started
        near = [i for i in found if abs(i - k) <= 1] if step else []
        wrong = len(found) - len(near)
        cell["series"] += 1
        cell["detected"] += bool(near)
        cell["false"] += wrong
        cell["with_false"] += wrong > 0
    return list(cells.values())


def versions(library: str) -> dict[str, str]:
    from importlib.metadata import version

    names = {
        "otava": "apache-otava",
        "spa": "signal-processing-algorithms",
        "ruptures": "ruptures",
        "agentsession": "agentsession",
    }
    out = {"python": sys.version.split()[0], "numpy": np.__version__}
    out[names[library]] = version(names[library])
    return out


# ---------------------------------------------------------------- the report
def report(files: list[Path]) -> str:
    rows: list[dict] = []
    libs: list[dict] = []
    for f in files:
        doc = json.loads(f.read_text())
        rows += doc["cells"]
        libs.append(doc["versions"])
    names = list(dict.fromkeys(r["candidate"] for r in rows))
    lines = [
        "## Change points on nightly series (bench/changepoints.py)",
        "",
        f"{SERIES} seeded series per cell (seed {SEED}); step at a random night k in [3, n-3]; "
        "log values; noise as the A/A runs showed: p50 Student-t(4)·0.12 in log (about "
        "±30-40 %), p99 normal 0.35 in log plus a 3x-40x spike on one night in five. "
        "`det` = series with a change point within ±1 night of k; `false` = series with a "
        "change point anywhere else (on the step-free rows: any change point). "
        "ms = mean time per series.",
        "",
        "Versions: " + "; ".join(", ".join(f"{k} {v}" for k, v in lib.items()) for lib in libs),
        "",
    ]
    head = "| candidate | metric | step |" + "".join(
        f" n={n} det | n={n} false | n={n} ms |" for n in LENGTHS
    )
    lines += [head, "|---|---|---|" + "---:|---:|---:|" * len(LENGTHS)]
    for name in names:
        for metric in METRICS:
            for step in STEPS:
                cells = {
                    r["n"]: r
                    for r in rows
                    if (r["candidate"], r["metric"], r["step"]) == (name, metric, step)
                }
                line = f"| {name} | {metric} | {'none' if not step else f'+{step:.0%}'} |"
                for n in LENGTHS:
                    c = cells.get(n)
                    if c is None:
                        line += " – | – | – |"
                        continue
                    det = "–" if not step else f"{c['detected']}/{c['series']}"
                    ms = 1000 * c["seconds"] / c["series"]
                    line += f" {det} | {c['with_false']}/{c['series']} | {ms:.2f} |"
                lines.append(line)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", choices=["otava", "spa", "ruptures", "agentsession"])
    parser.add_argument("--json", type=Path, help="where --library writes its counts")
    parser.add_argument("--report", type=Path, nargs="+", help="merge into bench/RESULTS.md")
    parser.add_argument("--notes", type=Path, help="markdown appended to the section")
    args = parser.parse_args()
    if args.report:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results_file import write_section

        body = report(args.report)
        if args.notes:
            body += "\n" + args.notes.read_text()
        write_section("changepoints", body)
        print(body)
        return
    if not args.library or not args.json:
        parser.error("--library and --json, or --report")
    cells = []
    for name, detect in candidates(args.library).items():
        cells += measure(name, detect)
        print(name, "done", file=sys.stderr)
    args.json.write_text(json.dumps({"versions": versions(args.library), "cells": cells}))


if __name__ == "__main__":
    main()
