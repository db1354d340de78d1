"""Substrate errors and the one table that maps them to what a session does (docs/SPEC.md §3.4).

Both wire forms end here. The JSON wire names its failures with codes in an error body and marks
the router's own verdicts with `x-ate-router: 1`; the ate wire names control failures after the
gRPC status and has a router that sets no verdict header, so `ate_router_error` reads what a
real router says (status, text/plain body, the stale-assignment header) into the same codes
before `classify` decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

import orjson

from agentsession_core.errors import AgentsessionError
from agentsession_core.substrate.protocol import (
    CODE_FIELD,
    ERROR_FIELD,
    MESSAGE_FIELD,
    STALE_ASSIGNMENT_HEADER,
    STORE_THROTTLED_PREFIX,
    router_says_actor_gone,
    says_no_pool_matches,
)


class FailureClass(Enum):
    RETRY_LATER = "retry_later"  # capacity or transient: retry, not counted
    REPLACE = "replace"  # the actor is gone or broken: replace it now
    MISCONFIGURED = "misconfigured"  # surface loudly: the run is wrong (credentials end it)
    COUNT = "count"  # anything else: count; 3 in a row -> replace


# Codes the control API and the router use (docs/SPEC.md §2.1, §2.2), plus the client's own
# codes for failures that never got an answer.
TRANSPORT = "TRANSPORT"  # connection refused/reset, DNS, protocol error
TIMEOUT = "TIMEOUT"  # the client gave up waiting
BAD_BODY = "BAD_BODY"  # an answer we could not decode
# A router answer whose body is over the client's cap (target.max_answer_bytes): not read, so
# a broken or hostile server cannot make the generator buffer without bound (docs/SPEC.md §2.2).
ANSWER_TOO_LARGE = "ANSWER_TOO_LARGE"
# The ate router's 421 + `x-ate-assignment-stale: true`: the actor left the worker the router
# picked before the request reached it, so the actor never saw the request.
ASSIGNMENT_STALE = "ASSIGNMENT_STALE"

HTTP_503 = "HTTP_503"  # the ate router's 503, whose text names the refusal
# A ResumeActor answered `resumed: false`, or a park read back still RUNNING: the suspend
# before the wake never happened, so the wake is no wake (docs/SPEC.md §3.4). A client code:
# the call itself succeeded.
NOT_SUSPENDED = "NOT_SUSPENDED"
# The snapshot store refused for throttling (HTTP 429, S3 503 SlowDown, gRPC
# RESOURCE_EXHAUSTED naming the store): a fresh bucket refusing a burst, not a platform out
# of room, so it is a class of its own (says_store_throttled reads the answer's words).
STORE_THROTTLED = "STORE_THROTTLED"

# A refused credential: no retry can fix it, so the run stops (docs/SPEC.md §3.4).
CREDENTIAL_CODES = frozenset({"UNAUTHENTICATED", "PERMISSION_DENIED"})
CREDENTIAL_STATUSES = frozenset({401, 403})

_RETRY_LATER_CODES = {
    "RESOURCE_EXHAUSTED",
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
    ASSIGNMENT_STALE,
    STORE_THROTTLED,
}
_RETRY_LATER_STATUSES = {429, 503, 504}
_MISCONFIGURED_CODES = {"INVALID_ARGUMENT", *CREDENTIAL_CODES}
# A request no actor can ever serve, whoever answered it: the glutton's own INVALID_ARGUMENT
# (a size over the substrate's per-op cap, a bad key), a 400 (the ate glutton's bad argument),
# a 413 (a body over the router's per-request cap). Replacing the actor cannot fix the
# request, so these never count toward a replacement (docs/SPEC.md §3.4).
_BAD_REQUEST_STATUSES = {400, 413}


# What a throttling answer says, in the words of the stores and platforms that give it (S3's
# SlowDown, GCS's and HTTP's 429, a gRPC status naming the store); an answer is the store's
# when it also names the store, so an ingress's own 429 is not taken for it.
_THROTTLE_WORDS = (
    "slowdown",
    "slow down",
    "throttl",
    "too many requests",
    "reduce your request rate",
    "rate exceeded",
)
_STORE_WORDS = ("snapshot", "storage", "store", "bucket", "s3", "gcs")
# The codes a throttling answer arrives under, on either wire (the JSON control API's 429 is
# RESOURCE_EXHAUSTED; the ate router's 429 and 503 are HTTP_<status>).
_THROTTLE_CODES = {"RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "HTTP_429", HTTP_503}


def says_store_throttled(message: str) -> bool:
    """The answer's text says the snapshot store throttled the platform."""
    text = message.lower()
    if STORE_THROTTLED_PREFIX in text:
        return True
    return any(w in text for w in _THROTTLE_WORDS) and any(w in text for w in _STORE_WORDS)


