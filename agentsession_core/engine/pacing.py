"""Intended-time schedules: seeded random streams, think jitter, Poisson gaps, spawn ramps.

The populations sleep until each intended time (RunContext.wait_until) and never wait for
the work they released (open model, no coordinated omission): lateness shows up as start lag
and as generator/DispatchLag, never as a thinner schedule.

Reproducibility (docs/SPEC.md §5.5): every random choice comes from ``stream(run_seed, *parts)``, a
``random.Random`` seeded from sha256 of the run seed and the parts, so a session's stream
depends only on (seed, session id, purpose), not on sharding or scheduling order.
"""

from __future__ import annotations

import hashlib
import random

NS_PER_S = 1_000_000_000


def derive_seed(run_seed: int, *parts: str | int) -> int:
    """A stable 64-bit seed for (run_seed, *parts); never Python's salted hash()."""
    text = "\x1f".join(
        [f"i{run_seed}"] + [f"i{p}" if isinstance(p, int) else f"s{p}" for p in parts]
    )
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def stream(run_seed: int, *parts: str | int) -> random.Random:
    """The random stream for one purpose, e.g. stream(seed, "session", 17, "think")."""
    return random.Random(derive_seed(run_seed, *parts))


def think_jitter(rng: random.Random) -> float:
    """The think-time multiplier U[0.8, 1.2) (docs/SPEC.md §3.3)."""
    return 0.8 + 0.4 * rng.random()


def poisson_gap_ns(rng: random.Random, rate_per_s: float) -> int:
    """The gap to the next arrival of a Poisson process (exponential, mean 1/rate)."""
    return int(rng.expovariate(rate_per_s) * NS_PER_S)


def ramp_time_ns(start_ns: int, rate_per_s: float, index: int) -> int:
    """The intended time of the index-th start of a ramp at `rate_per_s` (spawns)."""
    return start_ns + int(index * NS_PER_S / rate_per_s)
