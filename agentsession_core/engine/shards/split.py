"""One run's population split into K shards, exactly.

Every total a run asks for is the sum of its shards' shares: sessions, awake and fill wakes
as whole numbers (the remainder spread over the first shards), swaps per second as whole
swaps spread the same way with the fraction riding on the last shard, so the shards' ticks
add up to the single process's tick by tick; at a campaign level the level's total is split
again, never each shard's share multiplied and rounded on its own. The turns population
splits its sessions (each keeps its own turns_per_hour), so its turns split with them.

A mix of scripts stays exact across the shards (engine/script_mix.py): the run's sessions are
given their scripts once, from the run's seed, and session i is dealt to shard i mod K (its
`labels`), so every script's sessions and residents add up over the shards to the single
process's.

Each shard gets its own seed, derived from (run seed, K, k): the same seed and K give the
same schedule, shard by shard. Actor names stay disjoint through a prefix per shard
(`agent-s<k>-<session>`), all in the run's one atespace.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from agentsession_core.engine.pacing import derive_seed
from agentsession_core.engine.params import GeneratorParams, RunParams, TargetParams
from agentsession_core.engine.population_params import TurnoverParams, settings_of
from agentsession_core.engine.script_mix import assign
from agentsession_core.script.mix import entries

_TARGET_FIELDS = set(TargetParams.model_fields)


@dataclass(frozen=True)
class ShardPlan:
    """What shard `index` of `count` runs: its own RunParams (its share, its seed, the shared
    target and atespace) and the prefix of its actor names."""

    index: int
    count: int
    params: RunParams
    actor_prefix: str
    # Sessions are numbered from here (names `<actor_prefix>-<id>`, streams by (seed, id)):
    # 0 for a shard of the first split; a lost shard's sessions re-planned over the survivors
    # keep their ids, names and seed, each part from where the last one ended (replan).
    first_session: int = 0
    adopted_from: int | None = None  # the lost shard whose sessions this part carries on

    def owns(self, name: str) -> bool:
        """Whether actor `name` is one of this plan's (`<prefix>-<id>[-r<n>]`): a shard of the
        first split owns its whole prefix; a part of a lost shard's sessions only its ids."""
        if not name.startswith(f"{self.actor_prefix}-"):
            return False
        if self.adopted_from is None:
            return True
        sid = name[len(self.actor_prefix) + 1 :].split("-", 1)[0]
        count = self.params.population.sessions
        return sid.isdigit() and self.first_session <= int(sid) < self.first_session + count

    # Each of its sessions' script in a mix, by position from first_session (None: one
    # script).
    labels: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ShardLevel:
    """A load level as one shard applies it: turnover sets its own share of the swaps
    (`target_rps`) at multiplier 1; closed and turns apply `multiplier` to their own base."""

    multiplier: float
    target_rps: float | None = None


def is_sharded(params: RunParams) -> bool:
    """Whether `params` asks for more than this one process (or for a Dask cluster)."""
    generator = params.generator
    if generator.cluster is not None:
        return True
    if generator.shards == "auto":
        return shard_count(generator, params.population.sessions) > 1
    return generator.shards > 1


def shard_count(generator: GeneratorParams, sessions: int, cores: int | None = None) -> int:
    """K for a run: the number asked for, or `auto` = one per core (at most one per session)."""
    if generator.shards != "auto":
        return int(generator.shards)
    cores = cores if cores is not None else os.cpu_count() or 1
    return max(1, min(cores, sessions))


def split_int(total: int, count: int) -> list[int]:
    """`total` in `count` whole shares that differ by at most one, the larger ones first."""
    base, extra = divmod(total, count)
    return [base + (1 if i < extra else 0) for i in range(count)]


def split_rate(total: float, count: int) -> list[float]:
    """A rate in `count` shares that add up to exactly `total`: whole units spread as
    split_int, the fraction on the last shard (which has the fewest whole units)."""
    whole = math.floor(total)
    shares: list[float] = [float(n) for n in split_int(whole, count)]
    # total - (an integer below it) is exact in binary floating point, so the sum is too.
    shares[-1] = total - sum(shares[:-1])
    return shares


def shard_seed(seed: int, count: int, index: int) -> int:
    """Shard `index`'s seed: a stable function of (run seed, K, k), never Python's hash()."""
    return derive_seed(seed, "shard", count, index)


def actor_prefix(index: int) -> str:
    return f"agent-s{index}"


def plan_shards(
    params: RunParams,
    count: int,
    *,
    target: dict[str, Any],
    reference: dict[str, Any] | None = None,
) -> list[ShardPlan]:
    """K shard plans for `params`. `target` overrides the target section for every shard (the
    coordinator's substrate URL and the run's atespace); in a paired run `reference` does the
    same for the reference arm's (each shard drives both arms: docs/SPEC.md §6.8)."""
    if count < 1:
        raise ValueError("at least one shard")
    pop = params.population
    if count > pop.sessions:
        raise ValueError(f"{count} shards for {pop.sessions} sessions: one session each at least")
    labels = _labels(params)
    return [
        ShardPlan(
            k,
            count,
            _shard_params(params, share, shard_seed(params.seed, count, k), target, reference),
            actor_prefix(k),
            labels=None if labels is None else tuple(labels[k::count]),
        )
        for k, share in enumerate(_shares(pop, count))
    ]


