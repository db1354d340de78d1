"""The files of a sharded run: the same set a single process writes (run_files.py), from the
merged recorder, plus `shards/<k>/health.json` beside them (each shard's generator health,
placement, counts and fate) and a `shards` section in status.json."""

from __future__ import annotations

import functools
import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from agentsession_core.engine.context import now_ns
from agentsession_core.engine.populations.turnover import RESIDENT_TOLERANCE, shortfall_line
from agentsession_core.engine.populations.turnover_window import level_rows
from agentsession_core.engine.run_files import Attempt, seal, write_stats_files
from agentsession_core.engine.run_files import status_document as run_status_document
from agentsession_core.measure.stats import RESIDENT_SHORTFALL_ROW

if TYPE_CHECKING:
    from agentsession_core.engine.shards.coordinator import ShardedRun

log = logging.getLogger("agentsession")

NS = 1_000_000_000


def sessions(run: ShardedRun) -> int:
    """The live shards' sessions: a lost shard's are counted where they were carried on."""
    if run.stream is None:
        return 0
    return sum(int(run.stream.status[k].get("sessions", 0)) for k in run.live_shards)


def shard_rows(run: ShardedRun) -> list[dict[str, Any]]:
    """One entry per shard for status.json: where it ran, its share, its state."""
    out = []
    for k, plan in enumerate(run.plans):
        status = run.stream.status[k] if run.stream else {}
        pop = plan.params.population
        final = run.finals.get(k, {})
        swept = run.swept.get(k)
        state = "lost" if k in run.lost else ("stopped" if k in run.finals else "running")
        out.append(
            {
                "shard": k,
                "state": state,
                "lost_reason": run.lost.get(k),
                "worker": run.workers[k] if k < len(run.workers) else None,
                **(run.shard_info[k] if k < len(run.shard_info) else {}),
                "sessions": pop.sessions,
                "first_session": plan.first_session,
                "adopted_from": plan.adopted_from,
                "awake": getattr(pop, "awake", None),  # a turnover's
                "target_rps": getattr(pop, "target_rps", None),  # a turnover's, a cold-resume's
                "phase": status.get("phase"),
                "start_skew_ms": status.get("start_skew_ms"),
                "actors_created": final.get("created", status.get("actors_created", 0)),
                "actors_deleted": final.get("deleted", status.get("actors_deleted", 0))
                + (swept.deleted if swept else 0),
            }
        )
    return out


def status_document(run: ShardedRun, *, final: bool) -> dict[str, Any]:
    doc = run_status_document(run, final=final)
    rows = shard_rows(run)
    misconfigured: dict[str, str] = {}
    for status in run.stream.status if run.stream else []:
        for code, line in (status.get("misconfigured") or {}).items():
            misconfigured.setdefault(code, line)
    doc.update(
        phase=run.phase,
        stats_generated=final and run.stream is not None,
        actors_created=sum(r["actors_created"] for r in rows),
        actors_deleted=sum(r["actors_deleted"] for r in rows),
        leaked_actors=run.leaks,
        misconfigured=misconfigured,
        shards=rows,
        generator={
            "shards": run.count,
            "cluster": run.params.generator.cluster or "local",
            "lost": sorted(run.lost),
            "min_shards": run.params.generator.shards_needed(len(run.plans_of_first_split)),
            "losses": [
                {
                    "shard": loss.shard,
                    "at_unix": loss.at,
                    "reason": loss.reason,
                    "carried_on_unix": loss.back,
                    "carried_by": loss.carried_by,
                    "stages_s": loss.stages,  # swept, opened, preflight, register, fill
                }
                for loss in (run.stream.losses if run.stream else [])
            ],
            # The common intended t0 and how late each shard's loop reached its start.
            "t0_unix": run.shard_start_unix.get(0),
            "start_skew_ms": {
                str(k): row["start_skew_ms"]
                for k, row in enumerate(rows)
                if row["start_skew_ms"] is not None
            },
            "merge_ms_per_delta": (
                1e3 * run.stream.merge_seconds / run.stream.merged_deltas
                if run.stream and run.stream.merged_deltas
                else None
            ),
        },
    )
    return doc


