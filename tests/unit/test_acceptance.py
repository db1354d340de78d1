"""Accepting a change (judge/acceptance.py, docs/SPEC.md §6.3, §6.4): the record beside a run,
what it refuses, `baseline: auto` from the accepted run on, and history's marks. Sealed
synthetic runs in the campaign layout (tests/unit/gate_runs.py, test_history.py's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsession_core.cli import main
from agentsession_core.judge.acceptance import (
    MAX_REASON,
    AcceptanceError,
    accept_run,
    list_acceptances,
    read_acceptance,
)
from agentsession_core.judge.baselines import last_good_runs
from agentsession_core.judge.history import accepted_spans, history_document, load_series
from agentsession_core.output.run_dir import ACCEPTANCE, RunDir, verify_manifest
from agentsession_core.output.stored_files import check_sealed, open_sealed
from agentsession_core.report.history_page import render_history
from tests.unit import gate_runs
from tests.unit.gate_runs import seconds
from tests.unit.test_history import step_series
from tests.unit.test_report import assert_self_contained

REASON = "the new snapshot check costs 3x on wake, by design"


def night(root: Path, ts: int, p50_ms: float, outcomes: tuple[str, ...] = ("pass",)) -> Path:
    return gate_runs.write_run(
        root, ts, seconds(p50_ms=p50_ms, seconds=120, seed=ts), outcomes=outcomes
    )


def judged(root: Path, run: Path) -> dict:
    """`gate RUN --baseline auto --write`: the run judged against its campaign, stored."""
    assert main(["gate", str(run), "--baseline", "auto", "--write"]) in (0, 1)
    return json.loads((run / "gate.json").read_text())


@pytest.fixture
def nights(tmp_path: Path) -> dict[str, Path]:
    """Two nights at one level, then a night three times slower that failed against them."""
    runs = {"a": night(tmp_path, 1, 40), "b": night(tmp_path, 2, 41)}
    runs["slow"] = night(tmp_path, 3, 120)
    assert judged(tmp_path, runs["slow"])["verdict"] == "fail"
    return runs


def before(root: Path, run: Path) -> list[str]:
    """`baseline: auto` of `run`: the locations of its baselines, oldest first."""
    doc = json.loads((run / "gate.json").read_text())
    ts = int(run.parent.name.removeprefix("run_ts="))
    found = last_good_runs(
        str(root), "nightly", conditions=doc["conditions"], history=5, before_ts=ts
    )
    return [r.location for r in found]


# --------------------------------------------------------------------------- the record
def test_accepting_writes_a_sealed_record_beside_the_run_and_leaves_its_seal(
    nights: dict[str, Path],
) -> None:
    slow = nights["slow"]
    manifest = (slow / "manifest.json").read_bytes()
    done, previous = accept_run(str(slow), REASON, by="ci@box", now=1_800_000_000.0)
    assert previous is None
    assert (done.reason, done.by, done.verdict) == (REASON, "ci@box", "fail")
    assert done.regressions == ("TimeToWake.p50", "TimeToWake.p90")
    record = json.loads((slow / ACCEPTANCE).read_text())
    assert record["schema"] == "agentsession.acceptance/1" and len(record["seal"]) == 64
    assert record["run"]["location"] == str(slow) and record["accepted_unix"] == 1_800_000_000.0
    # The run's own seal is as it was, and the record is none of its files.
    assert (slow / "manifest.json").read_bytes() == manifest
    assert check_sealed(str(slow)) == "bytes" and verify_manifest(slow) == []
    assert open_sealed(str(slow)).read(ACCEPTANCE) is None
    assert ACCEPTANCE not in RunDir(slow).files()
    assert read_acceptance(str(slow)) == done
    assert read_acceptance(str(nights["a"])) is None


def test_accepting_again_replaces_the_record_and_says_whose_it_was(
    nights: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["baseline", "accept", str(nights["slow"]), "--reason", "first"]) == 0
    assert main(["baseline", "accept", str(nights["slow"]), "--reason", REASON]) == 0
    out = capsys.readouterr().out
    assert "replaces the acceptance of " in out and ": first\n" in out
    assert read_acceptance(str(nights["slow"])).reason == REASON  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        ("", "--reason: empty"),
        ("   ", "--reason: empty"),
        ("two\nlines", "--reason: one line of printable text; it holds '\\n' at character 4"),
        ("tab\there", "holds '\\t'"),
        ("para\u2029graph", "holds '\\u2029'"),
        ("x" * (MAX_REASON + 1), f"--reason: {MAX_REASON + 1} characters, at most {MAX_REASON}"),
    ],
)
def test_a_reason_that_is_not_one_bounded_line_is_refused_in_one_line(
    nights: dict[str, Path], reason: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["baseline", "accept", str(nights["slow"]), "--reason", reason]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
    assert not (nights["slow"] / ACCEPTANCE).exists()


def test_an_unsealed_or_altered_run_is_refused_in_one_line(
    nights: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    altered = nights["slow"] / "campaign.json"
    altered.write_text(altered.read_text().replace("smoke", "smoky"))
    assert main(["baseline", "accept", str(nights["slow"]), "--reason", REASON]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot accept: " in err
    assert "campaign.json: altered" in err
    (nights["b"] / "manifest.json").unlink()
    assert main(["baseline", "accept", str(nights["b"]), "--reason", REASON]) == 2
    err = capsys.readouterr().err.strip()
    assert "manifest.json: missing: the run was never sealed" in err and "\n" not in err
    assert not any((run / ACCEPTANCE).exists() for run in nights.values())


def test_a_void_run_is_not_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    void = night(tmp_path, 1, 40, outcomes=("void",))
    assert main(["baseline", "accept", str(void), "--reason", REASON]) == 2
    err = capsys.readouterr().err
    assert "cannot accept a void run" in err and "measured nothing" in err


def test_an_edited_record_or_one_moved_to_another_run_is_not_believed(
    nights: dict[str, Path],
) -> None:
    accept_run(str(nights["slow"]), REASON)
    record = nights["slow"] / ACCEPTANCE
    original = record.read_text()
    record.write_text(original.replace("by design", "by accident"))
    with pytest.raises(AcceptanceError, match=r"acceptance.json: altered: its seal differs"):
        read_acceptance(str(nights["slow"]))
    record.write_text(original)
    (nights["b"] / ACCEPTANCE).write_text(original)  # copied beside another run
    with pytest.raises(AcceptanceError, match=r"not this run's: the run's manifest.json"):
        read_acceptance(str(nights["b"]))
    # The accepted run re-sealed after a change: the record no longer holds either.
    RunDir(nights["slow"]).write_manifest()
    assert read_acceptance(str(nights["slow"])) is not None  # the same files: same manifest
    (nights["slow"] / "logs.txt").write_text("added later\n")
    RunDir(nights["slow"]).write_manifest()
    with pytest.raises(AcceptanceError, match="not this run's"):
        read_acceptance(str(nights["slow"]))


# --------------------------------------------------------------------------- baseline: auto
def test_baseline_auto_compares_only_from_the_accepted_run_on(
    tmp_path: Path, nights: dict[str, Path]
) -> None:
    later = night(tmp_path, 4, 118)
    assert before(tmp_path, later) == [str(nights["a"]), str(nights["b"])]
    assert judged(tmp_path, later)["verdict"] == "fail"  # against the old level
    accept_run(str(nights["slow"]), REASON)
    assert before(tmp_path, later) == [str(nights["slow"])]
    (base,) = last_good_runs(str(tmp_path), "nightly", conditions=None, history=5, before_ts=4)
    assert base.acceptance is not None and base.acceptance.reason == REASON
    doc = judged(tmp_path, later)
    assert doc["verdict"] == "pass", doc["reason"]
    assert doc["baseline"]["locations"] == [str(nights["slow"])]
    # Nights after the accepted one join it, oldest first; still nothing from before it.
    newest = night(tmp_path, 5, 121)
    assert before(tmp_path, newest) == [str(nights["slow"]), str(later)]


def test_the_newest_acceptance_wins(tmp_path: Path, nights: dict[str, Path]) -> None:
    accept_run(str(nights["slow"]), REASON)
    faster = night(tmp_path, 4, 60)
    accept_run(str(faster), "the snapshot check got cheaper")
    latest = night(tmp_path, 5, 61)
    assert before(tmp_path, latest) == [str(faster)]


def test_an_acceptance_that_cannot_be_believed_is_ignored_with_a_warning(
    tmp_path: Path, nights: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    accept_run(str(nights["slow"]), REASON)
    record = nights["slow"] / ACCEPTANCE
    record.write_text(record.read_text().replace("by design", "by hand"))
    later = night(tmp_path, 4, 118)
    assert before(tmp_path, later) == [str(nights["a"]), str(nights["b"])]
    assert "its acceptance is ignored" in caplog.text and "altered" in caplog.text


def test_an_accepted_run_named_as_the_baseline_is_one(
    tmp_path: Path, nights: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`gate --baseline RUN` and `report --baseline RUN` read the named run's acceptance as
    `auto` does: refused while it only failed, a baseline once accepted, and refused in the
    record's own line when that record cannot be believed."""
    later = night(tmp_path, 4, 118)
    named = ["gate", str(later), "--baseline", str(nights["slow"])]
    assert main(named) == 2
    assert "not a baseline: its verdict is fail" in capsys.readouterr().err
    accept_run(str(nights["slow"]), REASON)
    assert main(named) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "pass" and doc["baseline"]["locations"] == [str(nights["slow"])]
    page = tmp_path / "report.html"
    assert main(["report", str(later), "--baseline", str(nights["slow"]), "-o", str(page)]) == 0
    assert "not a baseline" not in page.read_text()
    record = nights["slow"] / ACCEPTANCE
    record.write_text(record.read_text().replace("by design", "by hand"))
    assert main(named) == 2
    assert "acceptance.json: altered" in capsys.readouterr().err


