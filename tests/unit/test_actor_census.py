"""The census behind `locust_actors{state}` (measure/actor_census.py): the substrate's
statuses in upstream's four states, every state shown once a census exists, a failing or slow
listing counted without losing the last census, and the gauge on /metrics."""

from __future__ import annotations

import asyncio

import httpx

from agentsession_core.measure.actor_census import (
    STATE_OF_STATUS,
    STATES,
    ActorCensus,
    count_states,
)
from agentsession_core.measure.prometheus import MetricsServer
from agentsession_core.measure.recorder import Recorder
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.interface import ActorInfo
from agentsession_core.substrate.protocol import ACTOR_STATUSES
from tests.promql_subset import parse_exposition


def actors(*statuses: str) -> list[ActorInfo]:
    return [ActorInfo("space", f"a{i}", s) for i, s in enumerate(statuses)]


def test_every_status_of_the_wire_has_its_state_or_is_unmapped() -> None:
    assert set(ACTOR_STATUSES) <= set(STATE_OF_STATUS)  # every JSON-wire status is mapped
    counts, unmapped = count_states(
        actors(
            "SUSPENDED",
            "PAUSED",
            "SUSPENDED",
            "RUNNING",
            "RESUMING",
            "SUSPENDING",
            "PAUSING",
            "CRASHED",
            "DELETING",
            "UNKNOWN_12",
        )
    )
    assert counts == {"hibernated": 3, "running": 2, "hibernate_pending": 2, "crashed": 1}
    assert unmapped == 2
    assert count_states([]) == (dict.fromkeys(STATES, 0), 0)


async def test_a_failing_listing_keeps_the_last_census_and_is_counted() -> None:
    answers: list[list[ActorInfo] | Exception] = [
        actors("RUNNING", "SUSPENDED"),
        ConnectionError("substrate down"),
    ]

    async def listing() -> list[ActorInfo]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    census = ActorCensus(listing, interval_seconds=0.2)
    first = await census.take()
    assert first is not None and first.counts["running"] == 1
    assert await census.take() is None
    assert census.last is first and census.failures == 1
    assert census.last_error == "ConnectionError: substrate down"


async def test_an_atespace_not_made_yet_holds_no_actor() -> None:
    async def listing() -> list[ActorInfo]:
        raise SubstrateError("NOT_FOUND", "atespace 'x' not found", status=404)

    census = ActorCensus(listing)
    found = await census.take()
    assert found is not None and found.counts == dict.fromkeys(STATES, 0)
    assert census.failures == 0


async def test_a_listing_slower_than_the_interval_is_given_up() -> None:
    async def stuck() -> list[ActorInfo]:
        await asyncio.Event().wait()
        return []

    census = ActorCensus(stuck, interval_seconds=0.05)
    assert await census.take() is None
    assert census.last is None and census.last_error is not None
    assert "no answer within 0.05 s" in census.last_error


async def test_the_gauge_shows_all_four_states_once_a_census_exists() -> None:
    listed = actors("SUSPENDED", "SUSPENDED", "RUNNING", "SUSPENDING")

    async def listing() -> list[ActorInfo]:
        return listed

    census = ActorCensus(listing)
    server = MetricsServer(Recorder(), 0, user_class="smoke", census=census)
    await server.start()
    try:
        async with httpx.AsyncClient() as client:
            before = parse_exposition((await client.get(server.url)).text)
            await census.take()
            after = parse_exposition((await client.get(server.url)).text)
    finally:
        await server.stop()
    assert not [k for k in before if k[0] == "locust_actors"]
    got = {dict(k[1])["state"]: v for k, v in after.items() if k[0] == "locust_actors"}
    assert got == {"hibernated": 2, "running": 1, "hibernate_pending": 1, "crashed": 0}
    assert {dict(k[1])["user_class"] for k in after if k[0] == "locust_actors"} == {"smoke"}
