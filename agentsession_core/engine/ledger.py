"""The ledger of actors a run created, and the cleanup that empties it (docs/SPEC.md §3.5).

Every CreateActor that succeeds is written here before anything else can fail, so a run
that stops, is cancelled or crashes can still suspend and delete each of its actors; what
could not be deleted is reported, never silently leaked.

A cleanup against a substrate that is gone must not spend its whole deadline retrying
(issue 29: 116 s of 120 against a killed substrate): UNANSWERED_S without any answer to any
of its calls ends the retries, and every actor left is listed as leaked with the reason (the
watchdog's line too, when it had found the substrate unreachable). A substrate that comes
back within that time (restarted on its store) still has every actor deleted. An actor the
substrate says does not exist is deleted.
"""

from __future__ import annotations

import asyncio
import logging
import time

from agentsession_core.engine.backoff import Backoff, transient
from agentsession_core.engine.watchdog import EVERY_S, MISSES, unanswered
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.interface import Substrate

log = logging.getLogger("agentsession")

# No answer to any cleanup call for this long: the substrate is gone (the watchdog's own
# threshold, MISSES probes EVERY_S apart), and what is left is listed as leaked.
UNANSWERED_S = MISSES * EVERY_S


class ActorLedger:
    def __init__(self, atespace: str) -> None:
        self.atespace = atespace
        self._live: set[str] = set()
        self._unconfirmed: set[str] = set()  # CreateActor sent, no answer yet (or none came)
        self.created = 0
        self.deleted = 0
        self.create_calls = 0  # CreateActor sent, answered or not

    def creating(self, name: str) -> bool:
        """Written before CreateActor is sent: a call that times out or is cancelled may
        still have created the actor, and cleanup must find it (NOT_FOUND counts as gone).
        True when an earlier attempt for this name is still unconfirmed."""
        earlier = name in self._unconfirmed
        self.create_calls += 1
        self._live.add(name)
        self._unconfirmed.add(name)
        return earlier

    def created_actor(self, name: str) -> None:
        self._live.add(name)
        self._unconfirmed.discard(name)
        self.created += 1

    def not_created(self, name: str) -> None:
        """The substrate answered CreateActor with a definite refusal."""
        self._live.discard(name)
        self._unconfirmed.discard(name)

    def deleted_actor(self, name: str) -> None:
        if name in self._live:
            self._live.discard(name)
            if name in self._unconfirmed:
                self._unconfirmed.discard(name)  # never confirmed: not counted either way
            else:
                self.deleted += 1

    async def remove(self, substrate: Substrate, name: str) -> None:
        """SuspendActor then DeleteActor (docs/SPEC.md §3.4 replacement, §3.5 cleanup); an
        actor that is already gone counts as deleted. Raises SubstrateError when it could not be."""
        try:
            await substrate.suspend_actor(self.atespace, name)
        except SubstrateError:
            pass  # a crashed or already-parked actor can still be deleted
        try:
            await substrate.delete_actor(self.atespace, name)
        except SubstrateError as exc:
            if exc.code not in ("NOT_FOUND", "ACTOR_NOT_FOUND"):
                raise
        self.deleted_actor(name)

    @property
    def live(self) -> list[str]:
        return sorted(self._live)

    async def cleanup(
        self,
        substrate: Substrate,
        *,
        concurrency: int,
        timeout: float,
        unreachable: str | None = None,
    ) -> list[dict[str, str]]:
        """Suspend then delete every live actor, `concurrency` at a time, within `timeout`
        seconds overall. A transient failure (a reset, an INTERNAL, an outage) is retried
        with the engine's backoff until the deadline: one failed call must not leave an
        actor behind while the deadline has time left (issue 18). But a substrate that is
        gone is not retried for the whole deadline (issue 29): UNANSWERED_S with no answer to
        any call ends the retries (`unreachable`: the watchdog's line, said in the reason).
        Returns the actors left behind, each with the reason."""
        leaks: dict[str, str] = {}
        gate = asyncio.Semaphore(concurrency)
        started = time.monotonic()
        deadline = started + timeout
        names = self.live
        gone: str | None = None  # why every actor still left is left: the substrate is gone
        last_answer = time.monotonic()
        also = f"; the watchdog: {unreachable}" if unreachable else ""

        def heard(exc: SubstrateError | None) -> None:
            nonlocal gone, last_answer
            now = time.monotonic()
            if exc is None or not unanswered(exc):
                last_answer = now
            elif gone is None and now - last_answer >= UNANSWERED_S:
                gone = (
                    f"not deleted: the substrate gave no answer to cleanup for "
                    f"{now - last_answer:.0f}s (last: {exc}){also}"
                )
                log.error("cleanup: %s; the actors left are listed as leaked", gone)

        async def remove(name: str) -> None:
            backoff = Backoff()
            while gone is None:
                async with gate:
                    if gone is not None:
                        break
                    try:
                        await self.remove(substrate, name)
                        heard(None)
                        leaks.pop(name, None)
                        return
                    except SubstrateError as exc:
                        leaks[name] = str(exc)
                        heard(exc)
                        if not transient(exc):
                            return
                # Waited outside the gate, so a retrying actor leaves its slot to the others.
                wait = backoff.next()
                if time.monotonic() + wait >= deadline:
                    return
                await asyncio.sleep(wait)
            leaks[name] = gone or "not deleted"

        tasks = [asyncio.ensure_future(remove(n)) for n in names]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for task in done:
                if task.exception() is not None:
                    log.error("cleanup: %s", task.exception())
        for name in self.live:
            leaks.setdefault(name, gone or "not deleted within the cleanup deadline")
        # Nothing was created (a refused run): a refusal is one line, not two.
        log.log(
            logging.INFO if names or self.created else logging.DEBUG,
            "cleanup: %d actors deleted, %d left, %.1fs",
            len(names) - len(leaks),
            len(leaks),
            time.monotonic() - started,
        )
        # An actor whose CreateActor never got an answer may not exist at all: say so.
        return [
            {
                "atespace": self.atespace,
                "actor": n,
                "reason": r,
                "created": "unconfirmed" if n in self._unconfirmed else "yes",
            }
            for n, r in leaks.items()
        ]
