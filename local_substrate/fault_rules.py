"""The local substrate's fault language (docs/SPEC.md §2.4): one rule per line, parsed here,
enacted by faults.py. LANGUAGE below is the grammar and what each rule does; `agentsession
substrate serve --help` and the generated docs/reference/faults.md show the same text.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from agentsession_core.errors import UsageError
from agentsession_core.script.quantity import QuantityError, parse_duration, seconds

LANGUAGE = """\
RULE  := SCOPE:ACTION[:ARG]
SCOPE := wake | create | suspend | store | control | router | op:/ROUTE

wake:refuse:SHARE     a wake (ResumeActor, or a router request's implicit wake) is refused
                      with RESOURCE_EXHAUSTED, as when no worker frees up in time
wake:crash:SHARE      the actor is loaded, then its worker is killed: the actor is CRASHED
                      and the wake answers ABORTED "... crashed"
wake:latency:DIST     every wake takes DIST longer (a slow snapshot restore)
create:quota:N        CreateActor beyond N live actors is RESOURCE_EXHAUSTED
create:refuse:SHARE   CreateActor is RESOURCE_EXHAUSTED
suspend:ignore:SHARE  SuspendActor answers OK but the actor keeps running (a suspend that
                      silently did not happen): its next ResumeActor answers resumed=false
store:throttle:SHARE  the snapshot store refuses a snapshot write (a suspend) or read (a
                      wake's restore) as a throttled bucket does: RESOURCE_EXHAUSTED
                      "snapshot store throttled: SlowDown ..." (JSON 429, router 503)
control:ACTION        calls of both control APIs (JSON and gRPC), ACTION as below
router:ACTION         every router request
op:/ROUTE:ACTION      router requests to one glutton route, e.g. op:/writeram:fail:1%

  fail:SHARE          control: INTERNAL (500); router/op: a 500 from the glutton inside the
                      (woken) actor, not a router verdict
  latency:DIST        added before the call or request is handled
  hang:SHARE          no answer at all, until the client gives up
  reset:SHARE         the connection is closed without an answer (gRPC: UNAVAILABLE)
  unavailable:SHARE   router/op only: the router's own 503 (UNAVAILABLE) on arrival, before
                      any wake, as from a router that restarts or sheds load

SHARE := 0.05 | 5%    a probability in [0, 1]
DIST  := DURATION | fixed:DURATION | uniform:MIN:MAX | exp:MEAN    (Go durations: 50ms, 1.5s)

Rules add up: the latencies that apply are summed, then the first share rule (in the given
order) that fires decides. Every choice is drawn from the rule's own stream, seeded by
--fault-seed, the rule's position and its text.
"""

# What each scope takes: the actions a real platform can show at that place.
ACTIONS_OF = {
    "wake": ("refuse", "crash", "latency"),
    "create": ("quota", "refuse"),
    "suspend": ("ignore",),
    "store": ("throttle",),
    "control": ("fail", "latency", "hang", "reset"),
    # unavailable: only a router has a verdict of its own to give (the control API's 503 is
    # what reset shows on gRPC, and a wake's is wake:refuse).
    "router": ("fail", "latency", "hang", "reset", "unavailable"),
    "op": ("fail", "latency", "hang", "reset", "unavailable"),
}
DISTRIBUTIONS = ("fixed", "uniform", "exp")
EXAMPLES = (
    "e.g. wake:refuse:0.2, op:/writeram:fail:1%, router:latency:exp:50ms, create:quota:100, "
    "suspend:ignore:5%, store:throttle:0.5"
)


class FaultRuleError(UsageError):
    """A rule that does not parse; the message names the rule and the bad part."""


@dataclass(frozen=True)
class Delay:
    """A latency distribution, in seconds."""

    kind: str  # fixed | uniform | exp
    low: float
    high: float = 0.0  # uniform's upper bound; unused otherwise

    def draw(self, rng: random.Random) -> float:
        if self.kind == "fixed":
            return self.low
        if self.kind == "uniform":
            return rng.uniform(self.low, self.high)
        return rng.expovariate(1.0 / self.low)  # exp: low is the mean


@dataclass(frozen=True)
class Rule:
    text: str  # as given, stripped: what GET /v1/debug/faults shows
    scope: str  # wake | create | suspend | store | control | router | op
    action: str
    route: str | None = None  # op's route, "/writeram"
    share: float = 0.0  # refuse / crash / fail / hang / reset / unavailable / ignore / throttle
    delay: Delay | None = None  # latency
    quota: int = 0  # create:quota

    def applies_to_route(self, route: str) -> bool:
        return self.scope == "router" or (self.scope == "op" and self.route == route)


def parse_rules(texts: Iterable[str]) -> list[Rule]:
    return [parse_rule(text) for text in texts]


def parse_rule(text: str) -> Rule:
    if not isinstance(text, str):
        raise FaultRuleError(f"fault rule {text!r}: expected a string like {EXAMPLES}")
    rule = text.strip()
    parts = rule.split(":")
    scope, route = parts[0], None
    where = f"fault rule {rule!r}"
    if scope == "op":
        if len(parts) < 2 or not parts[1].startswith("/") or len(parts[1]) < 2:
            raise FaultRuleError(f"{where}: op needs a route, e.g. op:/writeram:fail:0.01")
        route = parts[1]
        parts = parts[1:]
    if scope not in ACTIONS_OF:
        raise FaultRuleError(
            f"{where}: unknown scope {scope!r} (expected one of {', '.join(ACTIONS_OF)}; "
            f"{EXAMPLES})"
        )
    if len(parts) < 2 or not parts[1]:
        raise FaultRuleError(f"{where}: {scope} needs an action ({', '.join(ACTIONS_OF[scope])})")
    action, args = parts[1], parts[2:]
    if action not in ACTIONS_OF[scope]:
        raise FaultRuleError(
            f"{where}: {scope} takes no action {action!r} "
            f"(expected one of {', '.join(ACTIONS_OF[scope])})"
        )
    if action == "latency":
        return Rule(rule, scope, action, route, delay=_delay(args, where))
    if len(args) != 1:
        wanted = "a count of actors" if action == "quota" else "a share (0.05 or 5%)"
        raise FaultRuleError(f"{where}: {action} takes exactly one argument, {wanted}")
    if action == "quota":
        return Rule(rule, scope, action, route, quota=_count(args[0], where))
    return Rule(rule, scope, action, route, share=_share(args[0], where))


def _share(text: str, where: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise FaultRuleError(f"{where}: share {text!r} must be in [0, 1] (0.05) or a percent (5%)")
    return value


def _count(text: str, where: str) -> int:
    if not text.isdigit():
        raise FaultRuleError(f"{where}: quota {text!r} must be a whole number of actors >= 0")
    return int(text)


def _duration(text: str, where: str, *, positive: bool = True) -> float:
    try:
        ns = parse_duration(text)
    except QuantityError as exc:
        raise FaultRuleError(f"{where}: {exc}") from None
    if ns < 0 or (positive and ns == 0):
        raise FaultRuleError(f"{where}: duration {text!r} must be > 0")
    return seconds(ns)


def _delay(args: list[str], where: str) -> Delay:
    if len(args) == 1 and args[0] not in DISTRIBUTIONS:
        return Delay("fixed", _duration(args[0], where))
    kind, values = (args[0], args[1:]) if args else ("", [])
    forms = {"fixed": "fixed:DURATION", "exp": "exp:MEAN", "uniform": "uniform:MIN:MAX"}
    if kind not in forms:
        got = f"unknown distribution {kind!r}" if kind else "no distribution"
        raise FaultRuleError(
            f"{where}: latency: {got} (expected DURATION, fixed:DURATION, uniform:MIN:MAX "
            "or exp:MEAN)"
        )
    if len(values) != forms[kind].count(":"):
        example = {"fixed": "fixed:20ms", "exp": "exp:50ms", "uniform": "uniform:10ms:200ms"}
        raise FaultRuleError(f"{where}: latency: expected {forms[kind]}, e.g. {example[kind]}")
    if kind == "uniform":
        low = _duration(values[0], where, positive=False)
        high = _duration(values[1], where)
        if low > high:
            raise FaultRuleError(f"{where}: uniform's MIN {values[0]!r} is above MAX {values[1]!r}")
        return Delay("uniform", low, high)
    return Delay(kind, _duration(values[0], where))
