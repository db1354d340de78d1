"""output/run_reader.py and the gate's schema check, in process (the real commands against
hostile runs and S3: tests/integration/test_run_readers.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentsession_core.judge.gate_document import GateInputError
from agentsession_core.judge.stored_run import load_run
from agentsession_core.output.run_dir import RunDir
from agentsession_core.output.run_reader import RunReadError, read_json_file, read_run_file
from agentsession_core.output.stored_files import check_sealed
from tests.unit import gate_runs


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return gate_runs.write_run(tmp_path, 1_000, gate_runs.seconds(p50_ms=40, seconds=60))


def test_a_sealed_run_verifies_and_is_read(run: Path) -> None:
    assert check_sealed(str(run)) == "bytes"
    assert load_run(str(run)).gate.verdict == "pass"


def test_a_run_killed_before_it_was_sealed_is_refused_naming_manifest_json(run: Path) -> None:
    RunDir(run).reserve_manifest()  # what a run killed with -9 leaves: the placeholder
    with pytest.raises(GateInputError, match=r"manifest\.json: the run is incomplete") as info:
        load_run(str(run))
    assert "the run has not ended" in str(info.value) and info.value.exit_code == 2


def test_a_gate_file_outside_the_manifest_is_refused(run: Path) -> None:
    (run / "windows.jsonl").write_text("")  # written after the seal
    with pytest.raises(GateInputError, match=r"windows\.jsonl: not listed in manifest\.json"):
        load_run(str(run))


def test_a_file_over_its_cap_is_refused_before_it_is_read(run: Path) -> None:
    os.truncate(run / "status.json", (1 << 20) + 1)  # sparse
    with pytest.raises(RunReadError, match=r"1048577 bytes, over the 1 MiB cap for status\.json"):
        read_run_file(str(run), "status.json")
    assert len(read_run_file(str(run), "status.json", cap=2 << 20) or b"") == (1 << 20) + 1


def test_a_path_out_of_the_run_is_refused(run: Path) -> None:
    with pytest.raises(RunReadError, match="not a path inside the run"):
        read_run_file(str(run), "../../../etc/passwd")
    assert read_run_file(str(run), "nothing-here.json") is None


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"verdict": "maybe"}, "verdict is 'maybe', not pass, fail or void"),
        ({"verdict": None}, "verdict is None"),
        ({"windows": {"0": "pass"}}, "windows is {'0': 'pass'}, not a list"),
        ({"windows": [{"index": 0, "outcome": "fine"}]}, "windows[0].outcome is 'fine'"),
        ({"windows": [{"index": "0", "outcome": "pass"}]}, "windows[0].index is '0'"),
        ({"confidence": 7}, "confidence is 7, not a fraction"),
        ({"figures": {"TimeToWake.p50": {"value": "fast"}}}, "figures.TimeToWake.p50.value"),
        ({"reason": ["a"]}, "reason is ['a'], not text"),
    ],
)
def test_a_gate_document_of_the_wrong_shape_is_refused_naming_the_field(
    run: Path, change: dict, says: str
) -> None:
    doc = json.loads((run / "gate.json").read_text())
    (run / "gate.json").write_text(json.dumps({**doc, **change}))
    RunDir(run).write_manifest()
    with pytest.raises(GateInputError) as info:
        load_run(str(run))
    assert says in str(info.value) and str(run / "gate.json") in str(info.value)


def test_json_that_is_not_an_object_or_nests_too_deep_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("[1, 2]")
    with pytest.raises(RunReadError, match="expected a JSON object"):
        read_json_file(str(tmp_path), "a.json")
    (tmp_path / "b.json").write_text('{"a": ' * 65 + "1" + "}" * 65)
    with pytest.raises(RunReadError, match="nested deeper than 64 levels"):
        read_json_file(str(tmp_path), "b.json")
    (tmp_path / "c.json").write_text('{"a": ' * 63 + "1" + "}" * 63)
    assert read_json_file(str(tmp_path), "c.json") is not None
    (tmp_path / "d.json").write_text('{"v": -Infinity}')
    with pytest.raises(RunReadError, match="a non-finite number at line 1 column"):
        read_json_file(str(tmp_path), "d.json")
