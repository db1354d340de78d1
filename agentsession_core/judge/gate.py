"""gate.json (docs/SPEC.md §6): the run's verdict, each window's outcome, the ramp, drift and the
comparison with a baseline run; and reading a finished run back (directory or s3://).

The verdict, from the judged windows and how the run ended:

* ``fail`` — a window broke or was aborted, the run was aborted or failed (e.g. the substrate
  died), or a headline metric regressed against the baseline by more than max_regression;
* ``void`` — otherwise, when the run did not finish (cancelled, refused), judged no window,
  or any window was void (a saturated generator makes the whole comparison suspect);
* ``pass`` — otherwise.

The run's headline for the baseline comparison is the caller's whole-hold headline
(``run["headline"]``, from ``judge.headline`` over the first level's hold) when given; without
it, each metric's worst value among the judged windows at the first level (percentiles of
different windows are never averaged).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from agentsession_core.errors import UsageError
from agentsession_core.judge.drift import drift, ramp_result
from agentsession_core.judge.verdict import HEADLINE_ROWS, WindowVerdict
from agentsession_core.output import upload

GATE_SCHEMA = 1
EXIT_CODES = {"pass": 0, "fail": 1, "void": 2}
DEFAULT_MAX_REGRESSION = 0.2
COMPARED_LATENCIES = ("p50", "p90", "p99", "p99_9")
# Below these, a relative change means nothing (1 ms of latency, 0.1 % of failures).
_FLOORS = {"latency": 1.0, "failure_ratio": 0.001}


class GateInputError(UsageError):
    """A run that cannot be gated (missing or unreadable files): exit 2."""


# --------------------------------------------------------------------------- headline
def _worse(metric: str, a: float, b: float) -> float:
    return min(a, b) if metric == "achieved_rps" else max(a, b)


def worst_headline(verdicts: list[WindowVerdict]) -> dict[str, dict[str, float]]:
    if not verdicts:
        return {}
    first_level = verdicts[0].level
    judged = [v for v in verdicts if v.level == first_level and v.outcome in ("pass", "break")]
    out: dict[str, dict[str, float]] = {}
    for v in judged:
        for section, values in v.headline.items():
            mine = out.setdefault(section, {})
            for metric, value in values.items():
                mine[metric] = value if metric not in mine else _worse(metric, mine[metric], value)
    return out


def compare(current_headline: dict, baseline_headline: dict, max_regression: float) -> list[dict]:
    """Each comparable headline metric's change; `change` > 0 means worse (a fraction of the
    baseline), and a regression is a change beyond max_regression."""
    pairs: list[tuple[str, str, str]] = [
        (section, key, "lower") for section in HEADLINE_ROWS for key in COMPARED_LATENCIES
    ]
    pairs += [("requests", "failure_ratio", "lower"), ("requests", "achieved_rps", "higher")]
    out: list[dict] = []
    for section, key, better in pairs:
        cur = (current_headline.get(section) or {}).get(key)
        base = (baseline_headline.get(section) or {}).get(key)
        if cur is None or base is None:
            continue
        cur, base = float(cur), float(base)
        if better == "higher":
            if base <= 0:
                continue
            change = (base - cur) / base
        else:
            floor = _FLOORS["failure_ratio" if key == "failure_ratio" else "latency"]
            change = (cur - base) / max(base, floor)
        out.append(
            {
                "metric": f"{section}.{key}",
                "baseline": base,
                "current": cur,
                "better": better,
                "change": change,
                "regression": change > max_regression,
            }
        )
    return out


# --------------------------------------------------------------------------- verdict
def decide(doc: dict) -> tuple[str, str]:
    """(verdict, reason) from a gate document's windows, run status and baseline."""
    windows = doc.get("windows", [])
    outcomes = [w["outcome"] for w in windows]
    regressions = [m for m in (doc.get("baseline") or {}).get("metrics", []) if m["regression"]]
    status = doc.get("run_status")
    if status == "refused":
        # Refused before any load (unreachable substrate, bad credentials, a template too
        # small): nothing about the substrate's performance was judged.
        return "void", f"the campaign could not start: {doc.get('abort_reason') or 'refused'}"
    if status == "cancelled" and "break" not in outcomes:
        # Stopped by an operator or a scheduler: nothing says the substrate failed.
        return "void", f"the run was cancelled ({doc.get('abort_reason') or 'no reason given'})"
    if status == "void" and "break" not in outcomes:
        # The load generator itself failed (a shard was lost): the substrate was not judged.
        return "void", f"the load generator failed: {doc.get('abort_reason') or 'no reason'}"
    if ("aborted" in outcomes or doc.get("abort_reason")) and status != "cancelled":
        return "fail", f"aborted: {doc.get('abort_reason') or 'an abort rule tripped'}"
    if "break" in outcomes:
        broken = [w for w in windows if w["outcome"] == "break"]
        missed = broken[0].get("missed") or []
        return "fail", (
            f"{len(broken)} window(s) broke; window {broken[0]['index']} missed "
            f"{'; '.join(missed) or 'a threshold'}"
        )
    if status in ("failed", "aborted"):
        return "fail", f"the run {status}"
    if regressions:
        names = ", ".join(f"{m['metric']} {m['change']:+.0%}" for m in regressions)
        return "fail", f"regression against the baseline: {names}"
    if status not in (None, "completed"):
        return "void", f"the run did not finish ({status})"
    if not windows:
        return "void", "no window was judged"
    if "void" in outcomes:
        first = next(w for w in windows if w["outcome"] == "void")
        return "void", f"window {first['index']} is void: {first.get('void_reason')}"
    return "pass", f"{len(windows)} window(s) passed"


