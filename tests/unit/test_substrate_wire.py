"""How a router answer becomes a RouterResponse or a SubstrateError (both router clients)."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.router_wire import router_answer, server_elapsed_us


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("0", 0),
        ("1234", 1234),
        ("", None),
        ("-5", None),
        ("12ms", None),
        ("\u00b2", None),
        ("1_000", None),
    ],
)
def test_server_elapsed_us_takes_plain_decimal_counts_only(value, expected):
    assert server_elapsed_us(value) == expected


def test_success_keeps_body_type_elapsed_and_headers():
    headers = {"content-type": "application/octet-stream", "x-server-elapsed-us": "87"}
    response = router_answer(200, b"abc", headers)
    assert (response.status, response.body) == (200, b"abc")
    assert response.content_type == "application/octet-stream"
    assert response.server_elapsed_us == 87
    assert response.headers is headers  # the fast client's dict is not copied


def test_success_reads_case_insensitive_headers_and_stores_a_dict():
    raw = CIMultiDict({"Content-Type": "text/plain", "X-Server-Elapsed-Us": "5"})
    response = router_answer(201, b"", CIMultiDictProxy(raw))
    assert response.content_type == "text/plain"
    assert response.server_elapsed_us == 5
    assert response.headers == {"Content-Type": "text/plain", "X-Server-Elapsed-Us": "5"}


def test_defaults_when_headers_are_missing():
    response = router_answer(204, b"", {})
    assert response.content_type == "application/json"
    assert response.server_elapsed_us is None


@pytest.mark.parametrize(("router", "from_router"), [("1", True), ("0", False), (None, False)])
def test_error_answer_raises_with_its_code_and_origin(router, from_router):
    headers = {} if router is None else {"x-ate-router": router}
    body = b'{"error": {"code": "RESOURCE_EXHAUSTED", "message": "full"}}'
    with pytest.raises(SubstrateError) as caught:
        router_answer(503, body, headers)
    error = caught.value
    assert (error.code, error.message, error.status) == ("RESOURCE_EXHAUSTED", "full", 503)
    assert error.from_router is from_router


def test_error_answer_without_error_body_is_named_by_status():
    with pytest.raises(SubstrateError) as caught:
        router_answer(302, b"moved", {})
    assert (caught.value.code, caught.value.message) == ("HTTP_302", "moved")
