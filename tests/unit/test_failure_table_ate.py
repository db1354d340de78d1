"""docs/SPEC.md §3.4's failure table for the ate wire: control failures named after their gRPC
status, and a real router's answers (no verdict header: status, text/plain body and the
stale-assignment header) read by errors.ate_router_error. Plus the credential rule that ends a
run, on both wires."""

from __future__ import annotations

import pytest

from agentsession_core.substrate.errors import (
    ASSIGNMENT_STALE,
    FailureClass,
    SubstrateError,
    ate_router_error,
    classify,
    stale_assignment,
)
from agentsession_core.substrate.protocol import ROUTER_ACTOR_GONE, STALE_ASSIGNMENT_HEADER

RETRY, REPLACE, LOUD, COUNT = (
    FailureClass.RETRY_LATER,
    FailureClass.REPLACE,
    FailureClass.MISCONFIGURED,
    FailureClass.COUNT,
)
STALE = {STALE_ASSIGNMENT_HEADER: "true"}


@pytest.mark.parametrize(
    ("code", "message", "expected", "credential"),
    [
        ("UNAVAILABLE", "connection refused", RETRY, False),
        ("RESOURCE_EXHAUSTED", "no worker has room", RETRY, False),
        ("DEADLINE_EXCEEDED", "deadline passed", RETRY, False),
        ("NOT_FOUND", "actor bench/a not found", REPLACE, False),
        ("FAILED_PRECONDITION", "actor is DELETING", REPLACE, False),
        ("ABORTED", "actor bench/a crashed", REPLACE, False),
        # ControlClient retries a conflict first; one that outlives its attempts is counted.
        ("ABORTED", "concurrent update (after 5 attempts)", COUNT, False),
        ("INVALID_ARGUMENT", "bad name", LOUD, False),
        ("UNAUTHENTICATED", "no credential", LOUD, True),
        ("PERMISSION_DENIED", "not allowed", LOUD, True),
        ("INTERNAL", "boom", COUNT, False),
        ("UNKNOWN", "", COUNT, False),
        ("ALREADY_EXISTS", "exists", COUNT, False),
    ],
)
def test_grpc_status_names(code: str, message: str, expected, credential: bool) -> None:
    # ControlClient raises status=0 and from_router=True for every control failure.
    error = SubstrateError(code, message)
    assert error.failure_class is expected
    assert error.credential_refused is credential


@pytest.mark.parametrize(
    ("status", "body", "headers", "code", "from_router", "expected"),
    [
        (503, b"resource exhausted: no room", {}, "HTTP_503", True, RETRY),
        (503, b"parking lot full: router at capacity", {}, "HTTP_503", True, RETRY),
        (503, b"FailedPrecondition: actor is suspending", {}, "HTTP_503", True, RETRY),
        (504, b"deadline exceeded", {}, "HTTP_504", True, RETRY),
        (429, b"rate limited", {}, "HTTP_429", True, RETRY),
        (421, b"assignment stale", STALE, ASSIGNMENT_STALE, True, RETRY),
        (
            421,
            b"assignment stale",
            {STALE_ASSIGNMENT_HEADER: " True "},
            ASSIGNMENT_STALE,
            True,
            RETRY,
        ),
        (421, b"misdirected", {}, "HTTP_421", False, COUNT),
        (421, b"misdirected", {STALE_ASSIGNMENT_HEADER: "false"}, "HTTP_421", False, COUNT),
        (
            404,
            ROUTER_ACTOR_GONE.format(target="a/b").encode(),
            {},
            "ACTOR_NOT_FOUND",
            True,
            REPLACE,
        ),
        (404, b"Actor a/b Not Found", {}, "ACTOR_NOT_FOUND", True, REPLACE),
        (404, b"no RAM array k", {}, "HTTP_404", False, COUNT),
        (404, b"no file 'k'", {}, "HTTP_404", False, COUNT),
        (404, b"404 page not found", {}, "HTTP_404", False, COUNT),
        (401, b"Unauthenticated", {}, "HTTP_401", True, LOUD),
        (403, b"PermissionDenied", {}, "HTTP_403", True, LOUD),
        (503, b"Aborted: actor a/b crashed", {}, "ABORTED", True, REPLACE),
        (400, b"bad size", {}, "HTTP_400", False, LOUD),  # the glutton: a request never served
        (405, b"method not allowed", {}, "HTTP_405", False, COUNT),
        (500, b"internal", {}, "HTTP_500", False, COUNT),
        (502, b"bad gateway", {}, "HTTP_502", False, COUNT),
        (408, b"", {}, "HTTP_408", False, COUNT),
    ],
)
def test_a_real_routers_answers(status, body, headers, code, from_router, expected) -> None:
    error = ate_router_error(status, body, headers)
    assert (error.code, error.status, error.from_router) == (code, status, from_router)
    assert error.message == body.decode().strip()
    assert error.failure_class is expected
    assert error.credential_refused is (status in (401, 403))
    # The one table decides: classify on the error's fields gives the same answer.
    assert classify(code, status, from_router=from_router, message=error.message) is expected


def test_a_503_that_names_a_crash_is_counted_as_a_crash() -> None:
    error = ate_router_error(503, b"Aborted: actor bench/a crashed (worker died)", {})
    assert error.crashed  # booked as actor/CrashCount by the session


def test_long_bodies_are_cut_and_bad_bytes_kept_readable() -> None:
    error = ate_router_error(500, b"\xff" + b"x" * 1000, {})
    assert len(error.message) <= 200
    assert error.message.startswith("\ufffd")


def test_stale_needs_both_the_status_and_the_header() -> None:
    assert stale_assignment(421, STALE)
    assert not stale_assignment(421, {})
    assert not stale_assignment(503, STALE)


@pytest.mark.parametrize(
    ("code", "status", "from_router", "credential"),
    [
        ("UNAUTHENTICATED", 401, True, True),  # JSON wire: control or router verdict
        ("HTTP_403", 403, True, True),
        ("HTTP_401", 401, False, False),  # the glutton's own 401 is not our credential
        ("INVALID_ARGUMENT", 400, True, False),
    ],
)
def test_credential_refusals_on_the_json_wire(code, status, from_router, credential) -> None:
    error = SubstrateError(code, "", status=status, from_router=from_router)
    assert error.credential_refused is credential
    if credential:
        assert classify(code, status, from_router=from_router) is LOUD
