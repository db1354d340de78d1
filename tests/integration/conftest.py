"""A local substrate subprocess for the integration tests: one per session, on a free
loopback port, with a temp store, a bearer token and small caps; stopped at the end.

The tests speak ate, the platform's own wire, as runs do by default (docs/SPEC.md §2):
`client` is an AteSubstrate, `ate_target` the target fields of a standalone local substrate.
A test whose subject is the JSON wire asks for `json_client`, or names `protocol: json`.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsession_core.substrate.ate.substrate import AteSubstrate
from agentsession_core.substrate.http import HttpSubstrate
from agentsession_core.substrate.interface import Substrate
from local_substrate.launcher import LocalSubstrateProcess
from tests.integration.prefect_home import seed

TOKEN = "integration-token"
SMALL_TEMPLATE = ("test", "small")  # 1 MiB limit
SHARED_WORKERS = 4


@pytest.fixture(scope="session", autouse=True)
def migrated_prefect_home() -> None:
    """This process's Prefect home (tests/conftest.py) with its database migrated ahead: each
    `agentsession campaign` a test starts without PREFECT_API_URL starts an API on it."""
    seed(Path(os.environ["PREFECT_HOME"]))


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


def ate_target(proc: Any, **fields: Any) -> dict[str, Any]:
    """`target` for a standalone local substrate (a LocalSubstrateProcess or LocalSubstrate) on
    the ate wire: its ateapi.Control port and its router."""
    return {"substrate": proc.grpc_url, "router": proc.url, **fields}


def ate_args(proc: Any) -> list[str]:
    """The same on `agentsession run`'s command line."""
    return ["--substrate", proc.grpc_url, "--router", proc.url]


def ate_client(proc: Any, **options: Any) -> AteSubstrate:
    """An ate client of a standalone local substrate."""
    return AteSubstrate(proc.grpc_url, proc.url, **options)


@pytest.fixture
async def client(substrate: LocalSubstrateProcess) -> AsyncIterator[Substrate]:
    sub = ate_client(substrate, token=TOKEN, control_timeout=60, router_timeout=60)
    yield sub
    await sub.aclose()


@pytest.fixture
async def json_client(substrate: LocalSubstrateProcess) -> AsyncIterator[HttpSubstrate]:
    """The JSON wire's client, for the tests whose subject is that wire."""
    sub = HttpSubstrate(substrate.url, token=TOKEN, control_timeout=60, router_timeout=60)
    yield sub
    await sub.aclose()


@pytest.fixture
async def atespace(client: Substrate, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh atespace per test, named after it; its actors are deleted afterwards so
    the shared pool starts every test with all workers free."""
    name = re.sub(r"[^A-Za-z0-9-]", "-", request.node.name)[:50].strip("-").lower()
    await client.ensure_atespace(name)
    yield name
    for actor in await client.list_actors(name):
        await client.delete_actor(name, actor.name)


AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test credentials for a test that needs boto3 to get as far as the network without
    a moto server (an endpoint that is down): not left to another test's session fixture."""
    for key, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A real S3 endpoint over HTTP (moto's server mode) on 127.0.0.1, with test credentials
    in the environment for boto3's usual chain. Modules create their own buckets."""
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in AWS_TEST_ENV}
    os.environ.update(AWS_TEST_ENV)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
