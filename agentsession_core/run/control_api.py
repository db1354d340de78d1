"""The control API (docs/SPEC.md §5.10): GET and PATCH /v1/status on the run's metrics port.

GET says what the run is doing now (state, level, paused, stopped, the intended and achieved
rate of the last closed second, residents, elapsed, a campaign's window); PATCH changes it by
hand with one JSON object: `{"level": 2.5}`, `{"paused": true}` / `{"paused": false}`,
`{"stopped": true}`. The run's bearer token (target.token, or target.token_file read on every
request) is required when the run has one, compared in constant time. A refusal is one line
naming the field: 400 for a bad body, 401 without the token, 409 once the run is stopping,
413 for a body over MAX_BODY. Bodies are parsed by orjson, which refuses NaN and nesting
deeper than 1024 (a body of nested brackets made Python's json raise RecursionError: a 500
and a traceback in the run's log, issue #29), and a bad value is shown bounded.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from agentsession_core.engine.load import Load
from agentsession_core.engine.params import RunParams
from agentsession_core.errors import clip
from agentsession_core.measure.stats import (
    ARRIVALS_ROW,
    ROUTER_KIND,
    STEPS_DUE_ROW,
    TIME_TO_WAKE_ROW,
)
from agentsession_core.run.live_control import MAX_LEVEL, LiveControl

if TYPE_CHECKING:
    from agentsession_core.measure.prometheus import MetricsServer

STATUS_PATH = "/v1/status"
FIELDS = ("level", "paused", "stopped")
MAX_BODY = 4096  # bytes: a change is one small object
ENDING = ("stopping", "stopped", "cleanup", "done")  # a load's phases after it stopped
RATE_UNIT = {
    "turnover": "wakes/s",
    "closed": "steps/s",
    "turns": "turns/s",
    "cold-resume": "resumes/s",
}


class BadBody(ValueError):
    """A PATCH body the API refuses (400), with the one line naming the field."""


def parse_change(body: bytes) -> dict[str, Any]:
    """The fields of a PATCH body, checked: a JSON object of known fields only; level a
    number in (0, MAX_LEVEL]; paused a boolean; stopped only true."""
    try:
        doc = orjson.loads(body or b"null")
    except orjson.JSONDecodeError as exc:
        raise BadBody(f"body: not JSON ({' '.join(str(exc).split())[:200]})") from None
    if not isinstance(doc, dict) or not doc:
        raise BadBody(f"body: a JSON object with one of {', '.join(FIELDS)}")
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise BadBody(f"{unknown[0]}: unknown field (known: {', '.join(FIELDS)})")
    if "level" in doc:
        level = doc["level"]
        if isinstance(level, bool) or not isinstance(level, int | float):
            raise BadBody(f"level: {shown(level)} is not a number")
        if not (math.isfinite(level) and 0 < level <= MAX_LEVEL):
            raise BadBody(f"level: {level:g} must be > 0 and at most {MAX_LEVEL:g}")
    if "paused" in doc and not isinstance(doc["paused"], bool):
        raise BadBody(f"paused: {shown(doc['paused'])} is not true or false")
    if "stopped" in doc and doc["stopped"] is not True:
        raise BadBody(
            f"stopped: only true (a stopped run cannot be resumed), got {shown(doc['stopped'])}"
        )
    return doc


def shown(value: Any, limit: int = 60) -> str:
    """A body's value as JSON for a refusal, bounded: a value nested a thousand deep is
    neither rendered whole nor allowed to exhaust the stack (orjson stops at 255 levels)."""
    try:
        text = orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return clip(value, limit)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


async def _body(request: web.Request) -> bytes | None:
    """The request's body, or None when it is larger than MAX_BODY: refused from its
    Content-Length when it has one, else after reading one byte past the bound."""
    if request.content_length is not None and request.content_length > MAX_BODY:
        return None
    body = b""
    while len(body) <= MAX_BODY:  # read() may return less than asked: up to the end
        chunk = await request.content.read(MAX_BODY + 1 - len(body))
        if not chunk:
            break
        body += chunk
    return None if len(body) > MAX_BODY else body


def _refusal(status: int, line: str) -> web.Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return web.json_response({"error": line}, status=status, headers=headers)


class ControlAPI:
    """The routes, bound to one run: its parameters, its changes by hand, its load (local or
    sharded alike), when it started and the campaign window it holds now."""

    def __init__(
        self,
        params: RunParams,
        control: LiveControl,
        load: Load,
        started_unix: float,
        window: Callable[[], dict[str, Any] | None],
    ) -> None:
        self.params, self.control, self.load = params, control, load
        self.started_unix = started_unix
        self.window = window
        self._lock = asyncio.Lock()  # one change at a time: each is booked against the last

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get(STATUS_PATH, self._get)
        app.router.add_patch(STATUS_PATH, self._patch)

    @staticmethod
    def url(metrics: MetricsServer) -> str:
        return f"http://{metrics.host}:{metrics.port}{STATUS_PATH}"

    # ------------------------------------------------------------ auth
    async def _expected_token(self) -> str | None:
        target = self.params.target
        if target.token:
            return target.token
        if target.token_file:  # re-read: a rotated token is the one that counts
            text = await asyncio.to_thread(Path(target.token_file).read_text)
            return text.strip() or None
        return None

    async def _unauthorised(self, request: web.Request) -> web.Response | None:
        try:
            expected = await self._expected_token()
        except OSError as exc:
            return _refusal(503, f"target.token_file: cannot be read ({exc.strerror or exc})")
        if expected is None:
            return None
        given = request.headers.get("Authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return _refusal(401, "Authorization: this run needs its bearer token (Bearer …)")
        if not hmac.compare_digest(token.strip().encode(), expected.encode()):
            return _refusal(401, "Authorization: the bearer token is not this run's")
        return None

    # ------------------------------------------------------------ routes
    async def _get(self, request: web.Request) -> web.Response:
        if (refused := await self._unauthorised(request)) is not None:
            return refused
        return web.json_response(self.status())

    async def _patch(self, request: web.Request) -> web.Response:
        if (refused := await self._unauthorised(request)) is not None:
            return refused
        body = await _body(request)
        if body is None:
            return _refusal(413, f"body: more than {MAX_BODY} bytes")
        try:
            change = parse_change(body)
        except BadBody as exc:
            return _refusal(400, str(exc))
        async with self._lock:
            if self.control.stop is not None:
                return _refusal(409, f"stopped: the run is stopping ({self.control.stop_line})")
            if (state := self.load.phase) == "setup":
                return _refusal(409, "the run has not opened its engine yet")
            if state in ENDING:
                return _refusal(409, f"the run is ending ({state}): nothing left to change")
            await self._apply(change)
        return web.json_response(self.status())

    async def _apply(self, change: dict[str, Any]) -> None:
        load, control = self.load, self.control
        if "level" in change and float(change["level"]) != load.level:
            before, after = load.level, float(change["level"])
            await load.set_level(after)
            control.note("level", before, after)
        level = load.level
        if "paused" in change and change["paused"] != control.paused:
            await load.set_paused(change["paused"])
            control.note("pause" if change["paused"] else "resume", level, level)
        if change.get("stopped"):
            control.note("stop", level, level)

    # ------------------------------------------------------------ the status
    def status(self) -> dict[str, Any]:
        load, control = self.load, self.control
        intended, achieved = self.rates()
        return {
            "state": load.phase,
            "level": load.level,
            "paused": control.paused,
            "stopped": control.stop is not None,
            "intended_rate": intended,
            "achieved_rate": achieved,
            "rate_unit": RATE_UNIT.get(self.params.population.kind, "per s"),
            "residents": load.residents(),
            "elapsed_seconds": round(time.time() - self.started_unix, 3),
            "window": self.window(),
            "changes": len(control.changes),
        }

    def rates(self) -> tuple[float | None, float | None]:
        """(intended, achieved) per second: the intended rate now, the achieved one of the last
        second the run's reporter closed (it closes one a second, so it trails the load by up
        to two seconds; GET never closes a second itself). Turnover's
        target_rps × level (0 while paused) against its successful wakes; closed's steps due
        and turns' arrivals against the successful steps (docs/SPEC.md §6's achieved_rps)."""
        recorder = self.load.recorder
        second = recorder.closed_until - 1
        if second < recorder.first_second:
            return None, None
        rows = recorder.window_seconds(second, second + 1).rows
        population = self.params.population

        def ok(key: tuple[str, str]) -> float:
            stats = rows.get(key)
            return float(stats.count - stats.failures) if stats else 0.0

        def events(key: tuple[str, str]) -> float:
            stats = rows.get(key)
            return float(stats.events) if stats else 0.0

        if population.kind in ("turnover", "cold-resume"):
            intended = 0.0 if self.control.paused else population.target_rps * self.load.level
            return intended, ok(TIME_TO_WAKE_ROW)
        steps = sum(ok(k) for k in rows if k[0] == ROUTER_KIND and k[1].startswith("Step_"))
        due = events(STEPS_DUE_ROW if population.kind == "closed" else ARRIVALS_ROW)
        return due, steps


__all__ = ["FIELDS", "STATUS_PATH", "BadBody", "ControlAPI", "parse_change"]
