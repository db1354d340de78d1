"""The local substrate's fault language and its seeded decisions (docs/SPEC.md §2.4), without
processes: what each rule parses to, the one-line refusals, the streams and the ByteBudget."""

from __future__ import annotations

import asyncio

import pytest

from local_substrate.buffers import ByteBudget
from local_substrate.fault_rules import (
    LANGUAGE,
    Delay,
    FaultRuleError,
    parse_rule,
    parse_rules,
)
from local_substrate.faults import Faults
from local_substrate.protocol import WireError


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("wake:refuse:0.2", ("wake", "refuse", None, 0.2)),
        ("wake:crash:5%", ("wake", "crash", None, 0.05)),
        ("op:/writeram:fail:0.01", ("op", "fail", "/writeram", 0.01)),
        ("router:hang:0.01", ("router", "hang", None, 0.01)),
        (" router:reset:1 ", ("router", "reset", None, 1.0)),
        ("router:unavailable:1", ("router", "unavailable", None, 1.0)),
        ("op:/ping:unavailable:50%", ("op", "unavailable", "/ping", 0.5)),
        ("control:fail:0", ("control", "fail", None, 0.0)),
        ("create:refuse:100%", ("create", "refuse", None, 1.0)),
    ],
)
def test_share_rules(text: str, fields: tuple[object, ...]) -> None:
    rule = parse_rule(text)
    assert (rule.scope, rule.action, rule.route, rule.share) == fields
    assert rule.text == text.strip()


def test_latency_quota_and_route_rules() -> None:
    assert parse_rule("router:latency:exp:50ms").delay == Delay("exp", 0.05)
    assert parse_rule("wake:latency:1.5s").delay == Delay("fixed", 1.5)
    assert parse_rule("op:/ping:latency:fixed:20ms").delay == Delay("fixed", 0.02)
    assert parse_rule("control:latency:uniform:0s:200ms").delay == Delay("uniform", 0.0, 0.2)
    assert parse_rule("create:quota:100").quota == 100
    op = parse_rule("op:/writeram:fail:1")
    assert op.applies_to_route("/writeram") and not op.applies_to_route("/ping")
    assert parse_rule("router:fail:1").applies_to_route("/ping")


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("wake:crush:0.1", "'crush'"),
        ("bogus:fail:1", "unknown scope 'bogus'"),
        ("wake", "needs an action"),
        ("wake:refuse", "exactly one argument"),
        ("wake:refuse:0.1:0.2", "exactly one argument"),
        ("wake:refuse:1.5", "share '1.5'"),
        ("wake:refuse:lots", "share 'lots'"),
        ("router:fail:nan", "share 'nan'"),
        ("wake:fail:0.1", "wake takes no action 'fail'"),
        ("control:unavailable:1", "control takes no action 'unavailable'"),
        ("create:quota:-1", "quota '-1'"),
        ("create:quota:1.5", "quota '1.5'"),
        ("op:writeram:fail:0.1", "op needs a route"),
        ("router:latency", "no distribution"),
        ("router:latency:gamma:1s", "unknown distribution 'gamma'"),
        ("router:latency:exp", "expected exp:MEAN"),
        ("router:latency:uniform:1s", "expected uniform:MIN:MAX"),
        ("router:latency:uniform:2s:1s", "MIN '2s' is above MAX '1s'"),
        ("router:latency:0s", "must be > 0"),
        ("router:latency:5parsecs", "unknown unit 'parsecs'"),
    ],
)
def test_bad_rules_are_refused_in_one_line_naming_rule_and_part(text: str, names: str) -> None:
    with pytest.raises(FaultRuleError) as refused:
        parse_rule(text)
    message = str(refused.value)
    assert message.startswith(f"fault rule {text.strip()!r}: ") and names in message
    assert "\n" not in message
    assert refused.value.exit_code == 2  # a UsageError: `serve` exits 2


