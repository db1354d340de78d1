"""The campaign's upper bounds (issue #11, docs/SPEC.md §6; RunParams has the engine's).

Past them a value is a typo, not a plan: `hold_minutes=1e7` once hung building the window
list, and `factor 1.0001` with `resolution 1e-9` once made weeks of probes. Each is checked
from arithmetic before anything is built.
"""

from __future__ import annotations

MAX_HOLD_MINUTES = 7 * 24 * 60.0  # a week at one level
MAX_WINDOW_SECONDS = 7 * 86_400.0
MAX_WINDOWS = 10_000  # per campaign, all levels
# The capacity search's own bound (docs/SPEC.md §6.7): its worst case (campaign/search.py's
# most_probes × each probe's settle + window) must fit in a week, as a hold at one level
# must, and in MAX_PROBES probes (one Prefect task each). `factor 1.0001` with
# `resolution 1e-9` was once taken: tens of thousands of probes, weeks of them.
MAX_SEARCH_SECONDS = MAX_HOLD_MINUTES * 60.0
MAX_PROBES = 1_000
MAX_LEVELS = 100
# Bounds on the density frontier's node figures: past them a value is a typo, not a fleet.
MAX_NODES = 100_000
MAX_NODE_VCPUS = 100_000.0
MAX_NODE_MEMORY = 1 << 60  # an exbibyte
MAX_RULES = 100  # thresholds, abort rules
MAX_RULE_CHARS = 500
MAX_ABORT_DELAY_S = 7 * 86_400.0
MAX_RETRY_DELAY_S = 300.0  # the first; it doubles per attempt