def classify(code: str, status: int, *, from_router: bool, message: str = "") -> FailureClass:
    """docs/SPEC.md §3.4's table. `from_router` is true for control-API answers and router verdicts
    (JSON wire: x-ate-router: 1; ate wire: see ate_router_error); false for the glutton's own
    answers inside the actor."""
    if from_router:
        # A crash first: the ate router reports ResumeActor's "crashed" inside a 503, and an
        # actor that crashed must be replaced, not waited for.
        if code == "ABORTED" and "crashed" in message.lower():
            return FailureClass.REPLACE
        # A worker selector no pool matches (target.worker_pools against a substrate without
        # those pools): every wake of every actor would be refused the same way, and a
        # replacement draws a pool from the same list (docs/SPEC.md §2.6).
        if code in ("FAILED_PRECONDITION", HTTP_503) and says_no_pool_matches(message):
            return FailureClass.MISCONFIGURED
        if code in _RETRY_LATER_CODES or status in _RETRY_LATER_STATUSES:
            return FailureClass.RETRY_LATER
        if code in ("ACTOR_NOT_FOUND", "NOT_FOUND", "FAILED_PRECONDITION"):
            return FailureClass.REPLACE
        if code in _MISCONFIGURED_CODES or status in CREDENTIAL_STATUSES:
            return FailureClass.MISCONFIGURED
    if code == "INVALID_ARGUMENT" or status in _BAD_REQUEST_STATUSES:
        return FailureClass.MISCONFIGURED
    return FailureClass.COUNT


class SubstrateError(AgentsessionError):
    """A failed substrate call: a control-API error, a router verdict, a glutton error
    (from_router=False) or a failure of the client's own (code TRANSPORT / TIMEOUT / BAD_BODY /
    ANSWER_TOO_LARGE)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int = 0,
        from_router: bool = True,
        check: str | None = None,
        by: str | None = None,
    ) -> None:
        # Both wires' answers pass here, so storage throttling gets its own code whatever
        # status it came under; the status and message keep what the wire said.
        if from_router and code in _THROTTLE_CODES and says_store_throttled(message):
            code = STORE_THROTTLED
        super().__init__(f"{code} ({status}): {message}" if status else f"{code}: {message}")
        self.code = code
        self.status = status
        self.message = message
        self.from_router = from_router
        # For a refused credential: which parameter to check, when the client knows
        # ("target.token (AGENTSESSION_TOKEN or a --params file)"); None: say all of them.
        self.check = check
        # Who refused, when the code alone does not say ("the router": a TLS handshake).
        self.by = by

    @property
    def failure_class(self) -> FailureClass:
        return classify(self.code, self.status, from_router=self.from_router, message=self.message)

    @property
    def crashed(self) -> bool:
        return self.code == "ABORTED" and "crashed" in self.message.lower()

    @property
    def credential_refused(self) -> bool:
        """The substrate refused who we are (gRPC UNAUTHENTICATED / PERMISSION_DENIED, HTTP
        401 / 403 from the control API or the router): the run cannot go on."""
        return self.from_router and (
            self.code in CREDENTIAL_CODES or self.status in CREDENTIAL_STATUSES
        )


def error_from_answer(status: int, body: bytes, *, from_router: bool) -> SubstrateError:
    """The SubstrateError for an error answer: its body's `{"error": {"code", "message"}}`,
    or HTTP_<status> and the body's start when the body is not in that form."""
    try:
        error = orjson.loads(body)[ERROR_FIELD]
        code, message = str(error[CODE_FIELD]), str(error.get(MESSAGE_FIELD, ""))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        code, message = f"HTTP_{status}", body[:200].decode(errors="replace")
    return SubstrateError(code, message, status=status, from_router=from_router)


def stale_assignment(status: int, headers: Mapping[str, str]) -> bool:
    """The ate router's 421 saying the actor left the worker before the request reached it
    (`headers` with lower-cased names)."""
    return status == 421 and headers.get(STALE_ASSIGNMENT_HEADER, "").strip().lower() == "true"


