"""The names of the local substrate's /metrics families (docs/SPEC.md §5.9): what the
client's server-metrics reader and the campaign's `server.` rules may name. Names only, no
imports, so the client reads them without loading the substrate."""

PREFIX = "agentsession_substrate_"
# Every family metrics.py exports (docs/SPEC.md §5.9), as Prometheus names them.
FAMILIES = (
    "actors",
    "workers",
    "worker_rss_bytes",
    "workers_rss_bytes",
    "server_rss_bytes",
    "paused_bytes",
    "parked_requests",
    "wake_queue",
    "wakes",
    "wake_failures",
    "suspends",
    "pauses",
    "snapshots_written",
    "snapshots_read",
    "snapshot_bytes_written",
    "snapshot_bytes_read",
    "worker_crashes",
    "requests",
)
