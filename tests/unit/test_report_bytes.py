"""report.html, history.html and the JUnit XML for fixed stored runs, byte for byte, as this
version draws them: bench/data's kept runs (a plain campaign, a paired one, a history of
nights) and the same plain run with gate.json sections it lacks put in (a capacity search
with its density frontier, confirmed or stepped down; a stored baseline comparison, against
a history, re-judged, not comparable or none; no gate.json at all), and the report beside a
baseline run and beside `--baseline auto`'s nights. The golden hashes were written by the
code that read gate.json as a dict, before its readers took the model (issue 35): a change
to what a reader draws shows here. Regenerate them only for a change meant to reach the
page: `REPORT_BYTES_REGENERATE=1 .venv/bin/python -m pytest tests/unit/test_report_bytes.py`;
`REPORT_BYTES_KEEP=DIR` keeps the pages drawn, to diff them."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentsession_core.cli.report import compare_runs, threshold_rules
from agentsession_core.judge.gate_document import GateDocument
from agentsession_core.judge.history import history_document, load_series
from agentsession_core.judge.junit import junit_xml, suite_of
from agentsession_core.judge.stored_run import load_run
from agentsession_core.report.history_page import render_history
from agentsession_core.report.page import read_run, render

ROOT = Path(__file__).parents[2]
DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "report_pages.sha256.json"
NIGHTS = ROOT / "bench/data/gate-power/nightly/runs"
NIGHT = NIGHTS / "runs/gatepower/run_date=2026-12-01"
PLAIN = NIGHT / "run_ts=1796149713/run_tag=a-02"
EARLIER = [NIGHT / "run_ts=1796147895/run_tag=a-00", NIGHT / "run_ts=1796148501/run_tag=a-01"]
PAIRED = ROOT / "bench/data/paired-power/runs/aa-00"
PAIRED_B50 = ROOT / "bench/data/paired-power/runs/b50-00"
CAPACITY = orjson.loads((DATA / "report_pages" / "capacity.json").read_bytes())
STORED_GATES = orjson.loads((DATA / "gate_bytes.json").read_bytes())

Edit = Callable[[dict[str, Any]], None]


def _capacity(gate: dict[str, Any]) -> None:
    """A search as written before confirmations: no stages, no bound."""
    cap = copy.deepcopy(CAPACITY)
    for key in ("confirmed", "confirmation", "bound_by", "bound_kind"):
        del cap[key]
    cap["probes"] = [{k: v for k, v in p.items() if k != "stage"} for p in cap["probes"]]
    gate["capacity"] = cap


def _confirmed(gate: dict[str, Any]) -> None:
    gate["capacity"] = copy.deepcopy(CAPACITY)


def _stepped_down(gate: dict[str, Any]) -> None:
    """The confirmation broke and the search stepped down to a level it held before; an
    older probe without a stage; a density without a listing."""
    cap = copy.deepcopy(CAPACITY)
    cap.update(level=2.0, rate=4.0, confirmed=False, bound_by=None, bound_kind="abort")
    cap["confirmation"].update(outcome="broke", why="abort: <rule>")
    cap["confirmation"]["step_down"] = {
        "level": 2.0,
        "rate": 4.0,
        "index": 1,
        "outcome": "held",
        "why": None,
        "already_held": True,
    }
    cap["probes"][-1].update(outcome="broke", missed=["TimeToWake: p99 < 2s"])
    cap["probes"].append(dict(cap["probes"][0], index=6, stage="step-down"))
    del cap["probes"][0]["stage"]
    cap["density"] = {"status": "no worker listing", "why": "the substrate has none"}
    gate["capacity"] = cap


def _searched_nothing(gate: dict[str, Any]) -> None:
    gate["capacity"] = {"status": "void", "reason": "the anchor did not hold", "probes": []}


def _baseline(name: str) -> Edit:
    def edit(gate: dict[str, Any]) -> None:
        gate["baseline"] = copy.deepcopy(STORED_GATES[name]["baseline"])

    return edit


def _not_comparable(gate: dict[str, Any]) -> None:
    gate["baseline"] = {
        "status": "not comparable",
        "location": "s3://bucket/runs/base",
        "differences": ["script: smoke ≠ heavy", "population.kind: turnover ≠ closed"],
        "metrics": [],
    }


def _no_gate(gate: dict[str, Any]) -> None:
    gate.clear()


PLAIN_CASES: dict[str, Edit | None] = {
    "plain": None,
    "capacity": _capacity,
    "capacity_confirmed": _confirmed,
    "capacity_stepped_down": _stepped_down,
    "capacity_void": _searched_nothing,
    "baseline_one": _baseline("one"),
    "baseline_history": _baseline("history"),
    "baseline_rejudged": _baseline("rejudged"),
    "baseline_none": _baseline("none"),
    "baseline_not_comparable": _not_comparable,
    "no_gate": _no_gate,
}


def _copy(run: Path, into: Path, edit: Edit | None) -> Path:
    shutil.copytree(run, into)
    if edit is not None:
        gate = json.loads((into / "gate.json").read_text())
        edit(gate)
        if gate:
            (into / "gate.json").write_text(json.dumps(gate))
        else:
            (into / "gate.json").unlink()
    return into


def _page(run: Path, **options: Any) -> bytes:
    data = read_run(run)
    html = render(data, rules=threshold_rules(data), **options)
    return html.replace(str(run), "RUN").encode()


def pages(tmp: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name, edit in PLAIN_CASES.items():
        out[f"report/{name}"] = _page(_copy(PLAIN, tmp / name, edit))
    for name, run in (("paired", PAIRED), ("paired_b50", PAIRED_B50)):
        out[f"report/{name}"] = _page(_copy(run, tmp / name, None))
    this = _copy(PLAIN, tmp / "beside", None)
    base = _copy(EARLIER[-1], tmp / "base", None)
    beside = compare_runs(read_run(this), read_run(base), 0.2, night_spread=0.1)
    out["report/beside_baseline"] = _page(this, comparison=beside).replace(
        str(base).encode(), b"BASE"
    )
    nights = [load_run(str(run)) for run in EARLIER]
    auto = compare_runs(
        read_run(this), read_run(base), None, against=nights, rule="margin-test", night_spread=0.1
    )
    out["report/beside_auto"] = _page(this, comparison=auto).replace(str(base).encode(), b"BASE")
    doc = history_document(load_series(str(NIGHTS)), prefix="NIGHTS")
    doc["generated_unix"] = 0.0
    out["history"] = render_history(doc).replace(str(ROOT), "ROOT").encode()
    for name, gate in _gates(tmp).items():
        out[f"junit/{name}"] = junit_xml([suite_of(GateDocument.read(gate, name))])
    return out


def _gates(tmp: Path) -> dict[str, dict[str, Any]]:
    """Every gate document the pages were drawn from, and gate_bytes.json's."""
    gates = {name: doc for name, doc in STORED_GATES.items()}
    for name in [*PLAIN_CASES, "paired", "paired_b50"]:
        path = tmp / name / "gate.json"
        if path.exists():
            gates[name] = json.loads(path.read_text())
    return gates