def progress_line(run: ShardedRun) -> str:
    rec = run.recorder
    now = rec.now_ns()
    recent = rec.window(now - 10 * NS, now)
    states: Counter[str] = Counter()
    for status in run.stream.status if run.stream else []:
        states.update(status.get("states") or {})
    parts = [f"{run.phase:<8}", f"shards {len(run.live_shards)}/{run.count}"]
    if states:
        parts.append("sessions " + " ".join(f"{k}={v}" for k, v in sorted(states.items())))
    # The wake row by its name alone: its kind is the upstream runner's (docs/SPEC.md §5.1).
    wakes = next((s for (_, n), s in recent.rows.items() if n == "TimeToWake"), None)
    if wakes is not None and wakes.count and recent.duration_s:
        parts.append(
            f"swaps {wakes.count / recent.duration_s:.1f}/s "
            f"TimeToWake p50 {wakes.response.quantile(0.5):.0f}ms "
            f"p99 {wakes.response.quantile(0.99):.0f}ms"
        )
    failures = sum(s.failures for (kind, _), s in recent.rows.items() if kind != "generator")
    parts.append(f"errors(10s) {failures}")
    return "  ".join(parts)


def write_final_files(run: ShardedRun) -> None:
    """run_files.write_final_files for a sharded run (called in a thread, after every shard
    stopped and its last seconds were merged); a write that fails ends the run `failed`
    with the reason and the rest still lands where it can (run_files.seal)."""
    seal(run, functools.partial(_write_stats, run), status_document)


def _write_stats(run: ShardedRun, attempt: Attempt) -> None:
    if run.stream is None:
        return
    rec = run.recorder
    rec.flush(now_ns() + NS)  # nothing is left out: every shard has stopped
    whole = rec.window_seconds(rec.first_second, rec.closed_until)
    history = run.history.render_closed_files(rec, sessions(run))
    write_stats_files(run, attempt, whole, history, population_rows(run))
    run_dir = run.run_dir
    for k in range(run.stream.count):
        name = f"shards/{k}/health.json"
        health = shard_health(run, k)
        attempt(name, functools.partial(run_dir.write_json, name, health))


def shard_health(run: ShardedRun, k: int) -> dict[str, Any]:
    assert run.stream is not None
    rows = shard_rows(run)
    counts = run.finals.get(k, {}).get("counts")  # each row's requests, as the shard saw them
    return {**rows[k], **run.stream.health_summary(k), "counts": counts}


def level_segments(run: ShardedRun) -> list[tuple[int, float]]:
    """(start, level) of each load level from the common t0 on."""
    assert run.t0_ns is not None
    segments = [(run.t0_ns, 1.0)]
    for at, level in run.level_changes:
        if at <= run.t0_ns:  # the first hold's own level
            segments = [(run.t0_ns, level)]
        else:
            segments.append((at, level))
    return segments


def population_rows(run: ShardedRun) -> dict[str, dict[str, Any]]:
    """The turnover_window rows over the merged stream, one per level: whole seconds from the
    common t0 to the stop of the load, at the whole run's target (TurnoverPopulation
    .summary_rows)."""
    if run.params.population.kind != "turnover" or run.t0_ns is None:
        return {}
    population = run.params.population
    return level_rows(
        run.recorder,
        level_segments(run),
        run.load_stopped_ns or now_ns(),
        target_rps=population.target_rps,
        awake=population.awake,
    )


def load_problem(run: ShardedRun) -> str | None:
    """The merged resident set's mean gap over the turnover, against RESIDENT_TOLERANCE."""
    population = run.params.population
    if population.kind != "turnover" or run.t0_ns is None or not population.awake:
        return None
    start = run.t0_ns + NS - 1
    window = run.recorder.window(start, max(run.load_stopped_ns or now_ns(), start))
    if not window.duration_s:
        return None
    mean = window.row(*RESIDENT_SHORTFALL_ROW).events / window.duration_s
    if mean <= RESIDENT_TOLERANCE * population.awake:
        return None
    return shortfall_line(mean, population.awake, f"{window.duration_s:.0f} s")


__all__ = ["progress_line", "sessions", "status_document", "write_final_files"]
