"""How a router answer becomes a RouterResponse or a SubstrateError (both router clients), the
JSON wire's 2xx decoding, and server time noted beside the calls."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from agentsession_core.substrate.errors import FailureClass, SubstrateError
from agentsession_core.substrate.interface import (
    NO_SERVER_TIME,
    note_server_time,
    reset_server_time,
    server_time_us,
)
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


# ---- 2xx answers are decoded (docs/SPEC.md §2.3) -----------------------------------------------

JSON_TYPE = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("route", "body", "expected"),
    [
        ("ping", b'{"message":"wake"}', {"message": "wake"}),
        ("/writeram", b'{"size":65536}', {"size": 65536}),
        ("readram", b'{"size":4096,"checksum":7,"sha256":"ab"}', None),
        ("writedisk", b'{"size":1,"sha256":"cd"}', {"size": 1, "sha256": "cd"}),
        ("readdisk", b'{"size":1,"sha256":"cd"}', {"size": 1, "sha256": "cd"}),
        ("ingest", b'{"size":3,"sha256":"ef"}', {"size": 3, "sha256": "ef"}),
        ("burncpu", b'{"iterations":12}', {"iterations": 12}),
    ],
)
def test_each_routes_answer_decodes(route, body, expected):
    response = router_answer(200, body, JSON_TYPE, route)
    assert response.result == (expected if expected is not None else orjson.loads(body))


@pytest.mark.parametrize(
    ("route", "body", "headers", "why"),
    [
        ("ping", b"<html>proxy</html>", JSON_TYPE, "not JSON"),
        ("ping", b"", JSON_TYPE, "not JSON"),
        ("ping", b'["message"]', JSON_TYPE, "expected a JSON object"),
        ("writeram", b"{}", JSON_TYPE, "field 'size'"),
        ("writeram", b'{"size":"64Ki"}', JSON_TYPE, "field 'size'"),
        ("writeram", b'{"size":true}', JSON_TYPE, "field 'size'"),
        ("readram", b'{"size":1}', JSON_TYPE, "field 'checksum'"),
        ("ping", b'{"message":"x"}', {"content-type": "text/html"}, "content type"),
        ("ping", b"\x00\x01", {"content-type": "application/octet-stream"}, "content type"),
        ("ping", b"\x0a\x01x", {}, "not JSON"),  # a glutton route's answer must be its object
    ],
)
def test_a_2xx_that_is_not_the_routes_answer_is_bad_body(route, body, headers, why):
    with pytest.raises(SubstrateError) as caught:
        router_answer(200, body, headers, route)
    error = caught.value
    assert (error.code, error.status, error.from_router) == ("BAD_BODY", 200, False)
    assert error.failure_class is FailureClass.COUNT
    assert why in error.message


def test_raw_bytes_where_the_route_answers_them():
    headers = {"content-type": "application/octet-stream"}
    response = router_answer(200, b"\x00" * 8, headers, "readdisk")
    assert (response.body, response.result) == (b"\x00" * 8, None)


def test_routes_outside_the_table_are_held_to_their_content_type():
    assert router_answer(200, b"anything", {}, "custom").result is None
    assert router_answer(200, b"[1]", JSON_TYPE, "custom").result == [1]
    with pytest.raises(SubstrateError):
        router_answer(200, b"{", JSON_TYPE, "custom")


# ---- server time travels beside the calls --------------------------------------------------


async def test_server_time_is_summed_per_task_and_reset():
    reset_server_time()
    assert server_time_us() == NO_SERVER_TIME
    note_server_time(None)  # an answer that did not say changes nothing
    assert server_time_us() == NO_SERVER_TIME
    router_answer(200, b'{"message":"a"}', {**JSON_TYPE, "x-server-elapsed-us": "40"}, "ping")
    note_server_time(2)
    assert server_time_us() == 42

    async def other_session() -> int:
        reset_server_time()
        note_server_time(1000)
        return server_time_us()

    assert await asyncio.create_task(other_session()) == 1000
    assert server_time_us() == 42  # the other task's figures stay its own
    reset_server_time()
    note_server_time(0)
    assert server_time_us() == 0
