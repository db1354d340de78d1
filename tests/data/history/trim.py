"""Keep only what `agentsession history` reads of a series of real campaign runs, for
tests/data/history/ (how the runs were made: tests/integration/test_history.py's docstring).

    python tests/data/history/trim.py SERIES_OUT tests/data/history --schema2-from n06

Per run: gate.json (without drift and the local paths, which name the machine it ran on),
campaign.json (params, params_model, versions) and status.json, re-sealed (manifest.json
over the kept files). gate.json schema 2 was not
written by campaigns yet when this series was made, so for the nights from --schema2-from on
the `figures` key is written here from the run's own files: value = the headline value,
low/high = the smallest and largest value of that figure among the run's judged windows
(windows.jsonl: the per-window spread, not a confidence interval; null with fewer than two
windows), n = the headline's sample count, beyond = the samples above the quantile,
estimable = at least 5 of them. `confidence` is null to say so.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

from agentsession_core.output.run_dir import RunDir

SECTIONS = ("TimeToWake", "WakeFirstTouch", "Step_*")
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99_9": 0.999}
REQUESTS = {"failure_ratio": "ratio", "achieved_rps": "1/s"}


def window_values(run: Path, section: str, key: str) -> list[float]:
    out = []
    for line in (run / "windows.jsonl").read_text().splitlines():
        window = json.loads(line)
        value = (window.get("headline") or {}).get(section, {}).get(key)
        if window.get("outcome") in ("pass", "break") and isinstance(value, int | float):
            out.append(float(value))
    return out


def figures(run: Path, headline: dict) -> dict:
    out: dict[str, dict] = {}
    for section in SECTIONS:
        values = headline.get(section) or {}
        n = int(values.get("count") or 0)
        for key, q in QUANTILES.items():
            if key not in values:
                continue
            spread = window_values(run, section, key)
            beyond = math.floor(n * (1 - q))
            out[f"{section}.{key}"] = {
                "value": values[key],
                "low": min(spread) if len(spread) > 1 else None,
                "high": max(spread) if len(spread) > 1 else None,
                "n": n,
                "beyond": beyond,
                "estimable": beyond >= 5,
                "unit": "ms",
            }
    requests = headline.get("requests") or {}
    for key, unit in REQUESTS.items():
        if key in requests:
            spread = window_values(run, "requests", key)
            out[f"requests.{key}"] = {
                "value": requests[key],
                "low": min(spread) if len(spread) > 1 else None,
                "high": max(spread) if len(spread) > 1 else None,
                "n": int(requests.get("count") or 0),
                "unit": unit,
            }
    return out


def main(series: Path, dest: Path, schema2_from: str) -> None:
    for gate_path in sorted(series.glob("runs/*/run_date=*/run_ts=*/run_tag=*/gate.json")):
        run = gate_path.parent
        target = dest / run.relative_to(series)
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        gate = json.loads(gate_path.read_text())
        gate.pop("drift", None)
        gate.pop("location", None)
        for key in ("local_dir", "location"):
            (gate.get("run") or {}).pop(key, None)
        if run.name.removeprefix("run_tag=") >= schema2_from:
            gate["schema"] = 2
            gate["confidence"] = None
            gate["figures"] = figures(run, gate.get("headline") or {})
        (target / "gate.json").write_text(json.dumps(gate, indent=1) + "\n")
        campaign = json.loads((run / "campaign.json").read_text())
        kept = {k: campaign[k] for k in ("params", "params_model", "versions") if k in campaign}
        (target / "campaign.json").write_text(json.dumps(kept, indent=1) + "\n")
        shutil.copy(run / "status.json", target / "status.json")
        # Re-sealed over what is kept: a gate, and history, believe only a sealed run.
        RunDir(target).write_manifest()


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) != 4 or args[2] != "--schema2-from":
        raise SystemExit(__doc__)
    main(Path(args[0]), Path(args[1]), args[3])
