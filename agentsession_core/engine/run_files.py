"""The files a Run writes itself: campaign.json, script.yaml, status.json and the manifest's
reserved room at the start, status.json every second, and at the end the final stats
(stats.csv, failures.csv, stats.jsonl, gauges.jsonl), the finalizers' files, report.html (for
every run, drawn from the files alone) and the manifest, last (docs/SPEC.md §7)."""

from __future__ import annotations

import functools
import logging
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsession_core.engine.context import now_ns
from agentsession_core.measure.stats import CANDIDATE, REFERENCE, Window
from agentsession_core.output.run_dir import redact
from agentsession_core.output.stats_files import (
    HISTORY_JSONL,
    jsonl_row,
    render_failures_csv,
    render_jsonl,
    render_stats_csv,
    render_stats_jsonl,
)
from agentsession_core.report.page import write_report
from agentsession_core.script import encode
from agentsession_core.script.mix import ScriptMix
from agentsession_core.version import __version__

if TYPE_CHECKING:
    from agentsession_core.engine.run import Run

log = logging.getLogger("agentsession")


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
    engine = run.engine
    return {
        "status": run.status if final else "running",
        "exit_code": run.exit_code if final else None,
        "phase": engine.phase if engine else "setup",
        "stats_generated": final and engine is not None,
        "abort_reason": run.reason,
        "started_unix": run.started_unix,
        "updated_unix": time.time(),
        "atespace": run.atespace,
        "actors_created": engine.ledger.created if engine else 0,
        "actors_deleted": engine.ledger.deleted if engine else 0,
        "leaked_actors": run.leaks,  # every arm's (a reference arm's with `arm`): the exit code
        "misconfigured": engine.ctx.misconfigured if engine else {},
        "control": run.control.summary(),  # changes by hand (docs/SPEC.md §5.10)
        # A paired run's reference arm: its own books (docs/SPEC.md §6.8).
        **({"reference": run.reference.status()} if run.reference is not None else {}),
    }


# attempt(name, write): one file's write; a failure is recorded, never raised (seal).
Attempt = Callable[[str, Callable[[], object]], None]


def write_final_files(run: Run) -> None:
    """The final stats, the finalizers' files, the final status and the manifest, last."""
    seal(run, functools.partial(_write_stats, run), status_document)


def _write_stats(run: Run, attempt: Attempt) -> None:
    engine = run.engine
    if engine is None:
        return
    rec = run.recorder
    rec.flush(now_ns() + 1_000_000_000)  # close the last open second
    whole = rec.window(rec.mono_ns_of_second(rec.first_second), now_ns() + 1_000_000_000)
    history = run.history.render_closed_files(rec, len(engine.population.sessions))
    reference = run.reference
    theirs = None
    if reference is not None and reference.engine is not None:
        theirs = reference.engine.population.summary_rows(reference.recorder)
    write_stats_files(
        run, attempt, whole, history, engine.population.summary_rows(rec), reference_rows=theirs
    )


def write_stats_files(
    run: Run,
    attempt: Attempt,
    whole: Window,
    history: dict[str, str],
    population_rows: dict[str, dict[str, Any]],
    *,
    reference_rows: dict[str, dict[str, Any]] | None = None,
) -> None:
    """The last history lines, gauges.jsonl, stats.csv, failures.csv and stats.jsonl (with
    the population's rows; a paired run's reference arm's beside them, every row saying its
    arm) from the whole run's window: a Run's and a ShardedRun's alike."""
    run_dir = run.run_dir
    tag, test = run.params.tag, run.params.name
    attempt("stats_history", lambda: append_history(run, history))
    gauges = render_jsonl(
        {"t": t, "name": name, "labels": labels, "value": value}
        for t, labels, name, value in whole.gauges
    )
    attempt("gauges.jsonl", lambda: run_dir.write_text("gauges.jsonl", gauges))
    attempt("stats.csv", lambda: run_dir.write_text("stats.csv", render_stats_csv(whole)))
    attempt("failures.csv", lambda: run_dir.write_text("failures.csv", render_failures_csv(whole)))
    paired = run.reference is not None
    extra = []
    for arm, rows in ((CANDIDATE, population_rows), (REFERENCE, reference_rows or {})):
        for kind, measurements in rows.items():
            row = jsonl_row(kind, measurements, tag=tag, test_name=test)
            extra.append({**row, "arm": arm} if paired else row)
    stats = render_stats_jsonl(
        whole, tag=tag, test_name=test, extra_rows=[*extra, *run.extra_rows], arms=paired
    )
    attempt("stats.jsonl", lambda: run_dir.write_text("stats.jsonl", stats))


def seal(
    run: Run,
    write_stats: Callable[[Attempt], None],
    status: Callable[..., dict[str, Any]],
) -> None:
    """`write_stats(attempt)`, then the final status, the finalizers' files, the status again
    (finalizers read it) and the manifest, last — for a Run and a ShardedRun alike.

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
        run_dir.write_json("status.json", status(run, final=True), in_place=True)

    write_stats(attempt)
    # docs/SPEC.md §7; before the finalizers: the report reads it. A paired run's reference
    # arm has its own figures, under `reference`.
    summary = run.server.document() if run.server is not None else {}
    if run.reference is not None and run.reference.server is not None:
        summary[REFERENCE] = run.reference.server.document()
    if summary:
        attempt("server_summary.json", lambda: run_dir.write_json("server_summary.json", summary))
    attempt("status.json", final_status)  # first: finalizers (gate, report) read it
    for finalize in run.finalizers:
        try:
            attempt("a finalizer's file", functools.partial(finalize, run))
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
