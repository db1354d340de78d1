"""The files a Run writes itself: campaign.json, script.yaml and status.json at the start,
status.json every second, and at the end the final stats (stats.csv, failures.csv,
stats.jsonl, gauges.jsonl), the finalizers' files and the manifest, last."""

from __future__ import annotations

import logging
import platform
import sys
import time
from typing import TYPE_CHECKING, Any

from agentsession_core.engine.context import now_ns
from agentsession_core.output.run_dir import redact
from agentsession_core.output.stats_files import (
    jsonl_row,
    render_failures_csv,
    render_jsonl,
    render_stats_csv,
    render_stats_jsonl,
)
from agentsession_core.script import encode
from agentsession_core.version import __version__

if TYPE_CHECKING:
    from agentsession_core.engine.run import Run

log = logging.getLogger("agentsession")


def write_start_files(run: Run) -> None:
    assert run.script is not None
    run.run_dir.write_json("campaign.json", campaign_document(run))
    run.run_dir.write_text("script.yaml", encode(run.script))
    run.run_dir.write_json("status.json", status_document(run, final=False))


def campaign_document(run: Run) -> dict[str, Any]:
    """The resolved parameters, whole (docs/SPEC.md §7): every field of the run's model —
    a CampaignParams with its thresholds, levels, windows, abort rules, upload and server
    sections — with the token and URL credentials redacted. `serialize_as_any` dumps a
    section by what it is, not by the type its field declares, so a subclass loses nothing."""
    params = run.params.model_dump(mode="json", serialize_as_any=True)
    return {
        "params": redact(params),
        "params_model": type(run.params).__name__,
        "atespace": run.atespace,
        "script": run.script.name if run.script else run.params.script,
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
        "leaked_actors": engine.leaks if engine else [],
        "misconfigured": engine.ctx.misconfigured if engine else {},
    }


def write_final_files(run: Run) -> None:
    run_dir = run.run_dir
    engine = run.engine
    if engine is not None:
        rec = run.recorder
        rec.flush(now_ns() + 1_000_000_000)  # close the last open second
        history = run.history.render_closed(rec, len(engine.population.sessions))
        run_dir.append_text("stats_history.csv", history)
        whole = rec.window(rec.mono_ns_of_second(rec.first_second), now_ns() + 1_000_000_000)
        tag, test = run.params.tag, run.params.name
        run_dir.write_text(
            "gauges.jsonl",
            render_jsonl(
                {"t": t, "name": name, "labels": labels, "value": value}
                for t, labels, name, value in whole.gauges
            ),
        )
        run_dir.write_text("stats.csv", render_stats_csv(whole))
        run_dir.write_text("failures.csv", render_failures_csv(whole))
        population_rows = [
            jsonl_row(kind, measurements, tag=tag, test_name=test)
            for kind, measurements in engine.population.summary_rows(rec).items()
        ]
        run_dir.write_text(
            "stats.jsonl",
            render_stats_jsonl(
                whole, tag=tag, test_name=test, extra_rows=[*population_rows, *run.extra_rows]
            ),
        )
    if run.server is not None:  # docs/SPEC.md §7; before the finalizers: the report reads it
        run_dir.write_json("server_summary.json", run.server.document())
    # Final status first: finalizers (gate, report) read it.
    run_dir.write_json("status.json", status_document(run, final=True))
    for finalize in run.finalizers:
        try:
            finalize(run)
        except Exception:
            log.exception("finalizer failed")
    run_dir.write_json("status.json", status_document(run, final=True))
    run_dir.write_manifest()
