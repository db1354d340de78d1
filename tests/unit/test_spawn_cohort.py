"""A spawn cohort that cannot come up whole (docs/SPEC.md §4.5), against the in-memory
FakeSubstrate: a CreateActor quota below the cohort is retried until the cohort's deadline,
the actors that never got made are its failures, the marks it did not reach are booked
failed, and the actors it did make are deleted once it is over."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentsession_core.engine.params import RunParams
from agentsession_core.engine.populations.cohort import INCOMPLETE
from agentsession_core.engine.populations.spawn import DEADLINE, SpawnPopulation
from agentsession_core.measure.stats import ACTOR_READY_ROW, ALL_READY_ROW, READY_MARK, mark_row
from agentsession_core.run.run import Run
from agentsession_core.substrate.fake import FakeSubstrate

ATESPACE = "unit"


def test_a_cohort_over_the_quota_fails_its_missing_actors_and_deletes_the_rest(
    tmp_path: Path,
) -> None:
    substrate = FakeSubstrate(max_actors=3)
    params = RunParams(
        script="smoke",
        seed=5,
        out=str(tmp_path),
        target={"atespace": ATESPACE},
        population={
            "kind": "spawn",
            "sessions": 5,
            "at_once": True,
            "cohort_period_seconds": 600,  # one cohort in the hold
            "cohort_deadline_seconds": 1,
        },
        cleanup={"stop_grace_seconds": 1},
    )
    run = Run(params, substrate=substrate, handle_signals=False)
    books = []
    left: list[object] = []

    async def body() -> None:
        async with run:
            await run.preflight()
            await run.register()
            assert run.load.engine is not None
            population = run.load.engine.population
            assert isinstance(population, SpawnPopulation)
            books.append(await population.cohort(population.ctx.recorder.now_ns()))
            left.extend(await substrate.list_actors(ATESPACE))
            run.finish()

    asyncio.run(body())
    (book,) = books
    assert (book.marks.done, book.marks.failed) == (3, 2)
    totals = run.recorder.totals()
    actor = totals.row(*ACTOR_READY_ROW)
    assert (actor.count, actor.failures) == (5, 2)
    assert actor.errors == {DEADLINE: 2}
    assert totals.row(*mark_row(READY_MARK, 50)).failures == 0  # the 3rd of 5 was ready
    for key in (mark_row(READY_MARK, 90), mark_row(READY_MARK, 99), ALL_READY_ROW):
        stats = totals.row(*key)
        assert (stats.count, stats.failures) == (1, 1) and stats.errors == {INCOMPLETE: 1}
    # The refused CreateActors were retried (each attempt booked), and the three made deleted.
    creates = totals.row("grpc", "CreateActor")
    assert creates.count - creates.failures == 3 and creates.failures >= 2
    assert totals.row("grpc", "DeleteActor").count == 3
    assert left == [] and run.load.engine is not None and run.load.engine.ledger.live == []
    assert run.result is not None and run.result.status == "completed"
