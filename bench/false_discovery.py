"""False discoveries among the figures one comparison judges (judge/false_discovery.py): how
often an A/A comparison says `regressed` somewhere, and how often a real slowdown is still
named, with no control, Benjamini-Hochberg and Benjamini-Yekutieli, in families of the
figures a comparison judges (about six here), of 10 and of 40.

Everything is recomputed from kept runs (no new campaign is run):

  baseline  bench/data/gate-power/demo: 40 A runs and B runs with +20 %, +50 %, +100 % of
            the A runs' wake p50 added (demo-length, 60 s), each compared with the last
            passing A run before it (a single baseline: rule whole-interval, 99 %, 20 %);
  paired    bench/data/paired-power: 12 paired A/A runs and paired runs with the candidate
            slowed by +10 %, +20 %, +50 % (600 s), rule significant, 99 %, 10 %; and the
            same runs cut into 60 s parts, each judged as a 60 s paired run would be.

A family of 10 or 40 is built from real comparisons: the judged figures of consecutive A/A
comparisons, concatenated until there are that many (every null hypothesis in it is true);
for detection, one A/B comparison's figures first, then A/A figures drawn (seeded) from the
other comparisons. A family counts as a false fail when any figure in it is `regressed`, as
a detection when the A/B comparison's TimeToWake figures include a `regressed` one.

  cd bench && ../.venv/bin/python false_discovery.py [--write-results]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from agentsession_core.judge.false_discovery import METHODS, controlled  # noqa: E402

SIZES = (10, 40)
SEED = 20261206


def baseline_comparisons() -> dict[str, list[list[dict[str, Any]]]]:
    """The judged figures of each single-baseline comparison of the kept demo runs, by kind
    (A/A, A/B +N %), as the gate judges them before any control."""
    import gate_power

    from agentsession_core.judge.gate import with_baseline
    from agentsession_core.judge.stored_run import StoredRun

    root = HERE / "data" / "gate-power" / "demo"
    collected = json.loads((root / "collected.json").read_text())
    for run in collected:
        run["location"] = str(root / run["run_dir"])
    series = [gate_power.load(r, 0.99) for r in collected if r["tag"] != "pilot"]
    kinds = gate_power.pairs_of(series, 5)
    out: dict[str, list[list[dict[str, Any]]]] = {}
    for kind, pairs in kinds.items():
        if not kind.endswith("single baseline"):
            continue
        label = kind.split(",")[0]
        for current, bases in pairs:
            if current["gate"]["verdict"] != "pass":  # a void or failed run is no pair
                continue
            doc = with_baseline(
                current["gate"],
                [StoredRun.of(b["location"], b["gate"]) for b in bases],
                0.2,
                confidence=0.99,
                rule="whole-interval",
                false_discovery="none",
            )
            out.setdefault(label, []).append(doc["baseline"]["metrics"])
    return out


def paired_comparisons(slice_s: int | None = None) -> dict[str, list[list[dict[str, Any]]]]:
    """The judged figures of each kept paired run (or of each `slice_s`-long part of it, as
    a run that long would be judged), by kind (aa, b10, b20, b50)."""
    import numpy as np
    import paired_power

    from agentsession_core.judge.paired import paired_comparison

    root = HERE / "data" / "paired-power"
    out: dict[str, list[list[dict[str, Any]]]] = {}
    parts = []
    for entry in json.loads((root / "collected.json").read_text()):
        location = root / entry["run_dir"]
        candidate, reference, saturated, _ = paired_power.arms_of(location)
        seed = int(json.loads((location / "campaign.json").read_text())["params"]["seed"])
        length = slice_s or len(candidate)
        for start in range(0, len(candidate) - length + 1, length):
            index = np.arange(start, start + length)
            parts.append((entry, candidate.subset(index), reference.subset(index), saturated, seed))
    for entry, candidate, reference, saturated, seed in parts:
        section = paired_comparison(
            candidate,
            reference,
            saturated=saturated,
            max_regression=0.1,
            confidence=0.99,
            rule="significant",
            seed=seed,
            min_blocks=8,
            block_seconds=5,
            min_beyond=50,
            false_discovery="none",
        )
        if section["status"] == "compared":
            out.setdefault(entry["kind"], []).append(section["metrics"])
    return out


def judged(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in metrics if m.get("se_log") is not None]


def families_of_nulls(comparisons: list[list[dict[str, Any]]], size: int) -> list[list[dict]]:
    """The A/A comparisons' judged figures, in order, cut into families of `size`."""
    flat = [m for metrics in comparisons for m in judged(metrics)]
    return [flat[k : k + size] for k in range(0, len(flat) - size + 1, size)]


def family_with(
    target: list[dict[str, Any]], nulls: list[list[dict[str, Any]]], size: int, draw: random.Random
) -> list[dict[str, Any]]:
    """One A/B comparison's judged figures, then A/A figures drawn until `size`."""
    family = judged(target)[:size]
    pool = [m for metrics in nulls for m in judged(metrics)]
    draw.shuffle(pool)
    return family + pool[: size - len(family)]