def _window_summary(v: WindowVerdict) -> dict[str, Any]:
    return {
        "index": v.index,
        "level": v.level,
        "outcome": v.outcome,
        "start_unix": v.start_unix,
        "end_unix": v.end_unix,
        "missed": [r.threshold for r in v.broken],
        "void_reason": v.void_reason,
        "abort_reason": v.abort_reason,
    }


def _baseline_headline(baseline: dict) -> tuple[dict, str | None]:
    doc = baseline.get("gate", baseline)
    return doc.get("headline") or {}, baseline.get("location") or doc.get("location")


def gate_document(
    verdicts: list[WindowVerdict],
    *,
    abort_reason: str | None,
    run_status: str,
    baseline: dict | None = None,
    max_regression: float = DEFAULT_MAX_REGRESSION,
    run: dict | None = None,
) -> dict:
    """gate.json. `baseline` is a load_run() result or a gate document; `run` describes this
    run (name, tag, location …) and may carry its whole-hold "headline"."""
    run = dict(run or {})
    current = run.pop("headline", None) or worst_headline(verdicts)
    doc: dict[str, Any] = {
        "schema": GATE_SCHEMA,
        "verdict": "void",
        "reason": "",
        "run": run,
        "run_status": run_status,
        "abort_reason": abort_reason,
        "windows": [_window_summary(v) for v in verdicts],
        "ramp": ramp_result(verdicts),
        "drift": drift(verdicts),
        "headline": current,
        "baseline": None,
    }
    if baseline is not None:
        doc = with_baseline(doc, baseline, max_regression)
    doc["verdict"], doc["reason"] = decide(doc)
    return doc


def with_baseline(doc: dict, baseline: dict, max_regression: float) -> dict:
    """A copy of a gate document compared against a baseline run, verdict recomputed."""
    if not (max_regression >= 0 and math.isfinite(max_regression)):
        raise UsageError(f"--max-regression: {max_regression} is not a fraction >= 0")
    out = dict(doc)
    base_headline, location = _baseline_headline(baseline)
    metrics = compare(doc.get("headline") or {}, base_headline, max_regression)
    out["baseline"] = {
        "location": location,
        "max_regression": max_regression,
        "metrics": metrics,
        "regressions": [m["metric"] for m in metrics if m["regression"]],
    }
    out["verdict"], out["reason"] = decide(out)
    return out


