"""The files a Run writes, whatever its load: campaign.json, script.yaml, status.json and the
manifest's reserved room at the start, status.json every second, and at the end the final
stats (stats.csv, failures.csv, stats.jsonl, gauges.jsonl, and the load's own files: a
sharded load's shards/<k>/health.json), the finalizers' files, report.html (for every run,
drawn from the files alone) and the manifest, last (docs/SPEC.md §7)."""

from __future__ import annotations

import functools
import logging
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from agentsession_core.engine.load import Load
from agentsession_core.engine.params import RunParams
from agentsession_core.measure.recorder import Recorder
from agentsession_core.measure.stats import CANDIDATE, REFERENCE
from agentsession_core.output.run_dir import RunDir
from agentsession_core.output.stats_files import (
    HISTORY_JSONL,
    HistoryWriter,
    jsonl_row,
    render_failures_csv,
    render_jsonl,
    render_stats_csv,
    render_stats_jsonl,
)
from agentsession_core.redaction import redact
from agentsession_core.report.context import ThresholdRule
from agentsession_core.report.page import write_report
from agentsession_core.run.live_control import LiveControl
from agentsession_core.script import encode
from agentsession_core.script.mix import ScriptMix
from agentsession_core.version import __version__

log = logging.getLogger("agentsession")


class Run(Protocol):
    """What the files read of a run (run.py `Run`; declared here so that the files and the
    run that writes them do not import each other)."""

    params: RunParams
    run_dir: RunDir
    load: Load
    script: ScriptMix | None
    atespace: str
    started_unix: float
    status: str
    reason: str | None
    write_failure: str | None
    control: LiveControl
    history: HistoryWriter
    extra_rows: list[dict[str, Any]]
    finalizers: list[Callable[[], None]]
    report_rules: Sequence[ThresholdRule]

    @property
    def recorder(self) -> Recorder: ...
    @property
    def exit_code(self) -> int: ...
    def writes_failed(self, exc: OSError) -> None: ...
    def finish(self, status: str = "completed", reason: str | None = None) -> None: ...


def write_start_files(run: Run) -> None:
    assert run.script is not None
    run.run_dir.write_json("campaign.json", campaign_document(run))
    for name, text in script_files(run.script).items():
        run.run_dir.write_text(name, text)
    run.run_dir.write_json("status.json", status_document(run, final=False))
    run.run_dir.reserve_manifest()  # the manifest still fits when the disk fills up


def script_files(mix: ScriptMix) -> dict[str, str]:
    """The scripts as the run ran them: script.yaml, or in a mix script-<name>.yaml each."""
    if not mix.mixed:
        return {"script.yaml": encode(mix.first)}
    return {f"script-{script.name}.yaml": encode(script) for script in mix.scripts}


def script_of(mix: ScriptMix) -> str | dict[str, int]:
    """campaign.json's `script`: the script's name, or in a mix {name: weight}."""
    return mix.weight_of() if mix.mixed else mix.first.name