def regressed(family: list[dict[str, Any]], *, rule: str, margin: float, method: str) -> list:
    out, _ = controlled(family, rule=rule, confidence=0.99, max_regression=margin, method=method)
    return [m for m in out if m.get("status") == "regressed"]


def table(
    title: str, by_kind: dict[str, list[list[dict]]], null_kind: str, *, rule: str, margin: float
) -> list[str]:
    lines = [f"{title} (rule {rule}, 99 %, max_regression {margin:.0%}):"]
    nulls = by_kind.get(null_kind, [])
    draw = random.Random(SEED)
    header = f"  {'family':28s}" + "".join(f"{m:>18s}" for m in METHODS)
    lines.append(header)
    natural = [judged(m) for m in nulls]
    sizes = [len(f) for f in natural]
    row = f"  A/A as judged ({min(sizes)}-{max(sizes)} figures)".ljust(30)
    for method in METHODS:
        fails = sum(1 for f in natural if regressed(f, rule=rule, margin=margin, method=method))
        row += f"{f'{fails} of {len(natural)} fail':>18s}"
    lines.append(row)
    for size in SIZES:
        fams = families_of_nulls(nulls, size)
        row = f"  A/A, {size} figures".ljust(30)
        for method in METHODS:
            fails = sum(1 for f in fams if regressed(f, rule=rule, margin=margin, method=method))
            row += f"{f'{fails} of {len(fams)} fail':>18s}"
        lines.append(row)
    for kind in sorted(k for k in by_kind if k != null_kind):
        for size in (None, *SIZES):
            fams = [
                judged(t) if size is None else family_with(t, nulls, size, draw)
                for t in by_kind[kind]
            ]
            label = f"  {kind}, " + ("as judged" if size is None else f"{size} figures")
            row = label.ljust(30)
            for method in METHODS:
                caught = 0
                for f in fams:
                    named = regressed(f, rule=rule, margin=margin, method=method)
                    caught += any(
                        m.get("_target") and m["metric"].startswith("TimeToWake.") for m in named
                    )
                row += f"{f'{caught} of {len(fams)} caught':>18s}"
            lines.append(row)
    return lines


def mark(groups: dict[str, list[list[dict[str, Any]]]]) -> dict[str, list[list[dict]]]:
    """The A/B comparisons' own figures marked, so a family says which it must name."""
    for kind, comparisons in groups.items():
        if kind not in ("A/A", "aa"):
            for metrics in comparisons:
                for m in metrics:
                    m["_target"] = True
    return groups


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args()
    baseline = mark(baseline_comparisons())
    paired = mark(paired_comparisons())
    lines = table(
        "Single baseline, demo-length runs", baseline, "A/A", rule="whole-interval", margin=0.2
    )
    lines.append("")
    lines += table("Paired campaigns, 600 s runs", paired, "aa", rule="significant", margin=0.1)
    lines.append("")
    lines += table(
        "Paired campaigns, the same runs cut into 60 s parts",
        mark(paired_comparisons(60)),
        "aa",
        rule="significant",
        margin=0.1,
    )
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        from results_file import write_section

        write_section("false_discovery", results_body(text))
    return 0


NOTES = """
**What it showed (2026-12-06, the kept runs above).** Every null hypothesis in an A/A family
is true, so any `regressed` in it is a false discovery. Against a single baseline the one
A/A comparison that failed with no control (1 of 30 as judged; the family of 10 and of 40
that hold it, 1 of 17 and 1 of 4) is a discovery of no family once it is controlled: 0
false fails with Benjamini-Hochberg at every size. It costs power where there was little:
the one +100 % demo-length comparison caught without control (1 of 8) is not caught with
it. The paired comparisons of whole 600 s runs are unchanged by the control (0 of 12 A/A,
6 of 6 at +20 % whatever the family; b10 at 40 figures: 1 of 2 instead of 2 of 2). Cut into
60 s parts, the paired A/A fails (4 of 108) are not multiplicity: each is TimeToWake.p50
with the candidate 12 % to 16 % slower and a p-value below 0.0003 (the candidate's order
bias, bench/RESULTS.md "paired"), which no family correction removes; there the control
mostly costs detection (+20 % at 40 figures: 44 of 60 with BH, 39 with BY, 52 with none).
Benjamini-Yekutieli removed one more of those A/A fails in the larger families (3 of 42,
1 of 10) at a larger cost in detection, and nothing more against a single baseline, so the
default is `bh` (`gate.false_discovery`, `gate --false-discovery`); `none` gives each
figure's own rule back. The counts are small: 4 families of 40 A/A figures against a single
baseline, 10 among the 60 s paired parts.
"""


def results_body(text: str) -> str:
    return (
        "## False discoveries: the figures one comparison judges, controlled together "
        "(bench/false_discovery.py)\n\n"
        + (__doc__ or "").split("\n\n", 1)[1].split("  cd bench")[0].strip()
        + "\n\nRerun: `cd bench && ../.venv/bin/python false_discovery.py --write-results` "
        "(recomputes from the kept runs, about a minute).\n\n```\n" + text + "\n```\n" + NOTES
    )


if __name__ == "__main__":
    raise SystemExit(main())
