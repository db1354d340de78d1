"""The pieces of issue 37's wake truth that need no process: the error table's new codes and
classes, the fault rules' grammar, the fake's resumed, and the upload's throttling test."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from agentsession_core.output.upload import is_throttling
from agentsession_core.substrate.errors import (
    FAILURE_CODES,
    NOT_SUSPENDED,
    STORE_THROTTLED,
    FailureClass,
    SubstrateError,
    ate_router_error,
    failure_kind,
)
from agentsession_core.substrate.fake import FakeSubstrate
from local_substrate.fault_rules import FaultRuleError, parse_rule


@pytest.mark.parametrize(
    ("code", "status", "message"),
    [
        ("RESOURCE_EXHAUSTED", 429, "snapshot store throttled: SlowDown (writing …)"),
        ("RESOURCE_EXHAUSTED", 0, "restore failed: GCS bucket answered 429 Too Many Requests"),
        ("UNAVAILABLE", 503, "checkpoint upload: S3 SlowDown: please reduce your request rate"),
    ],
)
def test_a_stores_throttling_is_its_own_code_whatever_the_wire_said(
    code: str, status: int, message: str
) -> None:
    error = SubstrateError(code, message, status=status)
    assert error.code == STORE_THROTTLED and error.failure_class is FailureClass.RETRY_LATER
    assert failure_kind(error.code) == "throttled"


def test_the_ate_routers_503_naming_the_store_is_throttling_and_a_bare_429_is_not() -> None:
    assert ate_router_error(503, b"snapshot store throttled: SlowDown", {}).code == STORE_THROTTLED
    assert ate_router_error(429, b"too many requests", {}).code == "HTTP_429"
    assert SubstrateError("RESOURCE_EXHAUSTED", "no worker has room").code == "RESOURCE_EXHAUSTED"


def test_every_code_has_a_class_and_a_steps_code_is_classed_by_its_last_part() -> None:
    assert {e.code for e in FAILURE_CODES} >= {NOT_SUSPENDED, STORE_THROTTLED}
    assert failure_kind("op 2 writeram: STORE_THROTTLED") == "throttled"
    assert failure_kind(NOT_SUSPENDED) == "not_suspended"
    assert SubstrateError(NOT_SUSPENDED, "x").failure_class is FailureClass.COUNT
    assert failure_kind("HTTP_502") == "server" and failure_kind("WHATEVER") == "other"


def test_the_fault_rules_parse_and_refuse_in_one_line() -> None:
    assert parse_rule("suspend:ignore:5%").share == 0.05
    assert parse_rule("store:throttle:1").share == 1.0
    with pytest.raises(FaultRuleError, match="suspend takes no action 'refuse'"):
        parse_rule("suspend:refuse:1")
    with pytest.raises(FaultRuleError, match=r"share '2' must be in \[0, 1\]"):
        parse_rule("store:throttle:2")


async def test_the_fake_says_resumed_and_can_ignore_suspends() -> None:
    fake = FakeSubstrate(ignore_suspends=1.0)
    await fake.ensure_atespace("a")
    await fake.create_actor("a", "x", "benchmark-workloads", "glutton")
    assert (await fake.resume_actor("a", "x")).resumed is True
    await fake.suspend_actor("a", "x")
    again = await fake.resume_actor("a", "x")
    assert again.resumed is False and again.status == "RUNNING"
    with pytest.raises(ValueError, match="ignore_suspends"):
        FakeSubstrate(ignore_suspends=1.5)


def test_throttling_answers_from_boto3_are_recognised() -> None:
    def error(code: str, status: int) -> ClientError:
        body = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}
        return ClientError(body, "PutObject")  # type: ignore[arg-type]

    assert is_throttling(error("SlowDown", 503)) and is_throttling(error("Whatever", 429))
    assert not is_throttling(error("NoSuchBucket", 404)) and not is_throttling(ValueError())