def campaign_document(run: Run) -> dict[str, Any]:
    """The resolved parameters, whole (docs/SPEC.md §7): every field of the run's model —
    a CampaignParams with its thresholds, levels, windows, abort rules, upload and server
    sections — with the token and URL credentials redacted; each threshold and abort rule as
    its text, the population as its kind's model."""
    params = run.params.model_dump(mode="json")
    return {
        "params": redact(params),
        "params_model": type(run.params).__name__,
        "atespace": run.atespace,
        "script": script_of(run.script) if run.script else run.params.script,
        "started_unix": run.started_unix,
        "versions": {
            "agentsession": __version__,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
    }


def status_document(run: Run, *, final: bool) -> dict[str, Any]:
    load = run.load
    return {
        "status": run.status if final else "running",
        "exit_code": run.exit_code if final else None,
        "phase": load.phase,
        "stats_generated": final and load.opened,
        "abort_reason": run.reason,
        "started_unix": run.started_unix,
        "updated_unix": time.time(),
        "atespace": run.atespace,
        "control": run.control.summary(),  # changes by hand (docs/SPEC.md §5.10)
        **load.books(),  # actors created, deleted, leaked; a reference arm's; the shards'
    }


# attempt(name, write): one file's write; a failure is recorded, never raised (seal).
Attempt = Callable[[str, Callable[[], object]], None]


def write_final_files(run: Run) -> None:
    """The final stats, the finalizers' files, the final status and the manifest, last (in a
    thread, once the load is closed)."""
    seal(run, functools.partial(_write_stats, run))


def _write_stats(run: Run, attempt: Attempt) -> None:
    """The last history lines, gauges.jsonl, stats.csv, failures.csv and stats.jsonl (with
    the population's rows; a paired run's reference arm's beside them, every row saying its
    arm) from the whole run's window, and the load's own files."""
    load = run.load
    final = load.final_stats()
    whole = final.whole
    if whole is None:  # the load never opened: nothing was measured
        return
    run_dir = run.run_dir
    history = run.history.render_closed_files(run.recorder, load.sessions())
    tag, test = run.params.tag, run.params.name
    attempt("stats_history", lambda: append_history(run, history))
    gauges = render_jsonl(
        {"t": t, "name": name, "labels": labels, "value": value}
        for t, labels, name, value in whole.gauges
    )
    attempt("gauges.jsonl", lambda: run_dir.write_text("gauges.jsonl", gauges))
    attempt("stats.csv", lambda: run_dir.write_text("stats.csv", render_stats_csv(whole)))
    attempt("failures.csv", lambda: run_dir.write_text("failures.csv", render_failures_csv(whole)))
    paired = load.paired
    extra = []
    for arm, rows in ((CANDIDATE, final.population_rows), (REFERENCE, final.reference_rows or {})):
        for kind, measurements in rows.items():
            row = jsonl_row(kind, measurements, tag=tag, test_name=test)
            extra.append({**row, "arm": arm} if paired else row)
    stats = render_stats_jsonl(
        whole, tag=tag, test_name=test, extra_rows=[*extra, *run.extra_rows], arms=paired
    )
    attempt("stats.jsonl", lambda: run_dir.write_text("stats.jsonl", stats))
    for name, doc in final.files.items():
        attempt(name, functools.partial(run_dir.write_json, name, doc))


def seal(run: Run, write_stats: Callable[[Attempt], None]) -> None:
    """`write_stats(attempt)`, then the final status, the finalizers' files, the status again
    (finalizers read it) and the manifest, last.

    Every write is attempted even when one fails (a full or vanished disk, issue #11,
    docs/SPEC.md §7): the run then ends `failed` with the reason, status.json and
    manifest.json still land where they can (in place over their own blocks when no new file
    fits; the manifest names what is missing), and no OSError escapes — never a stuck
    `running` or a traceback.
    """
    run_dir = run.run_dir
    problems: list[str] = []

    def attempt(name: str, write: Callable[[], object]) -> None:
        try:
            write()
        except OSError as exc:
            if not exc.filename:
                exc = OSError(exc.errno, exc.strerror or str(exc), str(run_dir.path / name))
            problems.append(f"{Path(exc.filename).name}: {exc.strerror or exc}")
            if run.write_failure is None:
                run.writes_failed(exc)
                run.finish(run.status, run.reason)  # settle: failed, with the reason

    def final_status() -> None:
        run_dir.write_json("status.json", status_document(run, final=True), in_place=True)

    write_stats(attempt)
    # docs/SPEC.md §7; before the finalizers: the report reads it. A paired run's reference
    # arm has its own figures, under `reference`.
    load = run.load
    summary = load.server.document() if load.server is not None else {}
    if load.reference_server is not None:
        summary[REFERENCE] = load.reference_server.document()
    if summary:
        attempt("server_summary.json", lambda: run_dir.write_json("server_summary.json", summary))
    attempt("status.json", final_status)  # first: finalizers (gate, report) read it
    for finalize in run.finalizers:
        try:
            attempt("a finalizer's file", finalize)
        except Exception:
            log.exception("finalizer failed")
    attempt("status.json", final_status)
    attempt("report.html", functools.partial(write_run_report, run))
    if problems:  # the first was said (writes_failed); the list goes to the manifest
        log.debug("not written: %s", "; ".join(problems))
    # What a reader of the manifest must know: the files are not the whole run.
    problem = "; ".join(p for p in (run.write_failure, *problems) if p) or None
    attempt("manifest.json", lambda: run_dir.write_manifest(problem))


def append_history(run: Run, texts: dict[str, str]) -> None:
    """The per-second lines of stats_history.csv and stats_history.jsonl (HistoryWriter)."""
    for name, text in texts.items():
        run.run_dir.append_text(name, text)
    # Changes by hand, booked beside the seconds they fell in (docs/SPEC.md §5.10).
    if changes := run.control.take_records():
        run.run_dir.append_text(HISTORY_JSONL, render_jsonl(changes))


def write_run_report(run: Run) -> None:
    """report.html from the files just written (as `agentsession report` rebuilds it), with
    the run's threshold rules drawn. A full disk is the caller's (seal records it); any other
    failure is logged and never the reason a run's other files are lost."""
    try:
        write_report(run.run_dir.path, rules=run.report_rules)
    except OSError:
        raise
    except Exception:
        log.exception("report.html could not be written")