def test_the_help_text_names_every_scope_and_action() -> None:
    for word in ("wake", "create", "control", "router", "op:/ROUTE", "refuse", "crash"):
        assert word in LANGUAGE
    for word in ("quota", "fail", "latency", "hang", "reset", "unavailable", "uniform", "exp"):
        assert word in LANGUAGE


def decisions(faults: Faults, n: int) -> list[str | None]:
    return [faults.wake().action for _ in range(n)]


def test_decisions_are_seeded_per_rule_and_counted() -> None:
    rules = parse_rules(["wake:refuse:0.3"])
    first = decisions(Faults(rules, seed=7), 400)
    assert first == decisions(Faults(rules, seed=7), 400)
    assert first != decisions(Faults(rules, seed=8), 400)
    assert 80 <= first.count("refuse") <= 160
    # A rule added after it leaves its stream alone (its own stream is keyed by position
    # and text).
    both = Faults(parse_rules(["wake:refuse:0.3", "wake:latency:exp:1ms"]), seed=7)
    assert decisions(both, 400) == first
    faults = Faults(rules, seed=7)
    decisions(faults, 400)
    assert faults.describe() == {
        "seed": 7,
        "rules": [{"rule": "wake:refuse:0.3", "seen": 400, "fired": first.count("refuse")}],
    }


def test_latencies_add_up_and_the_first_share_rule_that_fires_decides() -> None:
    faults = Faults(
        parse_rules(["router:latency:10ms", "op:/ping:latency:fixed:5ms", "router:reset:1"]), 0
    )
    verdict = faults.router_arrival("/ping")
    assert verdict.action == "reset" and verdict.delay == pytest.approx(0.015)
    assert faults.router_arrival("/writeram").delay == pytest.approx(0.010)
    assert faults.op_failure("/ping").action is None  # reset acts on arrival, not after
    shed = Faults(parse_rules(["op:/ping:unavailable:1"]), 0)
    assert shed.router_arrival("/ping").action == "unavailable"
    assert shed.router_arrival("/writeram").action is None
    assert shed.op_failure("/ping").action is None  # on arrival too: before any wake
    faults.replace(parse_rules(["router:fail:1", "router:hang:1"]))
    assert faults.op_failure("/ping").action == "fail"
    assert faults.router_arrival("/ping").action == "hang"
    exp = Faults(parse_rules(["control:latency:exp:50ms"]), 3)
    mean = sum(exp.control().delay for _ in range(2000)) / 2000
    assert 0.04 < mean < 0.06


def test_create_quota_counts_live_actors() -> None:
    faults = Faults(parse_rules(["create:quota:2"]), 0)
    faults.check_create(0)
    faults.check_create(1)
    with pytest.raises(WireError) as refused:
        faults.check_create(2)
    assert refused.value.code == "RESOURCE_EXHAUSTED" and "quota of 2" in refused.value.message


async def test_byte_budget_waits_first_come_first_served_then_refuses() -> None:
    # A long wait while the queue is served (no load can run it out), a short one to refuse.
    budget = ByteBudget(total=100, per_request=80, wait=60)
    await budget.acquire(80, "a body")
    waiting = asyncio.create_task(budget.acquire(50, "a body"))
    small = asyncio.create_task(budget.acquire(10, "a body"))  # fits, but must not overtake
    await asyncio.sleep(0)  # one turn: both are queued
    assert not waiting.done() and not small.done()
    assert [n for n, _ in budget._waiters] == [50, 10]
    budget.release(80)
    await waiting
    await small
    assert budget.free == 40
    budget.wait = 0.2
    with pytest.raises(WireError) as full:
        await budget.acquire(60, "a body")
    assert (full.value.code, full.value.status) == ("RESOURCE_EXHAUSTED", 503)
    assert budget.free == 40 and not budget._waiters
    with pytest.raises(WireError) as never:
        await budget.acquire(101, "an answer")
    assert "above the router's buffer budget" in never.value.message
    assert budget.too_large(81).status == 413
