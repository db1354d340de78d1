"""The `agent-substrate` preset of server.queries (docs/SPEC.md §5.9): where a wake's time goes
on a real cluster, read from the platform's own Prometheus series (names per its
troubleshooting guide; docs/guide/server-metrics.md says what each phase covers).

Each wake phase is a histogram in seconds. The preset asks Prometheus, once per window, for the
window's increase of the phase's buckets (`sum by (le)`) and of its sum; `wake_split.py` turns
those into a count, a mean and percentiles, by the guide's rules:

- **failures left out**: a failing phase holds its timer until it gives up, so each selector
  keeps the successful observations only (`error_type=""` on the whole resume,
  `ate_failure_reason=""` on the node's restore, `assigned` for scheduling, the `ok` outcome at
  the router); a matcher `=~"|ok"` also matches a series that lacks the label, so a platform
  that does not label an outcome still answers;
- **overlapping phases never added**: the phases nest (the router's wake holds the parking,
  which holds the resume, which holds scheduling and the restore), so each says which phase it
  lies `within` and nothing ever sums them;
- **a saturated last bucket read as a mean**: see `wake_split.py`;
- per-node histograms are summed across nodes (`sum by (le)`): each node observes only its
  own actors; the preset reads no fleet-wide gauge, which would need `max`.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentsession_core.measure.server_metrics import WINDOW

PRESET = "agent-substrate"


@dataclass(frozen=True)
class Phase:
    """One histogram of where a wake's (or a park's) time goes."""

    name: str  # the figure's series name: `server.resume_p99`
    family: str  # the Prometheus histogram, in seconds
    selector: str  # label matchers, failures left out
    within: str | None  # the phase that holds this one (never added to it)
    meaning: str
    by: str | None = None  # a label kept apart: one row per value (an outcome)

    @property
    def bucket_query(self) -> str:
        keep = "le" if self.by is None else f"le, {self.by}"
        return f"sum by ({keep}) (increase({self.family}_bucket{{{self.selector}}}[{WINDOW}]))"

    @property
    def sum_query(self) -> str:
        keep = "" if self.by is None else f" by ({self.by})"
        return f"sum{keep} (increase({self.family}_sum{{{self.selector}}}[{WINDOW}]))"

    @property
    def bucket_key(self) -> str:
        return f"{self.name}_bucket"

    @property
    def sum_key(self) -> str:
        return f"{self.name}_seconds"


_RESUME = 'ate_actor_operation_name="resume"'
PHASES = (
    Phase(
        "wake_router",
        "atenet_router_route_duration_seconds",
        'ate_router_resume="triggered", ate_router_outcome=~"|ok"',
        None,
        "the wake the user paid for: the router's routing of a request that triggered a resume",
    ),
    Phase(
        "parking",
        "atenet_router_parking_wait_duration_seconds",
        "",
        "wake_router",
        "time a request was parked at the router while its actor woke, by how the wait ended",
        by="outcome",
    ),
    Phase(
        "resume",
        "ate_actor_lifecycle_operation_duration_seconds",
        f'{_RESUME}, error_type=""',
        "parking",
        "the whole resume at the control plane, the scheduler included",
    ),
    Phase(
        "scheduling",
        "ate_scheduler_assignment_duration_seconds",
        'ate_scheduler_outcome="assigned"',
        "resume",
        "finding a worker for the actor (assigned ones; a scheduling that found no room is "
        "counted apart, as no_free_worker)",
    ),
    Phase(
        "restore",
        "ate_actor_restore_duration_seconds",
        'ate_snapshot_phase="total", ate_failure_reason=""',
        "resume",
        "the node's restore of the snapshot",
    ),
    Phase(
        "checkpoint",
        "ate_actor_checkpoint_duration_seconds",
        'ate_snapshot_phase="total"',
        None,
        "the node's checkpoint when an actor is parked (not part of a wake)",
    ),
)

# Counters of the window beside the phases (gauges of one point each: the window's increase).
RESUME_FAILURES = "resume_failures"
NO_FREE_WORKER = "no_free_worker"
# The scheduler's outcome when no worker had room, under both of its names: `no_capacity` on
# newer platforms, `no_free_worker` on older ones. Read together (and split by name in the
# count's `by`), a newer platform's capacity faults are not read as 0.
NO_ROOM_OUTCOMES = ("no_capacity", "no_free_worker")
CRASHES = "crashes"
SNAPSHOT_BYTES = "snapshot_bytes"
COUNTS = {
    RESUME_FAILURES: "sum by (error_type) (increase(ate_actor_lifecycle_operation_duration_seconds"
    f'_count{{{_RESUME}, error_type!=""}}[{WINDOW}]))',
    NO_FREE_WORKER: "sum by (ate_scheduler_outcome) (increase("
    "ate_scheduler_assignment_duration_seconds_count"
    f'{{ate_scheduler_outcome=~"{"|".join(NO_ROOM_OUTCOMES)}"}}[{WINDOW}]))',
    CRASHES: f"sum by (ate_failure_reason) (increase(ate_actor_crashes_total[{WINDOW}]))",
    # Checkpoint MB/s is this over the checkpoint's seconds (both the window's increase).
    SNAPSHOT_BYTES: f"sum by (file_name) (increase(atelet_snapshot_size_bytes_sum[{WINDOW}]))",
}
# The server's records of successful resumes, reconciled with the client's successful wakes.
RECORDS_PHASE = "resume"


def preset_queries(name: str) -> dict[str, str]:
    """The server.queries a preset stands for."""
    if name != PRESET:
        raise ValueError(f"unknown server.preset {name!r} (known: {PRESET})")
    out: dict[str, str] = {}
    for phase in PHASES:
        out[phase.bucket_key] = phase.bucket_query
        out[phase.sum_key] = phase.sum_query
    out.update(COUNTS)
    return out


__all__ = [
    "COUNTS",
    "CRASHES",
    "NO_FREE_WORKER",
    "NO_ROOM_OUTCOMES",
    "PHASES",
    "PRESET",
    "RECORDS_PHASE",
    "RESUME_FAILURES",
    "SNAPSHOT_BYTES",
    "Phase",
    "preset_queries",
]
