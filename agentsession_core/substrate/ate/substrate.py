"""AteSubstrate: the Substrate interface over Agent Substrate's own wire (docs/SPEC.md §2, "ate").

Control calls go through ControlClient (ateapi.Control over gRPC, control.py); requests to
actors go through the same lean keep-alive client as the JSON wire (router_client.py), with
each op's JSON-wire arguments turned into the glutton's protobuf request (glutton_codec) once,
and every 2xx answer decoded into its typed result: a 2xx that does not decode is BAD_BODY,
counted like any glutton failure (§3.4).

The router sets no verdict header; errors.ate_router_error reads its denials. One of them is
handled here: 421 with `x-ate-assignment-stale: true` means the actor moved off the worker the
router picked before the request reached it, so the actor never saw it and a resend is safe;
the router resolves the assignment afresh on the resend. Up to STALE_RESENDS resends go at
once, within the request's one deadline; only then is the 421 classified (retry later). No
other answer is ever resent.

Not on this wire: SuspendActorAsync. ateapi.Control has only the synchronous SuspendActor, and
imitating the async call (firing SuspendActor without awaiting it) would book our own send time
as the substrate's and lose the call's failures, so `suspend_actor(wait=False)` is refused as a
misconfiguration (RunParams refuses `lifecycle_mode: suspend-async` with the ate wire first).

The worker listing (list_workers) is ListWorkers, then ListWorkerActorAssignments for each
worker, at most ASSIGNMENT_CALLS at once. Against a control API without them (one from before
multi-actor workers) it raises SubstrateError UNIMPLEMENTED, as the interface says.

Credentials: the bearer token (or token file, re-read per call) and TLS settings are the
control API's. A plain `token` also goes to the router, as on the JSON wire (the local
substrate checks it there); a token file holds a service-account token minted for the API
server's audience and is never sent to the router.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentsession_core.substrate.ate import control_codec as codec
from agentsession_core.substrate.ate import glutton_codec
from agentsession_core.substrate.ate.control import (
    DEFAULT_SERVER_NAME,
    DEFAULT_TIMEOUT,
    TOKEN_SOURCES,
    Answer,
    ControlClient,
)
from agentsession_core.substrate.errors import (
    TIMEOUT,
    SubstrateError,
    ate_router_error,
    stale_assignment,
)
from agentsession_core.substrate.interface import (
    ActorInfo,
    RouterResponse,
    Template,
    WorkerInfo,
    note_server_time,
)
from agentsession_core.substrate.op_limits import OP_LIMITS_TRAILER, OpLimits
from agentsession_core.substrate.protocol import (
    ELAPSED_HEADER,
    PROTOBUF_CONTENT_TYPE,
    TARGET_HEADER,
    actor_target,
)
from agentsession_core.substrate.router_client import DEFAULT_MAX_ANSWER_BYTES, FastRouterClient
from agentsession_core.substrate.router_client import Answer as RouterAnswer
from agentsession_core.substrate.router_tls import RouterTls
from agentsession_core.substrate.router_wire import server_elapsed_us

STALE_RESENDS = 2  # resends of a 421-stale request (3 sends in all), all at once
# Assignment listings in flight at once: a cluster of a thousand workers is listed in a few
# round trips' time without opening a thousand streams on one channel.
ASSIGNMENT_CALLS = 16
_CONTENT_TYPE_LINE = f"Content-Type: {PROTOBUF_CONTENT_TYPE}\r\n"


class AteSubstrate:
    """The Substrate interface against an ate control API (`grpc://host:port` or
    `grpcs://host[:port]`) and its HTTP router (`http://host[:port]`)."""

    def __init__(
        self,
        control_url: str,
        router_url: str,
        *,
        token: str | None = None,
        token_file: str | Path | None = None,
        ca_file: str | Path | None = None,
        cert_file: str | Path | None = None,
        key_file: str | Path | None = None,
        server_name: str | None = DEFAULT_SERVER_NAME,
        control_timeout: float = DEFAULT_TIMEOUT,
        router_timeout: float = 120.0,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        router_tls: RouterTls | None = None,
    ) -> None:
        self.control_url = control_url
        self.control = ControlClient(
            control_url,
            token=token,
            token_file=token_file,
            ca_file=ca_file,
            cert_file=cert_file,
            key_file=key_file,
            server_name=server_name,
            timeout=control_timeout,
        )
        self.router = FastRouterClient(
            router_url,
            token=token,
            timeout=router_timeout,
            max_answer_bytes=max_answer_bytes,
            tls=router_tls,
        )
        # What to check when the router refuses who we are: it gets the plain token only.
        if token:
            self._router_check = f"target.token ({TOKEN_SOURCES}; the router got it)"
        else:
            self._router_check = (
                f"target.token ({TOKEN_SOURCES}): the router got no token "
                "(a target.token_file goes to the control API only)"
            )

    # ---------------------------------------------------------------- control API
    @staticmethod
    def _noted(answer: Answer[Any]) -> Any:
        note_server_time(answer.server_elapsed_us)
        return answer.message

    async def get_template(self, namespace: str, name: str) -> Template:
        answer = await self.control.get_actor_template(namespace, name)
        info = codec.template_info(self._noted(answer), namespace, name)
        # The caps ride in a trailer, so the ActorTemplate message stays the ate wire's own.
        stated = dict(answer.trailers).get(OP_LIMITS_TRAILER)
        if stated is None:
            return info
        return dataclasses.replace(info, op_limits=OpLimits.from_text(stated))

    async def ensure_atespace(self, atespace: str) -> None:
        try:
            self._noted(await self.control.create_atespace(atespace))
        except SubstrateError as exc:
            if exc.code != "ALREADY_EXISTS":  # an existing atespace is what we asked for
                raise

    async def create_actor(
        self,
        atespace: str,
        name: str,
        template_namespace: str,
        template_name: str,
        *,
        worker_selector: Mapping[str, str] | None = None,
    ) -> ActorInfo:
        answer = await self.control.create_actor(
            atespace, name, template_namespace, template_name, worker_selector=worker_selector
        )
        return codec.actor_info(self._noted(answer), atespace=atespace, name=name)

    async def get_actor(self, atespace: str, name: str) -> ActorInfo:
        actor = self._noted(await self.control.get_actor(atespace, name))
        return codec.actor_info(actor, atespace=atespace, name=name)

    async def list_actors(self, atespace: str) -> list[ActorInfo]:
        actors: list[ActorInfo] = []
        token = ""
        while True:
            page = self._noted(await self.control.list_actors(atespace, token))
            actors += [codec.actor_info(a, atespace=atespace) for a in page.actors]
            token = page.next_page_token
            if not token:
                return actors

    async def resume_actor(self, atespace: str, name: str) -> ActorInfo:
        answer = self._noted(await self.control.resume_actor(atespace, name))
        info = codec.actor_info(answer.actor, atespace=atespace, name=name)
        return dataclasses.replace(info, resumed=answer.resumed)

    async def suspend_actor(self, atespace: str, name: str, *, wait: bool = True) -> None:
        if not wait:
            raise SubstrateError(
                "INVALID_ARGUMENT",
                "SuspendActorAsync: the ate wire has no asynchronous suspend "
                "(lifecycle_mode suspend-async needs the json wire)",
            )
        self._noted(await self.control.suspend_actor(atespace, name))

    async def pause_actor(self, atespace: str, name: str) -> None:
        self._noted(await self.control.pause_actor(atespace, name))

    async def delete_actor(self, atespace: str, name: str) -> None:
        # any_state: cleanup and replacement delete actors in whatever state they are in.
        self._noted(await self.control.delete_actor(atespace, name, any_state=True))

    async def list_workers(self) -> list[WorkerInfo]:
        workers: list[Any] = []
        token = ""
        try:
            while True:
                page = self._noted(await self.control.list_workers(token))
                workers += page.workers
                token = page.next_page_token
                if not token:
                    break
            gate = asyncio.Semaphore(ASSIGNMENT_CALLS)

            async def assigned(worker: Any) -> tuple[list[Any], list[int | None]]:
                # The answers' server times go back to this task: the ContextVar that books
                # them is per task, and gather runs each of these in a task of its own.
                found: list[Any] = []
                elapsed: list[int | None] = []
                page_token = ""
                async with gate:
                    while True:
                        answer = await self.control.list_worker_actor_assignments(
                            codec.worker_key(worker), page_token
                        )
                        elapsed.append(answer.server_elapsed_us)
                        found += answer.message.actor_assignments
                        page_token = answer.message.next_page_token
                        if not page_token:
                            return found, elapsed

            listed = await asyncio.gather(*(assigned(w) for w in workers))
        except SubstrateError as exc:
            if exc.code == "UNIMPLEMENTED":
                raise SubstrateError(
                    "UNIMPLEMENTED",
                    f"{exc.message} (the control API at {self.control_url} has no worker "
                    "listing: a server from before multi-actor workers)",
                ) from None
            raise
        infos = []
        for worker, (assignments, elapsed) in zip(workers, listed, strict=True):
            for us in elapsed:
                note_server_time(us)
            infos.append(codec.worker_info(worker, assignments))
        return infos

    # ---------------------------------------------------------------- router
    async def request(
        self,
        atespace: str,
        actor: str,
        route: str,
        *,
        json: Any = None,
        body: bytes | None = None,
        params: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> RouterResponse:
        try:
            # /ingest's key travels inside IngestRequest, so nothing goes in the query.
            payload = glutton_codec.encode_request(route, json=json, body=body, params=params)
        except glutton_codec.GluttonEncodeError as exc:
            # The script asks for something the glutton's messages cannot carry: the run is
            # wrong, not the actor (surfaced loudly, never counted toward replacement).
            raise SubstrateError("INVALID_ARGUMENT", str(exc)) from None
        headers = f"{TARGET_HEADER}: {actor_target(atespace, actor)}\r\n{_CONTENT_TYPE_LINE}"
        wire = self.router.encode("POST", route, headers.encode("latin-1"), payload, None)
        limit = timeout if timeout is not None else self.router.timeout
        started = time.monotonic()
        answer = await self.router.send(route, wire, timeout=limit)
        if not 200 <= answer.status < 300:
            answer = await self._after_denial(route, wire, answer, started + limit)
        content_type = answer.headers.get("content-type")
        result = glutton_codec.decode_answer(route, answer.body, content_type=content_type)
        elapsed = server_elapsed_us(answer.headers.get(ELAPSED_HEADER))
        note_server_time(elapsed)
        return RouterResponse(
            status=answer.status,
            body=answer.body,
            content_type=content_type or PROTOBUF_CONTENT_TYPE,
            server_elapsed_us=elapsed,
            headers=answer.headers,
            result=result,
        )

    async def _after_denial(
        self, route: str, wire: bytes, answer: RouterAnswer, deadline: float
    ) -> RouterAnswer:
        """A non-2xx answer: resend a stale assignment (at once, within the request's one
        deadline, up to STALE_RESENDS times) and return the 2xx that follows; raise anything
        else as the failure it is."""
        resends = 0
        while True:
            if 200 <= answer.status < 300:
                return answer
            if resends >= STALE_RESENDS or not stale_assignment(answer.status, answer.headers):
                error = ate_router_error(answer.status, answer.body, answer.headers)
                if error.credential_refused:
                    error.check = self._router_check
                raise error
            left = deadline - time.monotonic()
            if left <= 0:
                raise SubstrateError(TIMEOUT, f"router {route}: no answer within the timeout")
            resends += 1
            answer = await self.router.send(route, wire, timeout=left)

    async def aclose(self) -> None:
        await asyncio.gather(self.control.aclose(), self.router.aclose())