def test_an_accepted_run_of_other_conditions_is_no_floor(
    tmp_path: Path, nights: dict[str, Path]
) -> None:
    other = gate_runs.write_run(
        tmp_path, 4, seconds(p50_ms=120, seconds=120, seed=4), tag="rate3", window_seconds=15
    )
    accept_run(str(other), "another configuration")
    later = night(tmp_path, 5, 42)
    assert before(tmp_path, later) == [str(nights["a"]), str(nights["b"])]


def test_baseline_list_shows_what_is_accepted(
    tmp_path: Path, nights: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["baseline", "list", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"no accepted run under {tmp_path}"
    accept_run(str(nights["slow"]), REASON, by="ci@box")
    (nights["a"] / ACCEPTANCE).write_text("{not json")
    assert main(["baseline", "list", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith(f"{nights['a']}  NOT BELIEVED: ") and "acceptance.json" in lines[0]
    assert lines[1].startswith(f"{nights['slow']}  accepted ") and lines[1].endswith(
        f"by ci@box (fail): {REASON}"
    )
    assert main(["baseline", "list", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [a["location"] for a in doc["accepted"]] == [str(nights["a"]), str(nights["slow"])]
    assert doc["accepted"][1]["reason"] == REASON and doc["accepted"][1]["error"] is None
    assert [loc for loc, _, _ in list_acceptances(str(tmp_path), "other")] == []


# --------------------------------------------------------------------------- history
def test_history_marks_the_accepted_night_and_reports_its_step_no_more(tmp_path: Path) -> None:
    runs = step_series(tmp_path)  # TimeToWake.p50 three times higher from night 8 on
    before = history_document(load_series(str(tmp_path)), prefix=str(tmp_path))
    (step,) = [cp for cp in before["change_points"] if cp["metric"] == "TimeToWake.p50"]
    assert step["night"] == 8 and before["accepted_steps"] == []
    accept_run(str(runs[8]), "bigger snapshots <by design> & more")
    doc = history_document(load_series(str(tmp_path)), prefix=str(tmp_path))
    assert doc["runs"][8]["accepted"]["reason"] == "bigger snapshots <by design> & more"
    assert all(r["accepted"] is None for i, r in enumerate(doc["runs"]) if i != 8)
    assert [cp for cp in doc["change_points"] if cp["metric"] == "TimeToWake.p50"] == []
    (accepted,) = [cp for cp in doc["accepted_steps"] if cp["metric"] == "TimeToWake.p50"]
    assert accepted["night"] == 8 and accepted["accepted_by"] == str(runs[8])
    assert accepted["before"] == step["before"] and accepted["after"] == step["after"]
    page = render_history(doc, out_dir=tmp_path)
    assert_self_contained(page)
    drawn = [s for s in doc["campaigns"][0]["series"] if s["points"]]
    assert page.count('class="accepted"') == len(drawn) >= 4
    assert "<h2>Accepted steps</h2>" in page
    assert "bigger snapshots &lt;by design&gt; &amp; more" in page and "<by design>" not in page
    json.dumps(doc, allow_nan=False)


def test_history_without_an_acceptance_draws_the_page_as_before(tmp_path: Path) -> None:
    step_series(tmp_path)
    doc = history_document(load_series(str(tmp_path)), prefix=str(tmp_path))
    page = render_history(doc, out_dir=tmp_path)
    assert "accepted" not in page.lower()


def test_the_accepted_step_spans_the_failed_nights_before_the_accepted_one() -> None:
    class R:
        def __init__(self, verdict: str, accepted: bool = False) -> None:
            self.verdict, self.accepted = verdict, (object() if accepted else None)
            self.judged = verdict in ("pass", "fail")

    records = [R("pass"), R("pass"), R("fail"), R("void"), R("fail", True), R("pass")]
    assert accepted_spans(records) == [(1, 4)]  # type: ignore[arg-type]
    records = [R("fail", True), R("pass"), R("pass", True)]
    assert accepted_spans(records) == [(-1, 0), (1, 2)]  # type: ignore[arg-type]


def test_an_unbelievable_record_is_said_in_history_and_marks_nothing(tmp_path: Path) -> None:
    runs = step_series(tmp_path)
    (runs[8] / ACCEPTANCE).write_text(json.dumps({"schema": "agentsession.acceptance/1"}))
    doc = history_document(load_series(str(tmp_path)), prefix=str(tmp_path))
    assert doc["runs"][8]["accepted"] is None
    assert "acceptance.json" in doc["runs"][8]["acceptance_error"]
    assert any(cp["night"] == 8 for cp in doc["change_points"])
    assert "acceptance not believed" in render_history(doc, out_dir=tmp_path)
