"""An async client for Agent Substrate's control API (`ateapi.Control` over gRPC), covering the
nine lifecycle methods the engine drives (docs/SPEC.md §2.1 gives their JSON-wire
counterparts) and the worker listing (ListWorkers, ListWorkerActorAssignments; §2.7).

Built from ateapi.proto, a strict subset of the newest layout (ateapi_sep.proto; docs/SPEC.md
§2.5): it sends no field the newest layout removed (ResumeActorRequest.boot) and reads answers
by presence, so it works against servers of either layout. A server from before the worker
listing answers those two calls UNIMPLEMENTED, which is raised as such.

Transport and auth follow the ate wire notes:
- target `grpc://host:port` (plaintext) or `grpcs://host[:port]` (TLS, port 443 by default);
- TLS trusts `ca_file` (else the system roots), presents `cert_file`/`key_file` for mTLS, and
  verifies the server as `api.ate-system.svc` whatever address is dialled, because that is the
  name the API server's certificate carries (override with `server_name`, or None for the
  dialled host);
- a bearer token, given directly or read from `token_file` on every call so a rotated
  (projected) token is picked up, goes out as `authorization: Bearer <token>` metadata.

Every call has a deadline (60 s unless told) that also bounds its retries. The one retry is
for optimistic-concurrency conflicts: ABORTED whose message says "concurrent update" means
another writer bumped the resource version between the server's read and write, and a fresh
attempt normally succeeds. At most MAX_ATTEMPTS attempts; the first retry goes at once, later
ones after ~RETRY_DELAY with jitter from a seeded RNG (reproducible runs, docs/SPEC.md §5.5).
An ABORTED that says "crashed" is not a conflict and is never retried (§3.4: replace).

Failures raise SubstrateError with the gRPC status name as the code (NOT_FOUND, ABORTED, ...,
the names docs/SPEC.md §2.1 uses) and from_router=True, so errors.classify applies as it does
to the JSON wire. A token file that cannot be read is UNAUTHENTICATED: the run is
misconfigured. Each answer carries the server's `x-server-elapsed-us` trailer when it sent one.

Refused credentials are named. UNAUTHENTICATED / PERMISSION_DENIED carry in `check` the
parameter behind the credential that was sent (or that none was). gRPC reports a TLS failure
(a wrong CA, a certificate for another name, a client certificate missing or refused under
mTLS) as UNAVAILABLE, which would be retried forever; such a failure on a grpcs:// target is
diagnosed with one handshake of our own (tls_check.py, at most once per TLS_RECHECK_S) and,
when it is the credentials, raised as UNAUTHENTICATED naming the TLS file to fix.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import grpc
from google.protobuf.message import Message

from agentsession_core.errors import UsageError
from agentsession_core.substrate.ate import control_codec as codec
from agentsession_core.substrate.ate.proto import ateapi_pb2 as pb
from agentsession_core.substrate.ate.proto import ateapi_pb2_grpc as pb_grpc
from agentsession_core.substrate.errors import SubstrateError
from agentsession_core.substrate.protocol import ATE_API_SERVER_NAME
from agentsession_core.substrate.router_wire import ELAPSED_HEADER, server_elapsed_us
from agentsession_core.substrate.tls_check import (
    Diagnosis,
    TlsSettings,
    diagnose,
    looks_like_tls,
)

DEFAULT_SERVER_NAME = ATE_API_SERVER_NAME
DEFAULT_TLS_PORT = 443
DEFAULT_TIMEOUT = 60.0
MAX_ATTEMPTS = 5
RETRY_DELAY = 0.05
CONFLICT_TEXT = "concurrent update"
# A 1000-actor ListActors page is a few hundred KiB; gRPC's 4 MiB default would still cut off
# a page of actors with large statuses.
MAX_RECEIVE_BYTES = 64 * 2**20
# gRPC's reconnect backoff grows to 120 s by default: after a control-API outage of a minute
# the channel would keep failing calls at once for minutes more. Capped, a run picks up within
# a few seconds of the server's return.
RECONNECT_BACKOFF_MS = (200, 3000)  # initial, max
TLS_RECHECK_S = 5.0  # a TLS diagnosis is reused this long (a storm of failures makes one)
# Where target.token comes from, for a refused credential's hint: a campaign flow fills it
# from the Secret block target.token_secret names, so that is named too.
TOKEN_SOURCES = "AGENTSESSION_TOKEN, a --params file or the Secret block target.token_secret names"

M = TypeVar("M", bound=Message)


@dataclass(frozen=True, slots=True)
class Answer(Generic[M]):
    """A control call's answer: the message, the server's own handling time from the
    x-server-elapsed-us trailer (None when absent), and how many attempts it took."""

    message: M
    server_elapsed_us: int | None
    attempts: int = 1
    trailers: tuple[tuple[str, str], ...] = ()  # the string-valued ones


@dataclass(frozen=True, slots=True)
class Target:
    secure: bool
    address: str  # host:port as gRPC dials it ([v6]:port for IPv6)


def parse_target(target: str) -> Target:
    """`grpc://host:port` or `grpcs://host[:port]`; anything else is a usage error."""
    parts = urlsplit(target)
    if parts.scheme not in ("grpc", "grpcs"):
        raise UsageError(f"control target {target!r}: expected grpc://host:port or grpcs://host")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise UsageError(f"control target {target!r}: only a host and port may follow the scheme")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise UsageError(f"control target {target!r}: {exc}") from None
    if not host:
        raise UsageError(f"control target {target!r}: no host")
    secure = parts.scheme == "grpcs"
    if port is None:
        if not secure:
            raise UsageError(f"control target {target!r}: grpc:// needs a port")
        port = DEFAULT_TLS_PORT
    shown = f"[{host}]" if ":" in host else host
    return Target(secure=secure, address=f"{shown}:{port}")


class ControlClient:
    """The ateapi.Control calls the engine makes, as coroutines returning `Answer`s.

    The channel is opened on the first call, inside the event loop that makes it (gRPC's
    asyncio channels belong to one loop); `aclose()` closes it."""

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        token_file: str | Path | None = None,
        ca_file: str | Path | None = None,
        cert_file: str | Path | None = None,
        key_file: str | Path | None = None,
        server_name: str | None = DEFAULT_SERVER_NAME,
        timeout: float = DEFAULT_TIMEOUT,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.target = parse_target(target)
        if token is not None and token_file is not None:
            raise UsageError("control API: give a token or a token file, not both")
        if (cert_file is None) != (key_file is None):
            raise UsageError("control API: mTLS needs both a client certificate and its key")
        if not self.target.secure and (ca_file or cert_file):
            raise UsageError(f"control target {target!r}: TLS files given for a grpc:// target")
        if timeout <= 0:
            raise UsageError(f"control API: timeout must be positive, got {timeout}")
        self.timeout = timeout
        self._token = token
        self._token_file = Path(token_file) if token_file is not None else None
        # Read now so a wrong path fails at setup, not on the first call of a run.
        self._root_certificates = _read(ca_file, "CA file")
        self._certificate_chain = _read(cert_file, "client certificate")
        self._private_key = _read(key_file, "client key")
        self._server_name = server_name
        self._tls = TlsSettings(
            host=self.target.address.rpartition(":")[0].strip("[]"),
            port=int(self.target.address.rpartition(":")[2]),
            server_name=server_name,
            ca_pem=self._root_certificates,
            ca_file=str(ca_file) if ca_file is not None else None,
            cert_file=str(cert_file) if cert_file is not None else None,
            key_file=str(key_file) if key_file is not None else None,
        )
        self._tls_verdict: tuple[float, Diagnosis | None] | None = None
        self._tls_lock: asyncio.Lock | None = None
        # A fixed default seed keeps retry timing reproducible when the caller has no RNG.
        self._rng = rng if rng is not None else random.Random(0)
        self._sleep = sleep
        self._channel: Any = None
        self._stub: Any = None

    # -- the calls --------------------------------------------------------------------------

    async def get_actor_template(
        self, namespace: str, name: str, *, timeout: float | None = None
    ) -> Answer[pb.ActorTemplate]:
        request = codec.get_actor_template_request(namespace, name)
        return await self._call("GetActorTemplate", request, timeout)

    async def create_atespace(
        self, atespace: str, *, timeout: float | None = None
    ) -> Answer[pb.Atespace]:
        return await self._call("CreateAtespace", codec.create_atespace_request(atespace), timeout)

    async def create_actor(
        self,
        atespace: str,
        name: str,
        template_namespace: str,
        template_name: str,
        *,
        worker_selector: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Answer[pb.Actor]:
        request = codec.create_actor_request(
            atespace, name, template_namespace, template_name, worker_selector
        )
        return await self._call("CreateActor", request, timeout)

    async def get_actor(
        self, atespace: str, name: str, *, timeout: float | None = None
    ) -> Answer[pb.Actor]:
        return await self._call("GetActor", codec.get_actor_request(atespace, name), timeout)

    async def list_actors(
        self,
        atespace: str,
        page_token: str = "",
        *,
        page_size: int = codec.LIST_PAGE_SIZE,
        timeout: float | None = None,
    ) -> Answer[pb.ListActorsResponse]:
        """One page; pass the answer's next_page_token back for the next (empty: done)."""
        request = codec.list_actors_request(atespace, page_token, page_size)
        return await self._call("ListActors", request, timeout)

    async def resume_actor(
        self, atespace: str, name: str, *, timeout: float | None = None
    ) -> Answer[pb.ResumeActorResponse]:
        request = codec.resume_actor_request(atespace, name)
        return await self._call("ResumeActor", request, timeout)

    async def suspend_actor(
        self, atespace: str, name: str, *, timeout: float | None = None
    ) -> Answer[pb.SuspendActorResponse]:
        request = codec.suspend_actor_request(atespace, name)
        return await self._call("SuspendActor", request, timeout)

    async def pause_actor(
        self, atespace: str, name: str, *, timeout: float | None = None
    ) -> Answer[pb.PauseActorResponse]:
        request = codec.pause_actor_request(atespace, name)
        return await self._call("PauseActor", request, timeout)

    async def delete_actor(
        self, atespace: str, name: str, *, any_state: bool = True, timeout: float | None = None
    ) -> Answer[pb.Actor]:
        request = codec.delete_actor_request(atespace, name, any_state=any_state)
        return await self._call("DeleteActor", request, timeout)

    async def list_workers(
        self, page_token: str = "", *, timeout: float | None = None
    ) -> Answer[pb.ListWorkersResponse]:
        """One page of workers; pass next_page_token back for the next (empty: done)."""
        request = codec.list_workers_request(page_token)
        return await self._call("ListWorkers", request, timeout)

    async def list_worker_actor_assignments(
        self, worker: str, page_token: str = "", *, timeout: float | None = None
    ) -> Answer[pb.ListWorkerActorAssignmentsResponse]:
        """One page of the actors assigned to `worker` (its Worker resource's name)."""
        request = codec.list_worker_actor_assignments_request(worker, page_token)
        return await self._call("ListWorkerActorAssignments", request, timeout)

    async def aclose(self) -> None:
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            await channel.close()

    # -- machinery --------------------------------------------------------------------------

    def _open(self) -> Any:
        if self._stub is not None:
            return self._stub
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
            ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[0]),
            ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[1]),
        ]
        if self.target.secure:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=self._root_certificates,
                private_key=self._private_key,
                certificate_chain=self._certificate_chain,
            )
            if self._server_name:
                options.append(("grpc.ssl_target_name_override", self._server_name))
            self._channel = grpc.aio.secure_channel(self.target.address, credentials, options)
        else:
            self._channel = grpc.aio.insecure_channel(self.target.address, options)
        self._stub = pb_grpc.ControlStub(self._channel)
        return self._stub

    def _metadata(self) -> Sequence[tuple[str, str]]:
        token = self._token
        if self._token_file is not None:
            try:
                token = self._token_file.read_text().strip()
            except OSError as exc:
                raise SubstrateError(
                    "UNAUTHENTICATED", f"token file {self._token_file}: {exc.strerror or exc}"
                ) from None
            if not token:
                raise SubstrateError("UNAUTHENTICATED", f"token file {self._token_file} is empty")
        return (("authorization", f"Bearer {token}"),) if token else ()

    def retry_delay(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1 = the first retry, which is
        immediate: a conflict is usually a single racing write)."""
        if retry <= 1:
            return 0.0
        return RETRY_DELAY * (0.5 + self._rng.random())

    async def _call(self, method: str, request: Message, timeout: float | None) -> Answer[Any]:
        stub = self._open()
        rpc = getattr(stub, method)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout if timeout is not None else self.timeout)
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise SubstrateError("DEADLINE_EXCEEDED", f"{method}: deadline passed")
            call = rpc(request, timeout=remaining, metadata=self._metadata())
            try:
                answer = await call
            except grpc.aio.AioRpcError as exc:
                code, details = exc.code(), exc.details() or ""
                conflict = code == grpc.StatusCode.ABORTED and CONFLICT_TEXT in details.lower()
                if conflict and attempt < MAX_ATTEMPTS:
                    delay = self.retry_delay(attempt)
                    if delay >= deadline - loop.time():
                        raise _error(method, exc, attempt) from None
                    if delay:
                        await self._sleep(delay)
                    continue
                raise await self._named(_error(method, exc, attempt), details) from None
            trailers = await call.trailing_metadata()
            return Answer(
                codec.checked(answer),
                _elapsed_us(trailers),
                attempts=attempt,
                trailers=tuple((k, v) for k, v in trailers or () if isinstance(v, str)),
            )

    async def _named(self, error: SubstrateError, details: str) -> SubstrateError:
        """`error` with the credential behind it named: the token for UNAUTHENTICATED and
        PERMISSION_DENIED, the TLS file for an UNAVAILABLE that was a refused handshake."""
        if error.code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            error.check = self.token_check(error.code)
            return error
        if error.code != "UNAVAILABLE" or not self.target.secure or not looks_like_tls(details):
            return error
        diagnosis = await self.tls_diagnosis()
        if diagnosis is None:
            return error
        method = error.message.partition(":")[0]
        return SubstrateError(
            "UNAUTHENTICATED", f"{method}: {diagnosis.message}", check=diagnosis.check
        )

    def token_check(self, code: str) -> str:
        """What to check when the control API refused who we are."""
        if self._token_file is not None:
            sent = f"target.token_file {self._token_file} (its token was sent)"
        elif self._token:
            sent = f"target.token ({TOKEN_SOURCES}; it was sent)"
        else:
            sent = f"target.token ({TOKEN_SOURCES}) or target.token_file: no bearer token was sent"
        if self._certificate_chain is not None:
            sent += ", or the client certificate (target.cert_file)"
        if code == "PERMISSION_DENIED":
            return f"{sent}: the identity is known but not allowed this call"
        return sent

    async def tls_diagnosis(self) -> Diagnosis | None:
        """tls_check.diagnose for this client's settings, in a thread; one at a time and
        reused for TLS_RECHECK_S, so a storm of failing calls costs one handshake."""
        if self._tls_lock is None:
            self._tls_lock = asyncio.Lock()
        async with self._tls_lock:
            cached = self._tls_verdict
            if cached is not None and time.monotonic() - cached[0] < TLS_RECHECK_S:
                return cached[1]
            verdict = await asyncio.to_thread(diagnose, self._tls)
            self._tls_verdict = (time.monotonic(), verdict)
            return verdict


def _elapsed_us(trailers: Any) -> int | None:
    for key, value in trailers or ():
        if key == ELAPSED_HEADER:
            return server_elapsed_us(value if isinstance(value, str) else None)
    return None


def _error(method: str, exc: Any, attempts: int) -> SubstrateError:
    details = exc.details() or ""
    tried = f" (after {attempts} attempts)" if attempts > 1 else ""
    return SubstrateError(exc.code().name, f"{method}: {details}{tried}")


def _read(path: str | Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"control API {what} {path}: {exc.strerror or exc}") from None