def test_the_pages_and_junit_are_what_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "host")
    drawn = pages(tmp_path)
    hashes = {name: hashlib.sha256(body).hexdigest() for name, body in drawn.items()}
    if keep := os.environ.get("REPORT_BYTES_KEEP"):
        for name, body in drawn.items():
            path = Path(keep) / f"{name}.{'xml' if name.startswith('junit') else 'html'}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
    if os.environ.get("REPORT_BYTES_REGENERATE"):
        GOLDEN.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    assert hashes == json.loads(GOLDEN.read_text())


def test_the_cases_draw_what_they_are_about(tmp_path: Path) -> None:
    """The golden hashes would pass over a case that draws nothing of its section."""
    drawn = {k: v.decode() for k, v in pages(tmp_path).items()}
    assert "knee" in drawn["report/capacity"] and "actors per" in drawn["report/capacity"]
    assert "confirmation" in drawn["report/capacity_confirmed"]
    assert "step down" in drawn["report/capacity_stepped_down"]
    assert "not comparable" in drawn["report/baseline_not_comparable"]
    assert "capacity.rate" in drawn["report/baseline_history"]
    assert 'id="paired"' in drawn["report/paired"]
    assert "With this baseline the gate says" in drawn["report/beside_baseline"]
    assert drawn["report/no_gate"] != drawn["report/plain"]
    assert "capacity search" in drawn["junit/capacity"]
    assert "baseline: " in drawn["junit/baseline_history"]
    assert "paired: " in drawn["junit/paired"]
