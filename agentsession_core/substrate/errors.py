"""Substrate errors and the one table that maps them to what a session does (docs/SPEC.md §3.4)."""

from __future__ import annotations

from enum import Enum

import orjson

from agentsession_core.errors import AgentsessionError
from agentsession_core.substrate.protocol import CODE_FIELD, ERROR_FIELD, MESSAGE_FIELD


class FailureClass(Enum):
    RETRY_LATER = "retry_later"  # capacity or transient: retry, not counted
    REPLACE = "replace"  # the actor is gone or broken: replace it now
    MISCONFIGURED = "misconfigured"  # retry later, but surface loudly: the run is wrong
    COUNT = "count"  # anything else: count; 3 in a row -> replace


# Codes the control API and the router use (docs/SPEC.md §2.1, §2.2), plus the client's own
# codes for failures that never got an answer.
TRANSPORT = "TRANSPORT"  # connection refused/reset, DNS, protocol error
TIMEOUT = "TIMEOUT"  # the client gave up waiting
BAD_BODY = "BAD_BODY"  # an answer we could not decode

_RETRY_LATER_CODES = {"RESOURCE_EXHAUSTED", "UNAVAILABLE", "DEADLINE_EXCEEDED"}
_MISCONFIGURED_CODES = {"INVALID_ARGUMENT", "UNAUTHENTICATED"}


def classify(code: str, status: int, *, from_router: bool, message: str = "") -> FailureClass:
    """docs/SPEC.md §3.4's table. `from_router` is true for control-API answers and router verdicts
    (x-ate-router: 1); false for the glutton's own answers inside the actor."""
    if from_router:
        if code in _RETRY_LATER_CODES or status in (429, 503, 504):
            return FailureClass.RETRY_LATER
        if code in ("ACTOR_NOT_FOUND", "NOT_FOUND", "FAILED_PRECONDITION"):
            return FailureClass.REPLACE
        if code == "ABORTED" and "crashed" in message.lower():
            return FailureClass.REPLACE
        if code in _MISCONFIGURED_CODES:
            return FailureClass.MISCONFIGURED
    return FailureClass.COUNT


class SubstrateError(AgentsessionError):
    """A failed substrate call: a control-API error, a router verdict, a glutton error
    (from_router=False) or a transport failure (code TRANSPORT / TIMEOUT / BAD_BODY)."""

    def __init__(
        self, code: str, message: str, *, status: int = 0, from_router: bool = True
    ) -> None:
        super().__init__(f"{code} ({status}): {message}" if status else f"{code}: {message}")
        self.code = code
        self.status = status
        self.message = message
        self.from_router = from_router

    @property
    def failure_class(self) -> FailureClass:
        return classify(self.code, self.status, from_router=self.from_router, message=self.message)

    @property
    def crashed(self) -> bool:
        return self.code == "ABORTED" and "crashed" in self.message.lower()


def error_from_answer(status: int, body: bytes, *, from_router: bool) -> SubstrateError:
    """The SubstrateError for an error answer: its body's `{"error": {"code", "message"}}`,
    or HTTP_<status> and the body's start when the body is not in that form."""
    try:
        error = orjson.loads(body)[ERROR_FIELD]
        code, message = str(error[CODE_FIELD]), str(error.get(MESSAGE_FIELD, ""))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        code, message = f"HTTP_{status}", body[:200].decode(errors="replace")
    return SubstrateError(code, message, status=status, from_router=from_router)