def ate_router_error(status: int, body: bytes, headers: Mapping[str, str]) -> SubstrateError:
    """The SubstrateError for a non-2xx answer through the ate wire's router, which sets no
    verdict header and answers its denials in text/plain (the ate wire notes, router denials).

    The status says who answered wherever it can: the real glutton answers only 400, 404, 405
    and 500, so 401/403/421/429/503/504 are the router's. 404 is both: the router's names the
    actor (protocol.router_says_actor_gone), the glutton's names a missing array or file.
    `headers` must hold lower-cased names (FastRouterClient's do)."""
    text = body[:200].decode(errors="replace").strip()
    if stale_assignment(status, headers):
        return SubstrateError(ASSIGNMENT_STALE, text, status=status)
    if status == 404:
        if router_says_actor_gone(status, text):
            return SubstrateError("ACTOR_NOT_FOUND", text, status=status)
        return SubstrateError(f"HTTP_{status}", text, status=status, from_router=False)
    if status == 503 and "crashed" in text.lower():
        # ResumeActor's ABORTED "crashed", passed on in the router's 503 with its status text.
        return SubstrateError("ABORTED", text, status=status)
    if status == 503 and says_no_pool_matches(text):
        # ResumeActor's FAILED_PRECONDITION for a selector no pool matches, in the 503's text.
        return SubstrateError("FAILED_PRECONDITION", text, status=status)
    router = status in CREDENTIAL_STATUSES or status in _RETRY_LATER_STATUSES
    return SubstrateError(f"HTTP_{status}", text, status=status, from_router=router)


# ---- the failure codes a row can book, each with its class (docs/reference/failures.md) ----


@dataclass(frozen=True)
class FailureCode:
    """One code a failure is booked under: the class the report groups it in, and the status
    it typically comes with (which, with the code, decides the action: `classify`)."""

    code: str
    kind: str  # the class: capacity, throttled, not_suspended, transient, gone, ...
    meaning: str
    status: int = 0

    @property
    def action(self) -> FailureClass:
        return classify(self.code, self.status, from_router=True)


FAILURE_CODES: tuple[FailureCode, ...] = (
    FailureCode(
        NOT_SUSPENDED,
        "not_suspended",
        "ResumeActor answered `resumed: false` (the actor was already running), or a park "
        "read back still RUNNING: the suspend never happened, so the wake is booked failed, "
        "never as a TimeToWake sample",
    ),
    FailureCode(
        STORE_THROTTLED,
        "throttled",
        "the snapshot store refused for throttling (HTTP 429, S3 503 SlowDown, gRPC "
        "RESOURCE_EXHAUSTED naming the store): a cold bucket, not a platform out of room",
        429,
    ),
    FailureCode(
        "RESOURCE_EXHAUSTED", "capacity", "no worker had room (before the park timeout)", 429
    ),
    FailureCode("UNAVAILABLE", "transient", "the control API or router is unavailable", 503),
    FailureCode("DEADLINE_EXCEEDED", "transient", "the server's own deadline passed", 504),
    FailureCode(
        ASSIGNMENT_STALE,
        "transient",
        "the ate router's 421: the actor left its worker before the request reached it",
        421,
    ),
    FailureCode("HTTP_503", "transient", "the ate router's 503 (its text names why)", 503),
    FailureCode("HTTP_504", "transient", "the ate router's 504", 504),
    FailureCode("HTTP_429", "transient", "a router's 429 that names no store", 429),
    FailureCode("ACTOR_NOT_FOUND", "gone", "the router has no such actor", 404),
    FailureCode("NOT_FOUND", "gone", "the control API has no such actor (or atespace)", 404),
    FailureCode(
        "FAILED_PRECONDITION",
        "gone",
        "the actor is in no state for the call (or, with "
        '"no worker pool matches", no pool serves its selector: misconfigured)',
        412,
    ),
    FailureCode(
        "ABORTED",
        "crash",
        '"crashed": the actor\'s worker died; else a concurrent update that outlived its retries',
        409,
    ),
    FailureCode("UNAUTHENTICATED", "credential", "the credential was refused", 401),
    FailureCode("PERMISSION_DENIED", "credential", "the credential may not do this", 403),
    FailureCode(
        "INVALID_ARGUMENT", "misconfigured", "a request no actor can serve (also any 400, 413)", 400
    ),
    FailureCode(TRANSPORT, "client", "no answer: connection refused or reset, DNS, protocol"),
    FailureCode(TIMEOUT, "client", "the client gave up waiting (target.request_timeout_seconds)"),
    FailureCode(BAD_BODY, "client", "an answer the client could not decode"),
    FailureCode(ANSWER_TOO_LARGE, "client", "an answer over target.max_answer_bytes"),
    FailureCode("INTERNAL", "server", "the server failed (a 500)", 500),
)
_KIND_OF = {entry.code: entry.kind for entry in FAILURE_CODES}


def failure_kind(booked: str) -> str:
    """The class of a booked failure code (a step's `op 2 writeram: HTTP_500` is its last
    part's): `other` for a code outside FAILURE_CODES."""
    code = booked.rsplit(": ", 1)[-1].strip()
    if code in _KIND_OF:
        return _KIND_OF[code]
    if code.startswith("HTTP_5"):
        return "server"
    return "other"
