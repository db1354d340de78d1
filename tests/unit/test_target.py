"""open_substrate's choices (engine/target.py): the client for the target's wire form, and the
embedded local substrate's endpoints in that form."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from agentsession_core.engine.params import parse_params
from agentsession_core.engine.target import client_for, local_endpoints
from agentsession_core.errors import UsageError
from agentsession_core.substrate.ate.substrate import AteSubstrate
from agentsession_core.substrate.http import HttpSubstrate


def target(**values: Any):  # type: ignore[no-untyped-def]
    return parse_params({"target": values}).target


async def test_json_targets_get_the_http_client() -> None:
    sub = client_for(target(substrate="http://127.0.0.1:9"), "http://127.0.0.1:9", None)
    assert isinstance(sub, HttpSubstrate)
    await sub.aclose()


@pytest.mark.parametrize(
    "where",
    [
        {"substrate": "http://127.0.0.1:9"},
        {"substrate": "https://127.0.0.1:9"},
        {"substrate": "grpc://127.0.0.1:9", "router": "http://127.0.0.1:8"},
    ],
)
async def test_the_answer_cap_reaches_the_router_client(where: dict[str, str]) -> None:
    t = target(**where, max_answer_bytes="3Mi")
    sub = client_for(t, t.substrate or "", t.router)
    assert isinstance(sub, HttpSubstrate | AteSubstrate)
    assert sub.router.max_answer_bytes == 3 * 2**20
    await sub.aclose()


async def test_ate_targets_get_the_ate_client_with_their_settings() -> None:
    t = target(substrate="grpc://127.0.0.1:9", router="http://127.0.0.1:8", token="tok")
    sub = client_for(t, t.substrate, t.router)
    assert isinstance(sub, AteSubstrate)
    assert sub.control.target.address == "127.0.0.1:9" and not sub.control.target.secure
    assert (sub.router.host, sub.router.port) == ("127.0.0.1", 8)
    await sub.aclose()


def test_the_embedded_substrate_speaks_json_from_its_http_url() -> None:
    local: Any = SimpleNamespace(url="http://127.0.0.1:7000")
    assert local_endpoints(local, target(protocol="json")) == ("http://127.0.0.1:7000", None)


@pytest.mark.parametrize("protocol", [None, "ate"])  # ate unless told otherwise
def test_the_embedded_substrate_speaks_ate_from_its_grpc_url(protocol: str | None) -> None:
    local: Any = SimpleNamespace(url="http://127.0.0.1:7000", grpc_url="grpc://127.0.0.1:7001")
    assert local_endpoints(local, target(protocol=protocol)) == (
        "grpc://127.0.0.1:7001",
        "http://127.0.0.1:7000",
    )


@pytest.mark.parametrize("grpc_url", [None, ""])
def test_an_embedded_substrate_without_ate_says_so(grpc_url: str | None) -> None:
    local: Any = SimpleNamespace(url="http://127.0.0.1:7000")
    if grpc_url is not None:
        local.grpc_url = grpc_url
    with pytest.raises(UsageError, match=r"serves no ateapi\.Control endpoint"):
        local_endpoints(local, target(protocol="ate"))