def rejudge_regressions(doc: dict, max_regression: float) -> dict:
    """Re-apply a different max_regression to the comparison already stored in `doc`."""
    stored = doc.get("baseline")
    if not stored:
        return doc
    metrics = [dict(m, regression=m["change"] > max_regression) for m in stored["metrics"]]
    out = dict(
        doc,
        baseline=dict(
            stored,
            max_regression=max_regression,
            metrics=metrics,
            regressions=[m["metric"] for m in metrics if m["regression"]],
        ),
    )
    out["verdict"], out["reason"] = decide(out)
    return out


def exit_code(doc: dict) -> int:
    return EXIT_CODES.get(doc.get("verdict", "void"), 2)


# --------------------------------------------------------------------------- reading runs
def _read(location: str, name: str) -> bytes | None:
    """A file of the run, or None when it does not exist."""
    if location.startswith("s3://"):
        url = location.rstrip("/") + "/" + name
        try:
            return upload.read_object(url)
        except FileNotFoundError:
            return None
        except Exception as exc:  # any S3 failure makes the input unusable
            if "NoSuchKey" in repr(exc) or "404" in str(exc):
                return None
            raise GateInputError(f"{url}: cannot read ({type(exc).__name__}: {exc})") from None
    path = Path(location) / name
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GateInputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _json(location: str, name: str, data: bytes) -> dict:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise GateInputError(f"{location}/{name}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise GateInputError(f"{location}/{name}: expected a JSON object")
    return value


def _windows(location: str, data: bytes) -> list[WindowVerdict]:
    out: list[WindowVerdict] = []
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(WindowVerdict.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise GateInputError(
                f"{location}/windows.jsonl line {number}: not a judged "
                f"window ({type(exc).__name__}: {exc})"
            ) from None
    return out


def _normalise(location: str) -> str:
    if location.startswith("file://"):
        location = location[len("file://") :]
    if location.startswith("s3://"):
        return location.rstrip("/")
    path = Path(location)
    if path.name == "gate.json" and path.is_file():
        path = path.parent
    if not path.is_dir():
        raise GateInputError(f"{location}: no such run directory")
    return str(path)


def load_run(location: str) -> dict:
    """{"location", "gate", "windows" (WindowVerdicts), "status"} of a finished run. Without
    gate.json the gate is rebuilt from windows.jsonl and status.json."""
    location = _normalise(location)
    gate_bytes = _read(location, "gate.json")
    windows_bytes = _read(location, "windows.jsonl")
    status_bytes = _read(location, "status.json")
    status = _json(location, "status.json", status_bytes) if status_bytes is not None else None
    windows = _windows(location, windows_bytes) if windows_bytes is not None else []
    if gate_bytes is not None:
        gate = _json(location, "gate.json", gate_bytes)
        if "verdict" not in gate or "windows" not in gate:
            raise GateInputError(f"{location}/gate.json: no verdict/windows (not a gate document)")
    elif windows_bytes is not None:
        gate = gate_document(
            windows,
            abort_reason=(status or {}).get("abort_reason"),
            run_status=(status or {}).get("status", "completed"),
        )
    else:
        raise GateInputError(f"{location}: neither gate.json nor windows.jsonl (not a judged run)")
    gate.setdefault("location", location)
    return {"location": location, "gate": gate, "windows": windows, "status": status}


def summary(doc: dict) -> str:
    """One line for humans."""
    line = f"gate: {doc.get('verdict', 'void').upper()} — {doc.get('reason', '')}"
    ramp = doc.get("ramp") or {}
    if ramp.get("first_broken_level") is not None or ramp.get("last_held_level") is not None:
        line += (
            f" (ramp: held {ramp.get('last_held_level')}, broke {ramp.get('first_broken_level')})"
        )
    return line


__all__ = [
    "EXIT_CODES",
    "GateInputError",
    "compare",
    "decide",
    "exit_code",
    "gate_document",
    "load_run",
    "rejudge_regressions",
    "summary",
    "with_baseline",
    "worst_headline",
]