def replan(lost: ShardPlan, survivors: int, first_index: int) -> list[ShardPlan]:
    """Lost shard `lost`'s sessions split exactly over `survivors` parts (at most one per
    session), numbered from `first_index`. Each part keeps the lost shard's seed, actor
    prefix and session ids, so a session re-created there is the same session (its name,
    its streams), never a new one beside the old."""
    pop = lost.params.population
    parts = max(1, min(survivors, pop.sessions))
    plans = []
    first = lost.first_session
    for j, share in enumerate(_shares(pop, parts)):
        values = lost.params.model_dump()
        values["population"] = {**values["population"], **share}
        offset = first - lost.first_session
        plan = ShardPlan(
            first_index + j,
            lost.count,
            RunParams.model_validate(values),
            lost.actor_prefix,
            first_session=first,
            adopted_from=lost.index,
            labels=None
            if lost.labels is None
            else lost.labels[offset : offset + share["sessions"]],
        )
        plans.append(plan)
        first += share["sessions"]
    return plans


def _shares(pop: Any, count: int) -> list[dict[str, Any]]:
    """The population's totals in `count` exact shares (the module docstring): the fields
    its kind has."""
    fields = type(pop).model_fields
    shares: list[dict[str, Any]] = [
        {"sessions": n, "spawn_rate": pop.spawn_rate / count}
        for n in split_int(pop.sessions, count)
    ]
    parts: dict[str, list[Any]] = {}
    if "awake" in fields:
        parts["awake"] = split_int(pop.awake, count)
    if "target_rps" in fields:
        parts["target_rps"] = split_rate(pop.target_rps, count)
    if "fill_concurrency" in fields:
        parts["fill_concurrency"] = [max(1, n) for n in split_int(pop.fill_concurrency, count)]
    for name, values in parts.items():
        for share, value in zip(shares, values, strict=True):
            share[name] = value
    return shares


def _shard_params(
    params: RunParams,
    share: dict[str, Any],
    seed: int,
    target: dict[str, Any],
    reference: dict[str, Any] | None = None,
) -> RunParams:
    base = {name: getattr(params, name) for name in RunParams.model_fields}
    values: dict[str, Any] = {
        **{name: value for name, value in base.items() if not hasattr(value, "model_dump")},
        "seed": seed,
        "metrics_port": None,  # the coordinator serves /metrics for the merged stream
        # A shard's target is the engine's TargetParams: a campaign's own target fields
        # (token_secret, resolved by the flow before the run starts) are not the engine's.
        "target": {**params.target.model_dump(include=_TARGET_FIELDS), **target},
        "population": {**params.population.model_dump(), **share},
        "cleanup": params.cleanup.model_dump(),
        "generator": GeneratorParams().model_dump(),  # a shard is one process
    }
    if params.reference is not None:
        values["reference"] = {
            **params.reference.model_dump(include=_TARGET_FIELDS),
            **(reference or {}),
        }
    return RunParams.model_validate(values)


def _labels(params: RunParams) -> list[int] | None:
    """Every session's script in a mix, drawn for the whole run (None: one script)."""
    weights = [weight for _, weight in entries(params.script)]
    if len(weights) < 2:
        return None
    pop = params.population
    return assign(params.seed, pop.sessions, pop.awake if pop.kind == "turnover" else 0, weights)


def shard_levels(params: RunParams, plans: list[ShardPlan], level: float) -> list[ShardLevel]:
    """What each shard applies for the run at `level` × its base load (docs/SPEC.md §4.4):
    the level's total split exactly, as at the start."""
    pop = params.population
    count = len(plans)
    if any(plan.adopted_from is not None for plan in plans) or count != plans[0].count:
        return _levels_after_a_loss(params, plans, level)
    if pop.kind == "turnover":
        return [ShardLevel(1.0, rate) for rate in split_rate(pop.target_rps * level, count)]
    if pop.kind == "closed":
        # The single process's rule (ClosedPopulation.set_level): round(sessions × level).
        wanted = split_int(max(1, round(pop.sessions * level)), count)
        return [
            ShardLevel(n / plan.params.population.sessions)
            for n, plan in zip(wanted, plans, strict=True)
        ]
    return [ShardLevel(level) for _ in plans]  # turns: the rate is per session


def _levels_after_a_loss(
    params: RunParams, plans: list[ShardPlan], level: float
) -> list[ShardLevel]:
    """shard_levels over the live plans once a lost shard's sessions moved (replan): each plan
    its own base × level, the last one taking what rounding left, so the sum is the level's
    total still (the survivors carry every session)."""
    pop = params.population
    if pop.kind == "turnover":
        rates = [
            settings_of(plan.params.population, TurnoverParams).target_rps * level for plan in plans
        ]
        rates[-1] = max(0.0, pop.target_rps * level - sum(rates[:-1]))
        return [ShardLevel(1.0, rate) for rate in rates]
    if pop.kind == "closed":
        wanted = max(1, round(pop.sessions * level))
        shares = [math.floor(plan.params.population.sessions * level) for plan in plans]
        for k in range(wanted - sum(shares)):  # the remainder, one each from the first
            shares[k % len(shares)] += 1
        return [
            ShardLevel(n / plan.params.population.sessions)
            for n, plan in zip(shares, plans, strict=True)
        ]
    return [ShardLevel(level) for _ in plans]


__all__ = [
    "ShardLevel",
    "ShardPlan",
    "actor_prefix",
    "plan_shards",
    "replan",
    "shard_count",
    "shard_levels",
    "shard_seed",
    "split_int",
    "split_rate",
]
