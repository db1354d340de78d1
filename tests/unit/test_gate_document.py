"""gate.json as a typed, published document (judge/gate_document.py): every stored gate.json
under bench/data validates against the published JSON Schema (docs/reference/gate.schema.json,
read by the `jsonschema` library as a release pipeline would) and against the models; a
gate.json the current code writes, with every section, validates too and declares no field
the models lack; a document of another shape is refused naming the field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jsonschema.exceptions import best_match
from pydantic import BaseModel

from agentsession_core.judge.gate import gate_document, with_baseline
from agentsession_core.judge.gate_document import (
    GATE_SCHEMA,
    GateDocument,
    GateInputError,
    gate_json_schema,
)
from agentsession_core.judge.hold_seconds import HoldSeconds
from agentsession_core.judge.stored_run import StoredRun, load_run
from agentsession_core.judge.uncertainty import figures
from agentsession_core.substrate.fake import FakeSubstrate
from agentsession_core.substrate.protocol import DEFAULT_TEMPLATE
from tests.unit import gate_runs
from tests.unit.test_density_frontier import MI, density_gate
from tests.unit.test_paired import arm_records, compared

REPO = Path(__file__).resolve().parents[2]
PUBLISHED = REPO / "docs/reference/gate.schema.json"
BENCH_GATES = sorted((REPO / "bench/data").rglob("gate*.json"))


def published() -> jsonschema.Draft202012Validator:
    schema = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def refusals(validator: jsonschema.Draft202012Validator, doc: dict[str, Any]) -> list[str]:
    """Each place the published schema refuses `doc` at, as a JSON path (inside an `anyOf`
    such as "a map of figures, or null", the branch that came closest)."""
    return [best_match([error]).json_path for error in validator.iter_errors(doc)]


def undeclared(model: BaseModel, path: str = "$") -> list[str]:
    """Every field of a validated document that no model declares (kept by extra="allow")."""
    out = [f"{path}.{key}" for key in model.model_extra or {}]
    for name, value in model:
        out += _undeclared_in(value, f"{path}.{name}")
    return out


def _undeclared_in(value: Any, path: str) -> list[str]:
    if isinstance(value, BaseModel):
        return undeclared(value, path)
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _undeclared_in(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _undeclared_in(v, f"{path}.{k}")]
    return []


# --------------------------------------------------------------------------- stored documents
def test_every_gate_json_under_bench_data_validates_against_the_schema_and_the_model() -> None:
    assert len(BENCH_GATES) >= 90, "bench/data's stored runs are the old documents to keep"
    validator = published()
    for path in BENCH_GATES:
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert refusals(validator, doc) == [], path
        GateDocument.model_validate(doc)
        assert isinstance(GateDocument.read(doc, str(path)), GateDocument)


def test_a_mutated_stored_document_is_refused_by_both_naming_the_field() -> None:
    validator = published()
    stored = (json.loads(path.read_text(encoding="utf-8")) for path in BENCH_GATES)
    doc = next(doc for doc in stored if doc.get("paired"))  # a paired campaign's
    bad = copy.deepcopy(doc)
    bad["windows"][0]["outcome"] = "maybe"
    assert refusals(validator, bad) == ["$.windows[0].outcome"]
    with pytest.raises(GateInputError) as info:
        GateDocument.read(bad, "old/gate.json")
    assert str(info.value) == (
        "old/gate.json: windows[0].outcome is 'maybe', not pass, break, void or aborted "
        "(not a gate document)"
    )
    bad = copy.deepcopy(doc)
    bad["figures"]["TimeToWake.p50"]["n"] = 12.5
    assert refusals(validator, bad) == ["$.figures['TimeToWake.p50'].n"]
    with pytest.raises(GateInputError) as info:
        GateDocument.read(bad, "old/gate.json")
    assert str(info.value) == (
        "old/gate.json: figures.TimeToWake.p50.n is 12.5, not a whole number (not a gate document)"
    )
    bad = copy.deepcopy(doc)
    bad["paired"]["metrics"][0]["status"] = "worse"
    assert refusals(validator, bad) == ["$.paired.metrics[0].status"]
    with pytest.raises(GateInputError, match=r"paired\.metrics\[0\]\.status is 'worse'"):
        GateDocument.read(bad, "old/gate.json")


def test_a_field_the_model_does_not_know_is_kept_and_a_future_schema_refused() -> None:
    doc = json.loads(BENCH_GATES[0].read_text(encoding="utf-8"))
    newer = {**doc, "energy": {"joules": 12.0}}
    assert refusals(published(), newer) == []
    assert GateDocument.read(newer, "gate.json").model_extra["energy"] == {"joules": 12.0}
    with pytest.raises(GateInputError, match=r"gate\.json: schema is 3, not 1 or 2"):
        GateDocument.read({**doc, "schema": 3}, "gate.json")


# --------------------------------------------------------------------------- written now
async def fresh_gate() -> dict[str, Any]:
    """A gate.json with every section, built by the code that builds it in a campaign: the
    windows and figures (tests/unit/gate_runs.py), a capacity search with its density
    frontier, a paired comparison, then the comparison with a baseline that searched too;
    as a reader finds it on disk."""
    fake = FakeSubstrate({DEFAULT_TEMPLATE: 64 * MI}, workers=2, worker_capacity=4,
                         worker_memory=200 * MI)  # fmt: skip
    capacity = (await density_gate(fake))["capacity"]
    records = gate_runs.seconds(p50_ms=40, seconds=120)
    windows = [gate_runs.window(i) for i in range(4)]
    for i, window in enumerate(windows):  # the headline drift is drawn from
        window.headline = {"TimeToWake": {"p50": 40.0 + i, "p90": 80.0, "p99": 120.0 - i}}
    mine = gate_document(
        windows,
        abort_reason=None,
        run_status="completed",
        run={"name": "nightly", "tag": "night", "location": "/runs/x", "windows_planned": 4},
        figures=figures(HoldSeconds.of_records(records), seed=7),
        conditions=gate_runs.gate_of(records)["conditions"],
        capacity=capacity,
        paired=compared(arm_records(30, seed=1), arm_records(20, seed=2)),
    )
    base = dict(gate_runs.gate_of(gate_runs.seconds(p50_ms=30, seconds=120)), capacity=capacity)
    doc = with_baseline(mine, StoredRun.of("/runs/base", base), 0.2)
    return json.loads(json.dumps(doc))


async def test_a_gate_json_written_now_validates_and_declares_every_field() -> None:
    doc = await fresh_gate()
    assert doc["schema"] == GATE_SCHEMA
    declared = {field.alias or name for name, field in GateDocument.model_fields.items()}
    assert set(doc) == declared - {"location"}  # `location` is a reader's
    sections = ("run", "windows", "ramp", "drift", "headline", "figures", "conditions")
    assert all(doc[key] for key in (*sections, "baseline", "capacity", "paired"))
    assert {m["metric"] for m in doc["baseline"]["metrics"]} >= {"capacity.rate"}
    assert doc["capacity"]["density"]["frontier"] is not None
    assert refusals(published(), doc) == []
    assert undeclared(GateDocument.model_validate(doc)) == []
    assert isinstance(GateDocument.read(doc, "gate.json"), GateDocument)


async def test_a_field_written_but_not_declared_is_found() -> None:
    doc = await fresh_gate()
    doc["paired"]["metrics"][0]["odds"] = 3.0
    doc["capacity"]["density"]["peak"]["node"] = "a"
    assert undeclared(GateDocument.model_validate(doc)) == [
        "$.capacity.density.peak.node",
        "$.paired.metrics[0].odds",
    ]


def test_a_sealed_run_of_the_gates_own_making_reads_back(tmp_path: Path) -> None:
    run = gate_runs.write_run(tmp_path, 1_000, gate_runs.seconds(p50_ms=40, seconds=60))
    assert load_run(str(run)).gate.schema_version == GATE_SCHEMA


def test_the_published_schema_is_the_models() -> None:
    assert json.loads(PUBLISHED.read_text(encoding="utf-8")) == gate_json_schema()
