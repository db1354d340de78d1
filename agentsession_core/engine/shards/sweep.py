"""Deleting a lost shard's actors from the coordinator (docs/SPEC.md §3.5, §5.8).

A shard whose worker died cannot clean up after itself. The coordinator holds the shared
ledger's copy of the names each shard published as it created them (ShardDelta.journal) and
deletes those, plus whatever the atespace lists under the shard's prefix (actors created
after its last delivery). Published names the listing lacks may never have been created:
they are deleted as unconfirmed, so a NOT_FOUND is not counted as a deletion.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from agentsession_core.engine.ledger import ActorLedger
from agentsession_core.engine.params import CleanupParams
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")


@dataclass
class Swept:
    """What the coordinator deleted of one lost shard's actors, and what it could not."""

    deleted: int = 0
    leaks: list[dict[str, str]] = field(default_factory=list)


async def sweep(
    substrate: Substrate,
    atespace: str,
    owns: Callable[[str], bool],
    label: str,
    published: set[str],
    cleanup: CleanupParams,
    into: Swept,
) -> set[str]:
    """Delete the actors of the shard that `owns` them (its name prefix; for a part of a lost
    shard's sessions, their ids: ShardPlan.owns), `label` in the log line; returns the
    published names still standing (the rest are gone and need no second sweep)."""
    ledger = ActorLedger(atespace)
    for name in published:
        ledger.creating(name)
    try:
        for actor in await substrate.list_actors(atespace):
            if owns(actor.name):
                ledger.creating(actor.name)
                ledger.created_actor(actor.name)
    except SubstrateError as exc:
        log.warning("%s: atespace listing failed (%s): published names only", label, exc)
    into.leaks = await ledger.cleanup(
        substrate, concurrency=cleanup.concurrency, timeout=cleanup.timeout_seconds
    )
    into.deleted += ledger.deleted
    log.info("%s: the coordinator deleted %d actors of a lost shard", label, ledger.deleted)
    return published & set(ledger.live)


__all__ = ["Swept", "sweep"]
