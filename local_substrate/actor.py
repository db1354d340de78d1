"""One actor of the local substrate as the server keeps it (docs/SPEC.md §2.1): its status,
where its state is (the worker running it, or holding it paused), its lock, its requests in
flight, its worker selector and the pool it is bound to. Its lifecycle is actors.py's, on the
state machine it shares with the in-memory fake (agentsession_core/substrate/actor_machine.py,
whose ActorLife holds the status, version, lock and requests in flight)."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agentsession_core.substrate.actor_machine import ActorLife
from agentsession_core.substrate.protocol import MATCH_LABELS_FIELD, WORKER_SELECTOR_FIELD
from local_substrate.pool import WorkerProc


@dataclass(eq=False)
class Actor(ActorLife):
    template: tuple[str, str]
    limit: int | None
    worker: WorkerProc | None = None
    paused_on: WorkerProc | None = None
    # What the ate wire's ResourceMetadata carries besides the name (ate_control.py).
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_ns: int = field(default_factory=time.time_ns)
    # Its worker selector's labels (CreateActor), and the pool it is bound to once it has
    # run on one (None: not yet, or the substrate has no pools).
    selector: dict[str, str] = field(default_factory=dict)
    pool: str | None = None
    placements: Counter[str] = field(default_factory=Counter)  # wakes by the worker's pool

    def describe(self) -> dict[str, Any]:
        where = self.worker or self.paused_on
        return {
            "atespace": self.atespace,
            "name": self.name,
            "status": self.status,
            "worker": where.name if where else None,
            "version": self.version,
            "template": {"namespace": self.template[0], "name": self.template[1]},
            WORKER_SELECTOR_FIELD: {MATCH_LABELS_FIELD: dict(self.selector)},
            "pool": self.pool,
            "placements": dict(self.placements),
        }
