"""History of a campaign: finding runs in the layout, reading both gate.json schemas into
figures, change points on seeded series, history.json and history.html (docs/SPEC.md §6)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from agentsession_core.cli import main
from agentsession_core.judge.changepoints import change_points
from agentsession_core.judge.figures import Figure
from agentsession_core.judge.figures import figures_of as figures_of_model
from agentsession_core.judge.gate_document import GateDocument, GateInputError
from agentsession_core.judge.history import (
    HistoryError,
    RunRecord,
    find_runs,
    history_document,
    load_series,
    regressions_of,
)
from agentsession_core.output.run_dir import RunDir
from agentsession_core.output.run_reader import RunReadError
from agentsession_core.output.stored_files import open_sealed
from agentsession_core.report import history_page
from agentsession_core.report.history_page import render_history
from tests.unit.test_report import assert_self_contained


def as_model(doc: dict) -> GateDocument:
    return GateDocument.model_validate(doc)


def figures_of(doc: dict) -> dict[str, Figure]:
    return figures_of_model(as_model(doc))


HEADLINE = {
    "TimeToWake": {"count": 60.0, "p50": 10.0, "p90": 12.0, "p99": 20.0, "p99_9": 21.0},
    "Step_*": {"count": 50.0, "p50": 3.0, "p90": 70.0, "p99": 75.0, "p99_9": 76.0},
    "requests": {"count": 180.0, "failure_ratio": 0.0, "achieved_rps": 2.0},
}


def gate(verdict: str = "pass", headline: dict | None = None, **extra: object) -> dict:
    return {
        "schema": 1,
        "verdict": verdict,
        "reason": f"{verdict} for the test",
        "windows": [{"index": 0, "level": 1.0, "outcome": {"fail": "break"}.get(verdict, verdict)}],
        "headline": HEADLINE if headline is None else headline,
        **extra,
    }


def lay_run(
    root: Path,
    name: str,
    ts: int,
    tag: str,
    gate_doc: dict | str | None = None,
    *,
    campaign: bool = True,
) -> Path:
    date = "2026-12-01"
    run = root / "runs" / name / f"run_date={date}" / f"run_ts={ts}" / f"run_tag={tag}"
    run.mkdir(parents=True)
    doc = gate() if gate_doc is None else gate_doc
    (run / "gate.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    if campaign:
        (run / "campaign.json").write_text(json.dumps({"params": {"name": name, "seed": 7}}))
    RunDir(run).write_manifest()  # sealed, as a finished run is
    return run


# --------------------------------------------------------------------------- find_runs
def test_find_runs_lists_every_run_oldest_first_by_run_ts(tmp_path: Path) -> None:
    late = lay_run(tmp_path, "nightly", 1_700_000_300, "b")
    early = lay_run(tmp_path, "nightly", 1_700_000_100, "z")
    same_ts = lay_run(tmp_path, "nightly", 1_700_000_300, "a")
    other = lay_run(tmp_path, "adhoc", 1_700_000_200, "x")
    (tmp_path / "runs" / "nightly" / "not-a-run-date").mkdir()
    (tmp_path / "runs" / "nightly" / "run_date=2026-12-01" / "stray.txt").write_text("x")
    assert find_runs(str(tmp_path)) == [str(p) for p in (early, other, same_ts, late)]
    assert find_runs(str(tmp_path), "nightly") == [str(p) for p in (early, same_ts, late)]
    assert find_runs(f"file://{tmp_path}", "adhoc") == [str(other)]
    assert find_runs(str(tmp_path), "nobody") == []


def test_find_runs_refuses_a_missing_prefix(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="no such directory"):
        find_runs(str(tmp_path / "nothing"))


def test_an_unreadable_run_is_listed_with_its_reason(tmp_path: Path) -> None:
    lay_run(tmp_path, "nightly", 100, "good")
    lay_run(tmp_path, "nightly", 200, "broken", "{not json")
    lay_run(tmp_path, "nightly", 300, "no-campaign", campaign=False)
    records = load_series(str(tmp_path), "nightly")
    assert [r.tag for r in records] == ["good", "broken", "no-campaign"]
    good, broken, bare = records
    assert good.error is None and good.verdict == "pass" and good.judged
    assert good.run_ts == 100 and good.name == "nightly" and good.run_date == "2026-12-01"
    assert broken.figures == {} and broken.verdict == "void" and not broken.judged
    assert "not valid JSON" in (broken.error or "") and "unreadable" in broken.reason
    # Its gate is still read; what is missing is said.
    assert bare.verdict == "pass" and "campaign.json" in (bare.error or "")
    assert bare.figures["TimeToWake.p50"].value == 10.0


# --------------------------------------------------------------------------- figures
def test_schema_1_headline_becomes_figures_without_intervals() -> None:
    figures = figures_of(gate())
    assert list(figures)[:4] == [
        "TimeToWake.p50",
        "TimeToWake.p90",
        "TimeToWake.p99",
        "TimeToWake.p99_9",
    ]
    assert figures["TimeToWake.p99"] == Figure(20.0, n=60, unit="ms")
    assert figures["Step_*.p50"].value == 3.0
    assert figures["requests.failure_ratio"] == Figure(0.0, n=180, unit="ratio")
    assert figures["requests.achieved_rps"].unit == "1/s"
    assert "WakeFirstTouch.p50" not in figures  # the run has no such row
    assert "TimeToWake.count" not in figures and "TimeToWake.p95" not in figures


def test_schema_2_figures_carry_their_interval_and_win_over_the_headline() -> None:
    doc = gate(
        schema=2,
        confidence=0.99,
        figures={
            "TimeToWake.p99": {
                "value": 812.3,
                "low": 700.1,
                "high": 950.2,
                "n": 1834,
                "beyond": 18,
                "estimable": True,
                "unit": "ms",
            },
            "TimeToWake.p99_9": {
                "value": 900.0,
                "low": None,
                "high": None,
                "n": 1834,
                "beyond": 1,
                "estimable": False,
                "unit": "ms",
            },
            "requests.failure_ratio": {"value": 0.01, "low": 0.0, "high": 0.02, "n": 9},
        },
    )
    figures = figures_of(doc)
    assert figures["TimeToWake.p99"] == Figure(812.3, 700.1, 950.2, 1834, 18, True, "ms")
    assert figures["TimeToWake.p99_9"] == Figure(900.0, None, None, 1834, 1, False, "ms")
    assert figures["requests.failure_ratio"].unit == "ratio"  # from the metric when absent
    # A headline figure the schema-2 figures lack keeps the headline's value.
    assert figures["Step_*.p50"].value == 3.0 and figures["TimeToWake.p90"].value == 12.0
    only = {
        "schema": 2,
        "verdict": "pass",
        "windows": [],
        "figures": {"TimeToWake.p50": {"value": 5}},
    }
    assert figures_of(only) == {"TimeToWake.p50": Figure(5.0, unit="ms")}
    # An unusable entry is no figure: the document is refused before anything reads it.
    for bad in ({"value": float("nan")}, "not a figure"):
        with pytest.raises(GateInputError, match=r"here: figures\.Step_\*\.p50"):
            GateDocument.read({**doc, "figures": {"Step_*.p50": bad}}, "here")


def test_a_gate_without_headline_or_figures_has_no_figures() -> None:
    assert figures_of({"verdict": "void", "windows": [], "headline": None}) == {}
    assert figures_of(gate(headline={"TimeToWake": {"count": 3.0}})) == {}


def test_regressions_are_the_gates_baseline_and_paired_ones_together() -> None:
    doc = gate(
        "fail",
        baseline={"status": "compared", "regressions": ["TimeToWake.p90", "TimeToWake.p50"]},
        paired={"status": "compared", "regressions": ["TimeToWake.p50", "capacity"]},
    )
    assert regressions_of(as_model(doc)) == ["TimeToWake.p50", "TimeToWake.p90", "capacity"]
    assert regressions_of(as_model(gate())) == []  # no baseline, not paired
    assert regressions_of(as_model(gate(baseline={"status": "none"}, paired=None))) == []


def test_a_regressed_night_is_marked_in_the_document_and_on_the_page(tmp_path: Path) -> None:
    lay_run(tmp_path / "s", "nightly", 100, "a")
    slow = gate(
        "fail",
        windows=[{"index": 0, "level": 1.0, "outcome": "pass"}],  # the comparison failed it
        baseline={"status": "compared", "regressions": ["TimeToWake.p99"]},
    )
    lay_run(tmp_path / "s", "nightly", 200, "b", slow)
    doc = history_document(load_series(str(tmp_path / "s")), prefix="p")
    assert [r["regressions"] for r in doc["runs"]] == [[], ["TimeToWake.p99"]]
    series = {s["metric"]: s for s in doc["campaigns"][0]["series"]}
    assert [p["regressed"] for p in series["TimeToWake.p99"]["points"]] == [False, True]
    assert [p["regressed"] for p in series["TimeToWake.p50"]["points"]] == [False, False]
    page = render_history(doc)
    assert page.count('class="regressed"') == 1 and page.count(">regressed</text>") == 1
    assert '<td class="rg">TimeToWake.p99</td>' in page


# --------------------------------------------------------------------------- change points
def noisy(seed: int, n: int, step_at: int | None, step: float) -> list[float]:
    rng = np.random.default_rng(seed)
    values = 200.0 * np.exp(0.12 * rng.standard_t(4, n))
    if step_at is not None:
        values[step_at:] *= 1.0 + step
    return [float(v) for v in values]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_doubling_is_found_within_a_night_with_its_step(seed: int) -> None:
    k = 8 + seed
    found = change_points(noisy(seed, 24, k, 1.0))
    assert len(found) == 1, found
    (cp,) = found
    assert abs(cp.index - k) <= 1
    assert cp.relative is not None and 0.6 < cp.relative < 1.5
    assert math.isclose(cp.absolute, cp.after - cp.before)
    assert cp.probability is not None and cp.probability <= 0.01
    assert cp.statistic is not None and cp.statistic > 0


def test_step_free_series_have_no_change_point() -> None:
    found = [change_points(noisy(seed, 20, None, 0.0)) for seed in range(100, 120)]
    assert sum(1 for f in found if f) <= 1, found


def test_change_points_are_the_same_on_the_same_series() -> None:
    values = noisy(9, 20, 10, 0.5)
    assert change_points(values) == change_points(values)


def test_a_short_series_has_none_and_log_scale_judges_ratios() -> None:
    assert change_points([1.0, 2.0, 3.0, 4.0]) == []
    # The same +100 % step at 1 ms and at 1 s: log values make them the same series.
    small, big = noisy(3, 20, 10, 1.0), [v * 1000 for v in noisy(3, 20, 10, 1.0)]
    assert [c.index for c in change_points(small)] == [c.index for c in change_points(big)]


# --------------------------------------------------------------------------- document, page
def step_series(root: Path, k: int = 8, nights: int = 16) -> list[Path]:
    runs = []
    for night in range(nights):
        p50 = noisy(night, 1, None, 0.0)[0] / 20 * (3.0 if night >= k else 1.0)
        headline = json.loads(json.dumps(HEADLINE))
        headline["TimeToWake"]["p50"] = p50
        verdict = "void" if night == 2 else "pass"
        runs.append(
            lay_run(root, "nightly", 1000 + night, f"n{night:02d}", gate(verdict, headline))
        )
    return runs


def test_history_document_names_the_first_run_after_the_change(tmp_path: Path) -> None:
    runs = step_series(tmp_path)
    doc = history_document(load_series(str(tmp_path)), prefix=str(tmp_path))
    assert doc["schema"] == "agentsession.history/1"
    assert [r["tag"] for r in doc["runs"]] == [f"n{i:02d}" for i in range(16)]
    assert doc["rule"]["library"] == "apache-otava" and doc["rule"]["max_pvalue"] == 0.01
    (campaign,) = doc["campaigns"]
    series = {s["metric"]: s for s in campaign["series"]}
    p50 = series["TimeToWake.p50"]
    assert len(p50["points"]) == 16 and p50["judged_points"] == 15  # the void night: drawn only
    (cp,) = p50["change_points"]
    assert cp["location"] == str(runs[8]) and cp["night"] == 8 and cp["tag"] == "n08"
    assert cp["relative"] > 1.0 and cp["after"] > cp["before"]
    assert dict(cp, name="nightly") in doc["change_points"]
    assert series["WakeFirstTouch.p50"]["points"] == []  # no night has it
    json.dumps(doc, allow_nan=False)


def test_history_page_draws_change_points_links_and_no_data(tmp_path: Path) -> None:
    step_series(tmp_path / "series")
    doc = history_document(load_series(str(tmp_path / "series")), prefix="p<x>")
    page = render_history(doc, out_dir=tmp_path / "out")
    assert page.startswith("<!DOCTYPE html>")
    assert_self_contained(page)
    assert page.count('class="change-point"') == len(doc["change_points"]) >= 1
    assert "no data: no night has WakeFirstTouch.p50" in page
    assert (
        'href="../series/runs/nightly/run_date=2026-12-01/run_ts=1000/run_tag=n00/report.html"'
        in page
    )
    assert "p&lt;x&gt;" in page and "p<x>" not in page
    assert 'class="night-void"' in page and 'class="night-pass"' in page


def test_history_command_writes_json_and_html_beside_the_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = step_series(tmp_path / "series")
    out = tmp_path / "out" / "page.html"
    assert main(["history", str(tmp_path / "series"), "--name", "nightly", "-o", str(out)]) == 0
    doc = json.loads((tmp_path / "out" / "history.json").read_text())
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert any(cp["location"] == str(runs[8]) for cp in doc["change_points"])
    assert "16 run(s)" in capsys.readouterr().out


def test_history_command_on_a_missing_prefix_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["history", str(tmp_path / "none"), "-o", str(tmp_path / "h.html")]) == 2
    assert "no such directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- many nights
def test_history_believes_a_sealed_run_hashing_only_what_it_reads(tmp_path: Path) -> None:
    run = lay_run(tmp_path, "nightly", 100, "a")
    (run / "logs.txt").write_text("x" * 100)
    RunDir(run).write_manifest()
    assert open_sealed(str(run)).json("gate.json")["verdict"] == "pass"
    # A file history reads, altered in place (same size): refused on its hash.
    text = (run / "gate.json").read_text()
    (run / "gate.json").write_text(text.replace("pass for", "fail for"))
    assert load_series(str(tmp_path))[0].error is not None
    with pytest.raises(RunReadError, match=r"gate\.json: altered: sha256 differs"):
        open_sealed(str(run)).json("gate.json")
    (run / "gate.json").write_text(text)
    # A file it does not read: checked by presence and size.
    (run / "logs.txt").write_text("x" * 99)
    with pytest.raises(RunReadError, match=r"logs\.txt: altered: 99 bytes"):
        open_sealed(str(run))
    (run / "logs.txt").unlink()
    with pytest.raises(RunReadError, match=r"logs.txt: missing \(listed in manifest.json\)"):
        open_sealed(str(run))
    record = load_series(str(tmp_path))[0]
    assert not record.judged and "logs.txt: missing" in (record.error or "")


def test_a_gate_file_present_but_unlisted_is_refused(tmp_path: Path) -> None:
    run = lay_run(tmp_path, "nightly", 100, "a")
    (run / "windows.jsonl").write_text("{}\n")
    with pytest.raises(RunReadError, match=r"windows\.jsonl: not listed in manifest\.json"):
        open_sealed(str(run))


def test_a_history_of_more_nights_than_a_chart_draws_is_drawn_in_bins() -> None:
    nights = history_page.MAX_DRAWN * 2 + 1
    records = []
    for night in range(nights):
        fail = night == 250
        records.append(
            RunRecord(
                f"/r/n{night}",
                "nightly",
                "2026-12-01",
                float(1000 + night),
                f"n{night:04d}",
                verdict="fail" if fail else "pass",
                figures={"TimeToWake.p50": Figure(value=10.0 + (night % 3), unit="ms")},
                regressions=["TimeToWake.p50"] if fail else [],
            )
        )
    doc = history_document(records, prefix="p")
    assert len(doc["runs"]) == nights  # every night stays in history.json
    page = render_history(doc)
    size = history_page.bin_size(nights)
    assert size == 3
    assert f"{nights} nights, drawn in bins of {size} consecutive nights" in page
    # The TimeToWake.p50 chart holds one dot per bin (the other metrics have no data), the
    # bin with the failed night in the colour of its worst verdict, ringed as regressed.
    dots = page.count('class="night-pass"') + page.count('class="night-fail"')
    assert dots == math.ceil(nights / size)
    assert page.count('class="night-fail"') == 1 and page.count('class="regressed"') == 1
    # Every night is still in the nights table.
    assert all(f"n{night:04d}" in page for night in (0, 250, nights - 1))
