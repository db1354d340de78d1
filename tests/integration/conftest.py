"""A local substrate subprocess for the integration tests: one per session, on a free
loopback port, with a temp store, a bearer token and small caps; stopped at the end."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator

import pytest

from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.local.launcher import LocalSubstrateProcess

TOKEN = "integration-token"
SMALL_TEMPLATE = ("test", "small")  # 1 MiB limit
SHARED_WORKERS = 4


@pytest.fixture(scope="session")
def substrate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSubstrateProcess]:
    root = tmp_path_factory.mktemp("local-substrate")
    with LocalSubstrateProcess(
        workers=SHARED_WORKERS,
        store=root / "store",
        templates={"test/small": "1Mi"},
        park_timeout=30,
        token=TOKEN,
        extra_args=["--max-op-size", "8Mi", "--max-burn-millis", "2000", "--max-parallel", "4"],
        log_path=root / "substrate.log",
    ) as proc:
        yield proc


@pytest.fixture
async def client(substrate: LocalSubstrateProcess) -> AsyncIterator[HttpSubstrate]:
    sub = HttpSubstrate(substrate.url, token=TOKEN, control_timeout=60, router_timeout=60)
    yield sub
    await sub.aclose()


@pytest.fixture
async def atespace(client: HttpSubstrate, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh atespace per test, named after it; its actors are deleted afterwards so
    the shared pool starts every test with all workers free."""
    name = re.sub(r"[^A-Za-z0-9-]", "-", request.node.name)[:50].strip("-").lower()
    await client.ensure_atespace(name)
    yield name
    for actor in await client.list_actors(name):
        await client.delete_actor(name, actor.name)
