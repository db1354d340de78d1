"""Faults on demand in the local substrate (docs/SPEC.md §2.4): the rules in force
(fault_rules.py gives their language), the seeded decisions, and how each wire shows them.

`Faults` decides; the places that serve requests enact, each in its own wire's form:
- wakes (actors.py `_resume_locked`): latency, refusal (RESOURCE_EXHAUSTED, the answer of a
  pool with no room: 429 on the JSON control API, a 503 router verdict, 503 text on the ate
  router, the gRPC status), a crash (the worker is really killed after the load, so the pool
  marks the actor CRASHED and replaces the worker, as after any worker death);
- creates (actors.py `add`): a quota of live actors, a refused share;
- suspends (actors.py `suspend`): one answered OK that leaves the actor running;
- the snapshot store (actors.py, before a snapshot is written or read): a throttling refusal,
  RESOURCE_EXHAUSTED whose message starts with protocol.STORE_THROTTLED_PREFIX, so a client
  tells it from a pool with no room (errors.says_store_throttled);
- control calls: the JSON middleware here, the gRPC wrapper in ate_control.py (`enact_grpc`);
- router requests: latency / hang / reset / unavailable on arrival (the middleware here: the
  router's own 503 verdict, in the wire's form), a failed op after the wake (router.py,
  answered as the glutton would: no router verdict).

Every random choice comes from the rule's own stream, seeded by (fault seed, position, rule
text): the same seed and the same order of requests give the same faults, and a rule's
stream does not shift when another rule is added after it. Each rule counts how often it
was asked (`seen`) and how often it fired, so a test or a user can read the share it got.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from agentsession_core.substrate.protocol import (
    CONTROL_PREFIX,
    DEBUG_FAULTS_PATH,
    HEALTHZ_PATH,
    OPENAPI_PATH,
    STORE_THROTTLED_PREFIX,
    is_control_path,
)
from local_substrate.fault_rules import FaultRuleError, Rule, parse_rules
from local_substrate.protocol import (
    Handler,
    WireError,
    is_protobuf,
    json_response,
    plain,
)

if TYPE_CHECKING:
    from local_substrate.actors import Actor
    from local_substrate.pool import WorkerProc

# A hung request is held until its client goes away; this bounds it for a client that never
# does, so a forgotten connection cannot pin a handler for ever.
HANG_CEILING = 600.0
_HANG_POLL = 0.05
# Debug routes stay fault-free, so faults can always be read and changed (and so can the
# worker view a test reads while a fault is on).
_FAULT_FREE = (f"{CONTROL_PREFIX}/debug/", HEALTHZ_PATH, OPENAPI_PATH)


@dataclass(frozen=True)
class Verdict:
    """What to do to one request: wait `delay` seconds, then `action` (None: serve it)."""

    delay: float = 0.0
    action: str | None = None  # fail | hang | reset | unavailable | refuse | crash | ignore | …
    rule: str = ""

    @property
    def injected(self) -> str:
        return f"injected by fault rule {self.rule!r}"


NONE = Verdict()


class Faults:
    def __init__(self, rules: list[Rule] | None = None, seed: int = 0) -> None:
        self._stopping = asyncio.Event()
        self.replace(rules or [], seed)

    def replace(self, rules: list[Rule], seed: int | None = None) -> None:
        """New rules, with fresh streams and counts (a PUT starts a new rehearsal)."""
        if seed is not None:
            self.seed = seed
        self.rules = list(rules)
        self._rngs = [random.Random(f"{self.seed}/{i}/{r.text}") for i, r in enumerate(rules)]
        self._seen = [0] * len(rules)
        self._fired = [0] * len(rules)

    def describe(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "rules": [
                {"rule": r.text, "seen": self._seen[i], "fired": self._fired[i]}
                for i, r in enumerate(self.rules)
            ],
        }

    def stop(self) -> None:
        """Release every hung request (the server is going away)."""
        self._stopping.set()

    # ---- decisions ---------------------------------------------------------------------------

    def _decide(self, scope: str, actions: tuple[str, ...], route: str | None = None) -> Verdict:
        """Every latency rule that applies, summed; then the first share rule that fires, in
        rule order (later share rules are not asked: `seen` counts the requests that reached
        each)."""
        if not self.rules:
            return NONE
        delay, verdict = 0.0, NONE
        applying = [i for i, r in enumerate(self.rules) if _applies(r, scope, route)]
        if "latency" in actions:
            for i in applying:
                delay_rule = self.rules[i].delay
                if delay_rule is not None:
                    self._seen[i] += 1
                    self._fired[i] += 1
                    delay += delay_rule.draw(self._rngs[i])
        for i in applying:
            rule = self.rules[i]
            if rule.action in actions and rule.action != "latency":
                self._seen[i] += 1
                if self._rngs[i].random() < rule.share:
                    self._fired[i] += 1
                    verdict = Verdict(0.0, rule.action, rule.text)
                    break
        if not delay:
            return verdict
        return Verdict(delay, verdict.action, verdict.rule)

    def wake(self) -> Verdict:
        return self._decide("wake", ("latency", "refuse", "crash"))

    def suspend_ignored(self) -> bool:
        """SuspendActor answers OK and does nothing (`suspend:ignore`)."""
        return self._decide("suspend", ("ignore",)).action == "ignore"

    def check_store(self, actor: Actor, what: str, *, router: bool) -> None:
        """RESOURCE_EXHAUSTED in the words of a throttled bucket (`store:throttle`) before the
        snapshot of `actor` is written or read (`what`)."""
        verdict = self._decide("store", ("throttle",))
        if verdict.action == "throttle":
            raise WireError(
                "RESOURCE_EXHAUSTED",
                f"{STORE_THROTTLED_PREFIX}: SlowDown: please reduce your request rate "
                f"({what} the snapshot of actor {actor.key}; {verdict.injected})",
                router=router,
            )

    def control(self) -> Verdict:
        return self._decide("control", ("latency", "fail", "hang", "reset"))

    def router_arrival(self, route: str) -> Verdict:
        return self._decide("router", ("latency", "hang", "reset", "unavailable"), route)

    def op_failure(self, route: str) -> Verdict:
        return self._decide("router", ("fail",), route)

    def check_create(self, live: int) -> None:
        """RESOURCE_EXHAUSTED for a create beyond a quota or in a refused share."""
        for i, rule in enumerate(self.rules):
            if rule.scope == "create" and rule.action == "quota":
                self._seen[i] += 1
                if live >= rule.quota:
                    self._fired[i] += 1
                    raise WireError(
                        "RESOURCE_EXHAUSTED",
                        f"actor quota of {rule.quota} reached ({live} live actors; "
                        f"injected by fault rule {rule.text!r})",
                    )
        verdict = self._decide("create", ("refuse",))
        if verdict.action == "refuse":
            raise WireError("RESOURCE_EXHAUSTED", f"no room for a new actor ({verdict.injected})")

    # ---- enacting, per wire -------------------------------------------------------------------

    async def before_wake(self, actor: Actor, *, router: bool) -> Verdict:
        """Latency and refusal of a wake; the verdict says whether to crash it once loaded."""
        verdict = self.wake()
        if verdict.delay:
            await asyncio.sleep(verdict.delay)
        if verdict.action == "refuse":
            raise WireError(
                "RESOURCE_EXHAUSTED",
                f"no worker for actor {actor.key} ({verdict.injected})",
                router=router,
            )
        return verdict

    async def crash_on_wake(
        self, actor: Actor, worker: WorkerProc, verdict: Verdict, *, router: bool
    ) -> None:
        """Kill the worker that just loaded the actor, wait until the pool has seen it (the
        actor is CRASHED, as after any worker death: docs/SPEC.md §2.4), then answer the wake
        as a crash (§3.4: replace it)."""
        worker.process.kill()
        await worker.process.wait()
        for _ in range(200):  # the pool's watcher runs on its own task
            if actor.status == "CRASHED":
                break
            await asyncio.sleep(0.005)
        raise WireError(
            "ABORTED",
            f"actor {actor.key} crashed on wake (its worker died; {verdict.injected})",
            router=router,
        )

    async def hang(self, request: web.Request | None = None) -> None:
        """Hold the request without an answer until its client goes away (HTTP: its
        connection closes; gRPC: the call is cancelled at its deadline), the server stops,
        or HANG_CEILING passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HANG_CEILING
        while loop.time() < deadline and not self._stopping.is_set():
            if request is not None and _gone(request):
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_HANG_POLL):
                    await self._stopping.wait()

    async def enact_http(self, verdict: Verdict, request: web.Request) -> web.Response | None:
        """A control or router request's arrival faults; None: go on and serve it."""
        if verdict.delay:
            await asyncio.sleep(verdict.delay)
        if verdict.action == "fail":
            raise WireError("INTERNAL", f"{request.path}: server error ({verdict.injected})")
        if verdict.action == "hang":
            await self.hang(request)
            reset(request)
            return web.Response(status=504)  # never reaches the client: the socket is gone
        if verdict.action == "reset":
            reset(request)
            return web.Response(status=502)  # likewise
        if verdict.action == "unavailable":  # router scopes only (fault_rules.ACTIONS_OF)
            message = f"router: unavailable ({verdict.injected})"
            if is_protobuf(request):
                return plain(503, message)  # a real router's text denial (router.py)
            raise WireError("UNAVAILABLE", message, router=True)
        return None

    async def enact_grpc(self, verdict: Verdict) -> None:
        """A gRPC control call's faults: the status each one shows to a gRPC client."""
        if verdict.delay:
            await asyncio.sleep(verdict.delay)
        if verdict.action == "fail":
            raise WireError("INTERNAL", f"server error ({verdict.injected})")
        if verdict.action == "hang":
            await self.hang()
            raise WireError("DEADLINE_EXCEEDED", f"no answer ({verdict.injected})")
        if verdict.action == "reset":  # what a gRPC client reports for a reset connection
            raise WireError("UNAVAILABLE", f"connection reset ({verdict.injected})")

    def op_failed(self, request: web.Request) -> web.Response | None:
        """After the wake: a 500 from the glutton inside the actor, in its wire's form (the
        JSON error body without the router's verdict header; text on the ate wire)."""
        verdict = self.op_failure(request.path)
        if verdict.action != "fail":
            return None
        message = f"{request.path}: internal error in the glutton ({verdict.injected})"
        if is_protobuf(request):
            return plain(500, message)
        return WireError("INTERNAL", message).response()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if self.rules and not path.startswith(_FAULT_FREE):
            control = is_control_path(path)
            verdict = self.control() if control else self.router_arrival(path)
            if verdict is not NONE:
                answer = await self.enact_http(verdict, request)
                if answer is not None:
                    return answer
        return await handler(request)

    # ---- the control endpoint ------------------------------------------------------------------

    def add_routes(self, router: web.UrlDispatcher) -> None:
        router.add_get(DEBUG_FAULTS_PATH, self.get_rules)
        router.add_put(DEBUG_FAULTS_PATH, self.put_rules)

    async def get_rules(self, request: web.Request) -> web.Response:
        return json_response(self.describe())

    async def put_rules(self, request: web.Request) -> web.Response:
        """A JSON list of rules, or {"rules": [...], "seed": N}; all or nothing."""
        try:
            body = await request.json()
        except ValueError as exc:
            raise WireError("INVALID_ARGUMENT", f"faults: malformed JSON body: {exc}") from None
        seed = None
        if isinstance(body, dict):
            seed = body.get("seed")
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
                raise WireError("INVALID_ARGUMENT", "faults: 'seed' must be an integer")
            body = body.get("rules")
        if not isinstance(body, list):
            raise WireError(
                "INVALID_ARGUMENT", 'faults: expected a JSON list of rules or {"rules": [...]}'
            )
        try:
            rules = parse_rules(body)
        except FaultRuleError as exc:
            raise WireError("INVALID_ARGUMENT", str(exc)) from None
        self.replace(rules, seed)
        shown = ", ".join(r.text for r in rules) or "none"
        print(f"agentsession substrate: fault rules now: {shown}", file=sys.stderr, flush=True)
        return json_response(self.describe())


def _applies(rule: Rule, scope: str, route: str | None) -> bool:
    if scope == "router":
        return route is not None and rule.applies_to_route(route)
    return rule.scope == scope


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def reset(request: web.Request) -> None:
    """Close the request's connection without an answer: SO_LINGER 0 makes the close an RST,
    so the client sees "connection reset by peer", as from a crashed proxy."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
