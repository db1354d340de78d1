"""Which session runs which script of a mix (docs/SPEC.md §1.6): exact shares, seeded order.

`shares` splits a whole number by weight with the largest-remainder rule, so the shares add up
to it exactly and each is within one of its quota. `assign` gives every session of a run its
script: the first `awake` sessions (turnover's resident set, filled in session order) hold
exactly `shares(awake, session shares)` of each script and all the sessions exactly
`shares(sessions, weights)`; each part is shuffled from the run's seeded stream, so the same
seed gives the same assignment. Taking the residents' shares from the sessions' (not from the
weights again) keeps every script's residents within its sessions (largest remainder alone can
give a script fewer seats for a larger total).

A sharded run deals session i to shard i mod K (engine/shards/split.py): shard k's first
split_int(awake, K)[k] sessions are then exactly the run's first `awake` sessions that fall to
it, so the run's resident shares and session shares stay exact across the shards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentsession_core.engine.pacing import stream
from agentsession_core.measure.stats import TIME_TO_WAKE_ROW, RowKey, script_row
from agentsession_core.script import Script
from agentsession_core.script.mix import ScriptMix


@dataclass(frozen=True, slots=True)
class ScriptPart:
    """One script of a run as its sessions run it: the script and the rows it books."""

    index: int
    script: Script
    step_rows: tuple[str, ...]  # the row of each step, in step order
    time_to_wake: RowKey | None  # the script's own TimeToWake beside the overall one (a mix)


def parts_of(mix: ScriptMix) -> tuple[ScriptPart, ...]:
    """Each script's rows (docs/SPEC.md §5.1): a run of one script keeps the plain names."""
    out = []
    for index, script in enumerate(mix.scripts):
        steps = tuple(f"Step_{step.name}" for step in script.steps)
        if not mix.mixed:
            out.append(ScriptPart(index, script, steps, None))
            continue
        rows = tuple(script_row(row, script.name) for row in steps)
        wake = (TIME_TO_WAKE_ROW[0], script_row(TIME_TO_WAKE_ROW[1], script.name))
        out.append(ScriptPart(index, script, rows, wake))
    return tuple(out)


def shares(total: int, weights: Sequence[int]) -> list[int]:
    """`total` split by `weights` (largest remainder; ties to the earlier entry). A zero
    weight gets nothing; all zero weights give all zeros."""
    whole = sum(weights)
    if total < 0 or any(w < 0 for w in weights):
        raise ValueError("shares of a negative number or by a negative weight")
    if whole == 0:
        return [0 for _ in weights]
    floors = [total * w // whole for w in weights]
    left = total - sum(floors)
    # Remainders compared exactly, as integers over the common denominator `whole`.
    order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in order[:left]:
        floors[i] += 1
    return floors


def assign(seed: int, sessions: int, awake: int, weights: Sequence[int]) -> list[int]:
    """The script index of each session 0 … sessions-1 (module docstring)."""
    if not 0 <= awake <= sessions:
        raise ValueError(f"awake {awake} is not within 0 … {sessions} sessions")
    everyone = shares(sessions, weights)
    residents = shares(awake, everyone)
    rng = stream(seed, "script-mix")
    first = [i for i, n in enumerate(residents) for _ in range(n)]
    rest = [i for i, n in enumerate(everyone) for _ in range(n - residents[i])]
    rng.shuffle(first)
    rng.shuffle(rest)
    return first + rest


class Dealer:
    """Deals turns to scripts by weight, smoothly (the weighted round-robin of nginx's
    upstreams): over any run of sum(weights) turns each script gets exactly its weight, and
    its turns are spread out, not bunched."""

    def __init__(self, weights: Sequence[int]) -> None:
        self.weights = list(weights)
        self.total = sum(self.weights)
        self.current = [0] * len(self.weights)

    def next(self) -> int:
        if self.total == 0:
            return 0
        for i, weight in enumerate(self.weights):
            self.current[i] += weight
        best = max(range(len(self.current)), key=lambda i: (self.current[i], -i))
        self.current[best] -= self.total
        return best


def counts(labels: Sequence[int], scripts: int) -> list[int]:
    out = [0] * scripts
    for label in labels:
        out[label] += 1
    return out


__all__ = ["Dealer", "ScriptPart", "assign", "counts", "parts_of", "shares"]
