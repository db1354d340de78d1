"""A sharded paired run's reference arm, as the sharded load holds it (docs/SPEC.md §6.8).

Every shard drives both arms (shard.py); what is the run's, not a shard's, stays here, as
the candidate's does in the load: the reference's substrate (an embedded one started
once, here, or its URL), the one probe that watches it, its server figures (booked into the
merged recorder under `:arm=reference` names), the URLs every shard's reference engine is
given, and the deletion of a lost shard's reference actors. It keeps the surface a paired
Run's ReferenceArm has (`server`, `failure`, `status`, `watchdog`), so the campaign, the
artifacts and `Arms` read a sharded pair exactly as a single process's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentsession_core.engine.engine import PreflightError
from agentsession_core.engine.reference_arm import REFERENCE_LOG, ReferenceArm, arm_line
from agentsession_core.engine.server_source import open_server_metrics
from agentsession_core.engine.shards.sweep import Swept, sweep
from agentsession_core.engine.target import client_for, local_endpoints, local_substrate
from agentsession_core.engine.watchdog import Watchdog
from agentsession_core.errors import one_line
from agentsession_core.measure.stats import REFERENCE
from agentsession_core.substrate.interface import Substrate

if TYPE_CHECKING:
    from agentsession_core.engine.params import RunParams
    from agentsession_core.engine.shards.split import ShardPlan
    from agentsession_core.measure.recorder import Recorder


class ShardedReference(ReferenceArm):
    """The reference arm of a sharded load: its substrate, probe and server figures here, its
    engines in the shards."""

    def __init__(
        self,
        params: RunParams,
        recorder: Recorder,
        atespace: str,
        books: Callable[[], list[dict[str, Any]]],
    ) -> None:
        super().__init__(params, recorder, atespace)
        self.books = books  # each shard's `reference` books (status.json), read when written
        self.client: Substrate | None = None
        self.swept: dict[int, Swept] = {}

    async def open_target(self, stack: contextlib.AsyncExitStack, logs: Path) -> dict[str, Any]:
        """Start or reach the reference's substrate on the run's exit stack; the target
        fields every shard's reference engine gets. One that does not come up is a refusal
        naming the arm."""
        target = self.params.target
        url, router, embedded = target.substrate, target.router, None
        if url is None:  # started once, here, as the candidate's is
            try:
                local = await stack.enter_async_context(
                    local_substrate(target, logs / REFERENCE_LOG)
                )
            except (RuntimeError, OSError) as exc:
                line = arm_line(REFERENCE, f"substrate local: {one_line(exc)}")
                raise PreflightError(line) from None
            url, router = local_endpoints(local, target)
            embedded = local.url
        client = self.client = client_for(target, url, router)
        stack.push_async_callback(client.aclose)
        self.server = await stack.enter_async_context(
            open_server_metrics(self.params, self.recorder, embedded)
        )
        return {"substrate": url, "router": router, "atespace": self.atespace}

    def watch(
        self,
        on_back: Callable[[], None],
        background: Callable[[Coroutine[Any, Any, None], str], None],
    ) -> None:
        """The run's one probe of the reference's substrate (the shards run none); its
        failure ends the run naming the arm (`failure`)."""
        assert self.client is not None
        self.watchdog = Watchdog(self.client, self.params, on_back=on_back)
        background(self.watchdog.run(), "reference-watchdog")

    async def sweep(self, k: int, plan: ShardPlan, published: set[str]) -> set[str]:
        """Delete lost shard `k`'s reference actors (sweep.py); the names still standing."""
        assert self.client is not None
        return await sweep(
            self.client,
            self.atespace,
            plan.owns,
            arm_line(REFERENCE, f"shard {k} ({plan.actor_prefix}-*)"),
            published,
            self.params.cleanup,
            self.swept.setdefault(k, Swept()),
        )

    def swept_leaks(self) -> list[dict[str, str]]:
        return [{**leak, "arm": REFERENCE} for s in self.swept.values() for leak in s.leaks]

    def failure(self) -> str | None:
        if self.watchdog is not None and self.watchdog.failure:
            return arm_line(REFERENCE, self.watchdog.failure)
        return None  # a shard's own failure names its arm in the shard's status

    def status(self) -> dict[str, Any]:
        """status.json's `reference`: the arm's books, summed over the shards."""
        shards = self.books()
        created = sum(int(books.get("actors_created", 0)) for books in shards)
        deleted = sum(int(books.get("actors_deleted", 0)) for books in shards)
        misconfigured: dict[str, Any] = {}
        leaked = self.swept_leaks()
        for books in shards:
            misconfigured.update(books.get("misconfigured") or {})
            leaked += books.get("leaked_actors") or []
        swept = sum(s.deleted for s in self.swept.values())
        return {
            "arm": REFERENCE,
            "atespace": self.atespace,
            "actors_created": created,
            "actors_deleted": deleted + swept,
            "leaked_actors": leaked,
            "misconfigured": misconfigured,
        }


__all__ = ["ShardedReference"]
