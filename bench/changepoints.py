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

Issue 27 (a step two nights old went unnamed in a six-night history): `--issue 27` measures
Otava's own pieces in the project's venv (permutation tests with more permutations, the
t-test, and agentsession's shipped rule with other t-test thresholds), on `--scenario short`
series (k = 4..8 nights of one build, then 1, 2 and 3 nights of the step; a detection is a
change point at k exactly) and on the long series above; `--report-short` writes the
`changepoints_short` section:

  B="python bench/changepoints.py --cpu-time --issue 27"
  $B --scenario short --library otava --only 't-test|permutation 100' --json /tmp/s1.json
  $B --scenario short --library otava --only 'permutation (999|1999)' --steps 0 1 \
      --json /tmp/s2.json    # an hour or more: 999 and 1999 permutations a test
  $B --scenario short --library agentsession --json /tmp/s3.json
  $B --scenario long --library otava --only 't-test detector|permutation 100' --json /tmp/l1.json
  $B --scenario long --library agentsession --json /tmp/l2.json
  python bench/changepoints.py --report-short /tmp/s?.json --long /tmp/l?.json --notes N.md

Issue 29 (a history of 10,000 nights: E-divisive over the whole series is quadratic in its
length, per permutation): `--issue 29 --scenario nights` measures the shipped rule (series
longer than changepoints.WINDOW judged in windows) against E-divisive over the whole series
and against other window lengths and t-test screens, on NIGHTS-night series with a step
every STEP_GAP nights or so (each up or down by the row's step, at least MIN_GAP apart; a
detection is a change point within ±1 night of a step, every other change point is false);
`--report-nights` writes the `changepoints_long` section:

  B="python bench/changepoints.py --cpu-time --issue 29 --scenario nights --library agentsession"
  $B --json /tmp/n1.json                       # the shipped rule and the window variants
  $B --only whole --series 10 --json /tmp/n2.json   # E-divisive over all 1,000 nights: slow
  python bench/changepoints.py --report-nights /tmp/n1.json /tmp/n2.json --notes N.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
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
# Issue 27: k nights of A, then 1, 2 or 3 of the step (SHORT_SERIES per metric and step).
SHORT_BEFORE = (4, 5, 6, 7, 8)
SHORT_AFTER = (1, 2, 3)
SHORT_SERIES = 200
# Issue 29: NIGHTS nights, a step (up or down) at about every STEP_GAP nights, MIN_GAP apart.
NIGHTS = 1000
STEP_GAP = 200
MIN_GAP = 60
NIGHTS_SERIES = 20
Detector = Callable[[np.ndarray], list[int]]
# What "ms" measures: wall time, or with --cpu-time this process's CPU time (steadier on a
# machine that other work shares).
CLOCK: Callable[[], float] = time.perf_counter


# ---------------------------------------------------------------- the series
def noise(rng: np.random.Generator, metric: str, n: int) -> np.ndarray:
    """n nights of one build's log latency."""
    if metric == "p50":
        return np.log(200.0) + 0.12 * rng.standard_t(4, n)
    values = np.log(800.0) + 0.35 * rng.standard_normal(n)
    spikes = rng.random(n) < 0.2
    values[spikes] += np.log(rng.uniform(3.0, 40.0, int(spikes.sum())))
    return values


def series(rng: np.random.Generator, metric: str, n: int, step: float) -> tuple[np.ndarray, int]:
    k = int(rng.integers(3, n - 2))
    values = noise(rng, metric, n)
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


def all_short_series() -> list[tuple[str, float, np.ndarray, int]]:
    """Issue 27's case: k nights of one build (k cycling through SHORT_BEFORE), then
    max(SHORT_AFTER) nights of the step; each series is judged as it stood on every night
    of SHORT_AFTER (its first k + a values), as `agentsession history` would see it."""
    streams = np.random.SeedSequence([SEED, 27]).spawn(len(METRICS) * len(STEPS))
    out = []
    i = 0
    for metric in METRICS:
        for step in STEPS:
            rng = np.random.default_rng(streams[i])
            i += 1
            for j in range(SHORT_SERIES):
                k = SHORT_BEFORE[j % len(SHORT_BEFORE)]
                values = noise(rng, metric, k + max(SHORT_AFTER))
                values[k:] += np.log1p(step)
                out.append((metric, step, values, k))
    return out


def night_steps(rng: np.random.Generator, n: int) -> list[int]:
    """Where the steps of an n-night series fall: n // STEP_GAP of them, uniformly in
    [MIN_GAP // 2, n - 3], at least MIN_GAP apart (redrawn until they are)."""
    count = n // STEP_GAP
    while True:
        at = sorted(int(k) for k in rng.integers(MIN_GAP // 2, n - 2, count))
        if all(b - a >= MIN_GAP for a, b in itertools.pairwise(at)):
            return at


def all_night_series(
    series_count: int = NIGHTS_SERIES,
) -> list[tuple[str, float, np.ndarray, list[int]]]:
    """Issue 29's case: NIGHTS nights of the noise above; with a step, each of its steps
    multiplies the level by (1 + step) or divides it by that, at random."""
    streams = np.random.SeedSequence([SEED, 29]).spawn(len(METRICS) * len(STEPS))
    out = []
    i = 0
    for metric in METRICS:
        for step in STEPS:
            rng = np.random.default_rng(streams[i])
            i += 1
            for _ in range(series_count):
                values = noise(rng, metric, NIGHTS)
                at = night_steps(rng, NIGHTS) if step else []
                for k in at:
                    values[k:] += np.log1p(step) * (1 if rng.random() < 0.5 else -1)
                out.append((metric, step, values, at))
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


def otava_permutations(permutations: int, max_pvalue: float, seed: int) -> Detector:
    """E-divisive with Otava's own permutation tester and more permutations than
    compute_change_points_orig's fixed 100, through its public detector."""
    from otava.change_point_divisive.calculator import PairDistanceCalculator
    from otava.change_point_divisive.detector import ChangePointDetector
    from otava.change_point_divisive.significance_test import PermutationsSignificanceTester

    def detect(values: np.ndarray) -> list[int]:
        tester = PermutationsSignificanceTester(
            max_pvalue=max_pvalue,
            permutations=permutations,
            calculator=PairDistanceCalculator,
            seed=seed,
        )
        detector = ChangePointDetector(
            significance_tester=tester, calculator=PairDistanceCalculator
        )
        return [int(p.index) for p in detector.get_change_points(np.array(values, dtype=float))]

    return detect


def otava_ttest_detector(max_pvalue: float) -> Detector:
    """E-divisive's candidates judged by Otava's t-test (TTestSignificanceTester), over the
    whole series (no sliding window, no merge step)."""
    from otava.analysis import TTestSignificanceTester
    from otava.change_point_divisive.calculator import PairDistanceCalculator
    from otava.change_point_divisive.detector import ChangePointDetector

    def detect(values: np.ndarray) -> list[int]:
        tester = TTestSignificanceTester(max_pvalue)
        detector = ChangePointDetector(
            significance_tester=tester, calculator=PairDistanceCalculator
        )
        return [int(p.index) for p in detector.get_change_points(np.array(values, dtype=float))]

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


def hybrid(ttest_pvalue: float) -> Detector:
    """agentsession's detector (E-divisive; the permutation test where a split's sides allow
    it, Otava's t-test where they do not; two values a side) with another t-test threshold."""
    from agentsession_core.judge import changepoints

    def detect(values: np.ndarray) -> list[int]:
        share = ttest_pvalue / changepoints.MAX_PVALUE
        found = changepoints._detect(
            list(values), changepoints.MAX_PVALUE, changepoints.SEED, ttest_share=share
        )
        return [int(p.index) for p, _ in found]

    return detect


def windowed(window: int, screen: float | None, step: int | None = None) -> Detector:
    """agentsession's rule in windows of `window` nights (each `step` on, half a window by
    default), a split going to the permutation test only when the t-test gives <= screen."""
    from agentsession_core.judge import changepoints

    def detect(values: np.ndarray) -> list[int]:
        found = changepoints._detect_windowed(
            list(values),
            changepoints.MAX_PVALUE,
            changepoints.SEED,
            window=window,
            step=step,
            screen=screen,
        )
        return [int(p.index) for p, _ in found]

    return detect


def whole() -> Detector:
    """agentsession's rule over the whole series at once, however long (the rule before
    issue 29)."""
    from agentsession_core.judge import changepoints

    def detect(values: np.ndarray) -> list[int]:
        found = changepoints._detect(list(values), changepoints.MAX_PVALUE, changepoints.SEED)
        return [int(p.index) for p, _ in found]

    return detect


def candidates_29(library: str) -> dict[str, Detector]:
    """Issue 29's candidates (long series), in the project's venv."""
    if library != "agentsession":
        raise SystemExit(f"issue 29 measured agentsession's rule only, not {library!r}")
    from agentsession_core.judge import changepoints

    return {
        "agentsession change_points (windows of "
        f"{changepoints.WINDOW}, t-test screen p<={changepoints.SCREEN_PVALUE:g})": ours(),
        "whole series (E-divisive over all nights: the rule before)": whole(),
        "windows of 100, no screen": windowed(100, None),
        "windows of 100, screen p<=0.05": windowed(100, 0.05),
        "windows of 100, screen p<=0.001": windowed(100, 0.001),
        "windows of 60, screen p<=0.01": windowed(60, 0.01),
        "windows of 200, screen p<=0.01": windowed(200, 0.01),
    }


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


def candidates_27(library: str) -> dict[str, Detector]:
    """Issue 27's candidates (short series): all Apache Otava 0.8, in the project's venv."""
    if library == "otava":
        return {
            "permutation 100 p<=0.01 (compute_change_points_orig, seed 17)": otava_permutation(
                17, 0.01
            ),
            "permutation 999 p<=0.01": otava_permutations(999, 0.01, 17),
            "permutation 999 p<=0.001": otava_permutations(999, 0.001, 17),
            "permutation 1999 p<=0.01": otava_permutations(1999, 0.01, 17),
            "permutation 1999 p<=0.001": otava_permutations(1999, 0.001, 17),
            "t-test detector p<=0.01": otava_ttest_detector(0.01),
            "t-test detector p<=0.005": otava_ttest_detector(0.005),
            "t-test detector p<=0.001": otava_ttest_detector(0.001),
            "t-test compute_change_points p<=0.01": otava(0.01),
            "t-test compute_change_points p<=0.001": otava(0.001),
        }
    if library == "agentsession":
        # The shipped change_points, then its detector with other t-test thresholds.
        return {
            "agentsession change_points (hybrid, t-test p<=0.002)": ours(),
            **{f"hybrid, t-test p<={p:g}": hybrid(p) for p in (0.001, 0.003, 0.005, 0.01)},
        }
    raise SystemExit(f"issue 27 measured only otava and agentsession, not {library!r}")


# ---------------------------------------------------------------- measuring
def measure(name: str, detect: Detector) -> list[dict]:
    cells: dict[tuple[str, int, float], dict] = {}
    detect(np.log(np.arange(1.0, 9.0)))  # imports, outside the clock
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
        started = CLOCK()
        found = detect(values)
        cell["seconds"] += CLOCK() - started
        near = [i for i in found if abs(i - k) <= 1] if step else []
        wrong = len(found) - len(near)
        cell["series"] += 1
        cell["detected"] += bool(near)
        cell["false"] += wrong
        cell["with_false"] += wrong > 0
    return list(cells.values())


def measure_short(name: str, detect: Detector, steps: list[float] | None = None) -> list[dict]:
    """Per metric, step and nights after the step: `detected` = a change point at k, the
    first stepped night, exactly; `with_false` = a change point anywhere else (on step-free
    series: any change point). `by_k` splits both by the nights before the step."""
    cells: dict[tuple[str, float, int], dict] = {}
    detect(np.log(np.arange(1.0, 9.0)))  # imports, outside the clock
    for metric, step, full, k in all_short_series():
        if steps is not None and step not in steps:
            continue
        for after in SHORT_AFTER:
            values = full[: k + after]
            cell = cells.setdefault(
                (metric, step, after),
                {
                    "candidate": name,
                    "metric": metric,
                    "step": step,
                    "after": after,
                    "series": 0,
                    "detected": 0,
                    "with_false": 0,
                    "seconds": 0.0,
                    "by_k": {},
                },
            )
            started = CLOCK()
            found = detect(values)
            cell["seconds"] += CLOCK() - started
            hit = bool(step) and k in found
            wrong = any(i != k for i in found) if step else bool(found)
            cell["series"] += 1
            cell["detected"] += hit
            cell["with_false"] += wrong
            per_k = cell["by_k"].setdefault(str(k), {"series": 0, "detected": 0, "with_false": 0})
            per_k["series"] += 1
            per_k["detected"] += hit
            per_k["with_false"] += wrong
    return list(cells.values())


def measure_nights(name: str, detect: Detector, series_count: int) -> list[dict]:
    """Per metric and step: `steps` in all, `detected` (a change point within ±1 night),
    `false` change points (not within ±1 night of any step), nights judged, and time."""
    cells: dict[tuple[str, float], dict] = {}
    detect(np.log(np.arange(1.0, 9.0)))  # imports, outside the clock
    for metric, step, values, at in all_night_series(series_count):
        cell = cells.setdefault(
            (metric, step),
            {
                "candidate": name,
                "metric": metric,
                "step": step,
                "series": 0,
                "nights": 0,
                "steps": 0,
                "detected": 0,
                "false": 0,
                "with_false": 0,
                "seconds": 0.0,
                "max_seconds": 0.0,
            },
        )
        started = CLOCK()
        found = detect(values)
        took = CLOCK() - started
        cell["seconds"] += took
        cell["max_seconds"] = max(cell["max_seconds"], took)
        wrong = [i for i in found if not any(abs(i - k) <= 1 for k in at)]
        cell["series"] += 1
        cell["nights"] += len(values)
        cell["steps"] += len(at)
        cell["detected"] += sum(1 for k in at if any(abs(i - k) <= 1 for i in found))
        cell["false"] += len(wrong)
        cell["with_false"] += bool(wrong)
    return list(cells.values())


def nights_table(rows: list[dict]) -> list[str]:
    names = list(dict.fromkeys(r["candidate"] for r in rows))
    lines = [
        "| candidate | metric | step | series | steps found | false change points "
        "| false per 1,000 nights | s per series | most s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        for metric in METRICS:
            for step in STEPS:
                c = next(
                    (
                        r
                        for r in rows
                        if (r["candidate"], r["metric"], r["step"]) == (name, metric, step)
                    ),
                    None,
                )
                if c is None:
                    continue
                found = "–" if not step else f"{c['detected']}/{c['steps']}"
                per = 1000 * c["false"] / c["nights"]
                lines.append(
                    f"| {name} | {metric} | {'none' if not step else f'±{step:.0%}'} | "
                    f"{c['series']} | {found} | {c['false']} | {per:.2f} | "
                    f"{c['seconds'] / c['series']:.2f} | {c['max_seconds']:.2f} |"
                )
    return lines


def report_nights(files: list[Path]) -> str:
    rows, libs = load(files)
    clocks = {json.loads(f.read_text()).get("clock", "wall") for f in files}
    clock = "CPU time" if clocks == {"cpu"} else "time (" + ", ".join(sorted(clocks)) + ")"
    lines = [
        "## Change points on long series (bench/changepoints.py --issue 29)",
        "",
        f"Issue 29's case: {NIGHTS}-night series (seed [{SEED}, 29]) of the noise model above "
        "(p50 Student-t(4)·0.12 in log; p99 normal 0.35 in log plus a 3x-40x spike on one "
        f"night in five), with {NIGHTS // STEP_GAP} steps each (uniformly placed, at least "
        f"{MIN_GAP} nights apart; each multiplies the level by 1 + step or divides it by "
        "that) or none; log values. `steps found` = steps with a change point within ±1 "
        "night; `false` = every other change point. s = "
        f"{clock} per series (mean, and the most any one took).",
        "",
        versions_line(libs),
        "",
        *nights_table(rows),
    ]
    return "\n".join(lines) + "\n"


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
def load(files: list[Path]) -> tuple[list[dict], list[dict]]:
    rows: list[dict] = []
    libs: list[dict] = []
    for f in files:
        doc = json.loads(f.read_text())
        rows += doc["cells"]
        if doc["versions"] not in libs:
            libs.append(doc["versions"])
    return rows, libs


def versions_line(libs: list[dict]) -> str:
    return "Versions: " + "; ".join(", ".join(f"{k} {v}" for k, v in lib.items()) for lib in libs)


def long_table(rows: list[dict]) -> list[str]:
    names = list(dict.fromkeys(r["candidate"] for r in rows))
    head = "| candidate | metric | step |" + "".join(
        f" n={n} det | n={n} false | n={n} ms |" for n in LENGTHS
    )
    lines = [head, "|---|---|---|" + "---:|---:|---:|" * len(LENGTHS)]
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
    return lines


def report(files: list[Path]) -> str:
    rows, libs = load(files)
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
        versions_line(libs),
        "",
        *long_table(rows),
    ]
    return "\n".join(lines) + "\n"


def short_table(rows: list[dict]) -> list[str]:
    names = list(dict.fromkeys(r["candidate"] for r in rows))
    head = "| candidate | metric | step |" + "".join(
        f" +{a} det | +{a} false |" for a in SHORT_AFTER
    )
    lines = [head + " ms |", "|---|---|---|" + "---:|---:|" * len(SHORT_AFTER) + "---:|"]
    for name in names:
        for metric in METRICS:
            for step in STEPS:
                cells = {
                    r["after"]: r
                    for r in rows
                    if (r["candidate"], r["metric"], r["step"]) == (name, metric, step)
                }
                if not cells:
                    continue
                line = f"| {name} | {metric} | {'none' if not step else f'+{step:.0%}'} |"
                for after in SHORT_AFTER:
                    c = cells.get(after)
                    if c is None:
                        line += " – | – |"
                        continue
                    det = "–" if not step else f"{c['detected']}/{c['series']}"
                    line += f" {det} | {c['with_false']}/{c['series']} |"
                seconds = sum(c["seconds"] for c in cells.values())
                series = sum(c["series"] for c in cells.values())
                lines.append(line + f" {1000 * seconds / series:.2f} |")
    return lines


def by_nights_before(rows: list[dict], metric: str = "p50", step: float = 1.0) -> list[str]:
    names = list(dict.fromkeys(r["candidate"] for r in rows))
    head = "| candidate | nights after |" + "".join(f" k={k} |" for k in SHORT_BEFORE)
    lines = [head + " all |", "|---|---:|" + "---:|" * (len(SHORT_BEFORE) + 1)]
    for name in names:
        for after in SHORT_AFTER[1:]:
            c = next(
                (
                    r
                    for r in rows
                    if (r["candidate"], r["metric"], r["step"], r["after"])
                    == (name, metric, step, after)
                ),
                None,
            )
            if c is None:
                continue
            line = f"| {name} | {after} |"
            for k in SHORT_BEFORE:
                per_k = c["by_k"][str(k)]
                line += f" {per_k['detected']}/{per_k['series']} |"
            lines.append(line + f" {c['detected']}/{c['series']} |")
    return lines


def report_short(files: list[Path], long_files: list[Path]) -> str:
    rows, libs = load(files)
    long_rows, long_libs = load(long_files)
    clocks = {json.loads(f.read_text()).get("clock", "wall") for f in [*files, *long_files]}
    clock = "CPU time" if clocks == {"cpu"} else "time (" + ", ".join(sorted(clocks)) + ")"
    lines = [
        "## Change points on short series (bench/changepoints.py --issue 27)",
        "",
        f"Issue 27's case: k nights of one build (k = {', '.join(map(str, SHORT_BEFORE))}, "
        f"{SHORT_SERIES // len(SHORT_BEFORE)} series each), then nights of a step; each series "
        f"judged as it stood after 1, 2 and 3 stepped nights (the same series growing: "
        f"{SHORT_SERIES} per metric and step, seed [{SEED}, 27]); the noise model of the "
        "section above (p50 Student-t(4)·0.12 in log; p99 normal 0.35 in log plus a 3x-40x "
        "spike on one night in five); log values. `+a det` = series with a change point at k, "
        "the first stepped night, exactly, when a stepped nights are in; `+a false` = series "
        "with a change point anywhere else (on the step-free rows: any change point). "
        f"ms = mean {clock} per judged series. `–`: not measured (the permutation candidates "
        "with many permutations ran on the step-free and +100 % series only: they take "
        "minutes per thousand series).",
        "",
        versions_line([*libs, *(v for v in long_libs if v not in libs)]),
        "",
        *short_table(rows),
        "",
        "+100 % in p50, named at k, by the nights before it:",
        "",
        *by_nights_before(rows),
    ]
    if long_rows:
        lines += [
            "",
            "The same candidates on the long series of the section above (10/20/30 nights, "
            f"the step at a random night; `det` within ±1 night; ms = mean {clock} per series):",
            "",
            *long_table(long_rows),
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", choices=["otava", "spa", "ruptures", "agentsession"])
    parser.add_argument("--json", type=Path, help="where --library writes its counts")
    parser.add_argument("--report", type=Path, nargs="+", help="merge into bench/RESULTS.md")
    parser.add_argument("--notes", type=Path, help="markdown appended to the section")
    parser.add_argument(
        "--issue",
        type=int,
        choices=[17, 27, 29],
        default=17,
        help="whose candidates --library measures: issue 17's (the first choice), 27's, 29's",
    )
    parser.add_argument(
        "--scenario",
        choices=["long", "short", "nights"],
        default="long",
        help="long: 10/20/30 nights, the step anywhere; short: 4-8 nights, then 1-2 stepped; "
        f"nights: {NIGHTS} nights with a step every {STEP_GAP} or so",
    )
    parser.add_argument(
        "--series", type=int, default=NIGHTS_SERIES, help="--scenario nights: series per cell"
    )
    parser.add_argument(
        "--report-nights",
        type=Path,
        nargs="+",
        help="--scenario nights files: merge into RESULTS.md's changepoints_long section",
    )
    parser.add_argument("--only", help="measure only the candidates whose name matches (regex)")
    parser.add_argument(
        "--steps",
        type=float,
        nargs="+",
        help="--scenario short: only these steps (the slow candidates: 0 1)",
    )
    parser.add_argument(
        "--report-short",
        type=Path,
        nargs="+",
        help="--scenario short files: merge into RESULTS.md's changepoints_short section",
    )
    parser.add_argument(
        "--long",
        type=Path,
        nargs="*",
        default=[],
        help="with --report-short: --issue 27 --scenario long files for the same section",
    )
    parser.add_argument("--cpu-time", action="store_true", help="ms as CPU time, not wall")
    args = parser.parse_args()
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from results_file import publish

    if args.report_nights:
        publish("changepoints_long", report_nights(args.report_nights), args.notes)
        return
    if args.report_short:
        publish("changepoints_short", report_short(args.report_short, args.long), args.notes)
        return
    if args.report:
        publish("changepoints", report(args.report), args.notes)
        return
    if not args.library or not args.json:
        parser.error("--library and --json, or --report")
    chosen = {17: candidates, 27: candidates_27, 29: candidates_29}[args.issue](args.library)
    if args.only:
        chosen = {k: v for k, v in chosen.items() if re.search(args.only, k)}
    cells = []
    for name, detect in chosen.items():
        if args.scenario == "nights":
            cells += measure_nights(name, detect, args.series)
        elif args.scenario == "short":
            cells += measure_short(name, detect, steps=args.steps)
        else:
            cells += measure(name, detect)
        print(name, "done", file=sys.stderr)
    clock = "cpu" if args.cpu_time else "wall"
    doc = {"versions": versions(args.library), "clock": clock, "cells": cells}
    args.json.write_text(json.dumps(doc))


if __name__ == "__main__":
    main()
