"""A lean HTTP/1.1 client for the router hot path: keep-alive connections over asyncio
streams, requests written as one pre-joined byte string, responses parsed by hand.

Why not aiohttp: per request aiohttp builds URL objects, multidicts, a response object and
runs its tracing/cookie machinery; on one core that caps a generator at ~5k req/s, while
the wire work itself costs a fraction of that (bench/RESULTS.md has the figures). This
client does only what the router needs: one origin, HTTP/1.1, Content-Length or chunked
answers, answers read to the end before the connection goes back to the pool.

Connections: idle ones wait in a LIFO pool (the warmest socket first); `max_connections`
bounds how many exist at once (0: unbounded), further requests queue for a free one. A
timeout, a protocol error, an answer over the size cap or `Connection: close` discards the
connection.

Resends (docs/SPEC.md §2.2): a connection dies under a request either before the server
could have read it or after, and only the first is safe to repeat for a request that acts
(a glutton op fills memory, writes a file, burns CPU). A pooled connection the server gave
up while it sat idle is set aside before a request is written on it: one it closed (FIN or
reset) or one it wrote anything on (an unasked-for answer, typically a 408 before its
keep-alive close), so no resend is needed at all. Beyond that a request goes out a second
time, once and on a fresh connection, only when
- nothing of it was sent: a write the kernel refused at once on a reused connection; or
- the server said it did not take it: a 408 (Request Timeout, RFC 9110 §15.5.9) answered on a
  reused connection, the keep-alive close racing the request; or
- its method is idempotent (IDEMPOTENT_METHODS) and it was sent on a reused connection that
  then ended before a byte of the answer arrived.
Either way the caller sees one request and one answer. A POST whose connection ended after
it was written, with no answer, fails with TRANSPORT: the server may have acted on it (a
reset can come after the server read the request, as the local substrate's own
`router:reset` fault shows), and the session's failure handling decides what next.

Answers are read up to `max_answer_bytes` of body (docs/SPEC.md §2.2): a larger
Content-Length is refused before any of it is read, a chunked or read-to-EOF body is cut off
at the cap, and either way the request fails with ANSWER_TOO_LARGE and the connection, with
the rest of the body still on it, is closed.

Failures are SubstrateErrors (router_wire.py decodes every answer): an error answer
keeps its body's code and `from_router` from `x-ate-router: 1`; TRANSPORT for connection
failures and malformed answers; TIMEOUT when the per-request deadline passes;
ANSWER_TOO_LARGE for an answer over the cap.

https:// (docs/SPEC.md §2.2): the same streams over TLS (asyncio's own, one SSL context per
client from router_tls.RouterTls, the SNI and checked name its server_name or the URL's
host; the Host header stays the URL's). A handshake that fails on the credentials (a CA that
does not sign the router's certificate, a certificate for another name, an expired one, a
client certificate missing or refused under mTLS) is UNAUTHENTICATED naming the setting to
check (router_tls.refused), never a TRANSPORT failure retried on every request: seen in-line
from the handshake's exception or the server's alert on the first read, or, when a fresh
connection closed without a word, by one handshake of tls_check's (at most once per
TLS_RECHECK_S).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson

from agentsession_core.substrate.errors import (
    ANSWER_TOO_LARGE,
    TIMEOUT,
    TRANSPORT,
    SubstrateError,
)
from agentsession_core.substrate.interface import RouterResponse
from agentsession_core.substrate.protocol import TARGET_HEADER
from agentsession_core.substrate.router_tls import RouterTls, refused
from agentsession_core.substrate.router_wire import router_answer
from agentsession_core.substrate.tls_check import Diagnosis, diagnose, in_line

MAX_HEAD_BYTES = 64 * 1024  # status line + headers of one answer
_DRAIN_ABOVE = 64 * 1024  # wait for the socket buffer only when a body is this large
_EOF_READ = 64 * 1024  # a read-to-EOF body is read in pieces this large, counted to the cap
# The largest answer body read by default: well above the largest answer a built-in script
# asks for (read_disk_data of a 24Mi file), far below what would strain a generator's memory
# with a few hundred answers in flight. TargetParams.max_answer_bytes sets it per run.
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024
# RFC 9110 §9.2.2: methods whose effect on the server is the same sent once or twice, so a
# request whose fate is unknown may be repeated (docs/SPEC.md §2.2).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
TLS_RECHECK_S = 5.0  # a handshake diagnosis is reused this long (a storm of failures makes one)


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.x as this client reads it."""


class ClosedBeforeAnswer(ConnectionError):
    """The connection ended before a single byte of the answer arrived: the request may or
    may not have reached the server."""


class NotSent(ConnectionError):
    """The connection refused the request's first write: not one byte of it left."""


class AnswerTooLarge(Exception):
    """The answer's body is larger than the client reads."""


class _Connection:
    __slots__ = ("reader", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False

    def given_up_by_peer(self) -> bool:
        """The server closed (FIN) or reset this connection while it sat idle, or wrote on
        it unasked (a 408 before closing, say: its answer would be read as the next
        request's). The loop notes each as soon as it arrives, so a pooled connection past
        the server's keep-alive timeout is found here, before a request is risked on it."""
        reader = self.reader
        # StreamReader keeps what arrived in `_buffer`; nothing else tells bytes from none
        # without consuming them. at_eof() alone is False while unread bytes remain.
        return self.writer.is_closing() or reader.at_eof() or bool(getattr(reader, "_buffer", b""))

    def close(self) -> None:
        self.writer.close()


class Answer:
    """One parsed answer: status, lower-cased headers, body, and whether the connection
    may carry another request."""

    __slots__ = ("body", "headers", "keep_alive", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes, keep_alive: bool):
        self.status = status
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive


async def read_answer(
    reader: asyncio.StreamReader,
    *,
    head_only: bool = False,
    max_body: int = DEFAULT_MAX_ANSWER_BYTES,
) -> Answer:
    """Read one HTTP/1.x answer from `reader` (status line, headers, then a Content-Length,
    chunked or read-to-EOF body of at most `max_body` bytes: AnswerTooLarge beyond)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        raise ClosedBeforeAnswer("closed before the answer") from None
    except ConnectionResetError:
        raise ClosedBeforeAnswer("reset before the answer") from None
    except asyncio.LimitOverrunError:
        raise ProtocolError(f"answer head longer than {MAX_HEAD_BYTES} bytes") from None
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"bad status line {lines[0][:80]!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise ProtocolError(f"bad header line {line[:80]!r}")
        key = name.strip().lower().decode("latin-1")
        text = value.strip().decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection and (
        parts[0] == b"HTTP/1.1" or "keep-alive" in connection
    )
    if head_only or status in (204, 304) or 100 <= status < 200:
        return Answer(status, headers, b"", keep_alive)
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader, max_body)
    elif (length := headers.get("content-length")) is not None:
        if not length.isdigit():
            raise ProtocolError(f"bad Content-Length {length!r}")
        if int(length) > max_body:  # refused before a byte of it is buffered
            raise AnswerTooLarge(f"answer of {length} bytes, over the cap of {max_body}")
        body = await reader.readexactly(int(length))
    else:  # HTTP/1.0 style: the body ends when the server closes
        body = await _read_to_eof(reader, max_body)
        keep_alive = False
    return Answer(status, headers, body, keep_alive)


async def _read_to_eof(reader: asyncio.StreamReader, max_body: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while part := await reader.read(_EOF_READ):
        total += len(part)
        if total > max_body:
            raise AnswerTooLarge(f"answer body past the cap of {max_body} bytes")
        parts.append(part)
    return b"".join(parts)


async def _read_chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_text = (await _read_line(reader)).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size {size_text[:40]!r}") from None
        if size == 0:
            # Trailers (usually none) end with an empty line.
            while await _read_line(reader) != b"\r\n":
                pass
            return b"".join(parts)
        total += size
        if total > max_body:  # checked before the chunk is read: an endless body stops here
            raise AnswerTooLarge(f"chunked answer past the cap of {max_body} bytes")
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise ProtocolError("chunk not followed by CRLF")


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    """A chunk-size or trailer line; one longer than the reader's limit is malformed."""
    try:
        return await reader.readuntil(b"\r\n")
    except asyncio.LimitOverrunError:
        raise ProtocolError(f"chunk line longer than {MAX_HEAD_BYTES} bytes") from None


class _Deadlines:
    """Per-request deadlines on one coarse timer. asyncio.timeout arms and cancels a timer
    for every request, ~5 µs of a ~20 µs request on the hot path; here a request only notes
    its task and deadline, and one callback, every SWEEP_S while any request is in flight,
    cancels the tasks whose deadline passed (as asyncio.timeout would). A request therefore
    times out between its deadline and SWEEP_S after it."""

    SWEEP_S = 0.05

    def __init__(self) -> None:
        self._due: dict[asyncio.Task[Any], float] = {}
        self._expired: set[asyncio.Task[Any]] = set()
        self._sweep: asyncio.TimerHandle | None = None

    def watch(self, task: asyncio.Task[Any], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self._due[task] = loop.time() + timeout
        if self._sweep is None:
            self._sweep = loop.call_later(self.SWEEP_S, self._expire)

    def forget(self, task: asyncio.Task[Any]) -> None:
        self._due.pop(task, None)
        self._expired.discard(task)

    def expired(self, task: asyncio.Task[Any], cancelling: int) -> bool:
        """Whether the CancelledError `task` is seeing is this deadline's own (and no one
        else's cancel is pending: then it goes on as a cancel, as with asyncio.timeout)."""
        if task not in self._expired:
            return False
        self._expired.discard(task)
        return task.uncancel() <= cancelling

    def _expire(self) -> None:
        self._sweep = None
        if not self._due:
            return  # idle: the next request arms the sweep again
        loop = asyncio.get_running_loop()
        now = loop.time()
        for task, due in list(self._due.items()):
            if due <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        self._sweep = loop.call_later(self.SWEEP_S, self._expire)

    def stop(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None


class FastRouterClient:
    """POSTs to actors through the router: the product's one router client."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        max_connections: int = 0,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        tls: RouterTls | None = None,
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"router URL {base_url!r}: only http(s)://host[:port] is supported")
        if tls is not None and url.scheme != "https":
            raise ValueError(f"router URL {base_url!r}: TLS settings need an https:// router")
        self.base_url = base_url.rstrip("/")
        self.host = url.hostname
        secure = url.scheme == "https"
        self.port = url.port or (443 if secure else 80)
        self.tls = (tls or RouterTls()) if secure else None
        self._ssl = self.tls.context() if self.tls is not None else None
        self._server_name = (self.tls.server_name if self.tls else None) or self.host
        self._tls_verdict: tuple[float, Diagnosis | None] | None = None
        self.prefix = url.path.rstrip("/")
        self.timeout = timeout
        self.max_connections = max_connections
        self.max_answer_bytes = max_answer_bytes
        host_header = url.netloc
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        # Everything after the request line that never changes, joined once.
        self._fixed = f"Host: {host_header}\r\n{auth}".encode("latin-1")
        self._idle: deque[_Connection] = deque()
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False
        self._deadlines = _Deadlines()

    # ------------------------------------------------------------ the pool
    async def _acquire(self, *, fresh: bool = False) -> _Connection:
        """A pooled connection (the warmest that is still usable), else a new one; `fresh`:
        always a new one (a resend must not meet a second stale socket)."""
        while True:
            while self._idle and not fresh:
                conn = self._idle.pop()
                if conn.given_up_by_peer():
                    # Nothing was written on it, so nothing is lost: set it aside and try
                    # the next one (or open a fresh one in its place).
                    conn.close()
                    self._open -= 1
                    continue
                conn.reused = True
                return conn
            if fresh and self._idle and self.max_connections and self._open >= self.max_connections:
                self._idle.popleft().close()  # the coldest idle one gives up its slot
                self._open -= 1
            if not self.max_connections or self._open < self.max_connections:
                self._open += 1
                try:
                    if self._ssl is None:
                        reader, writer = await asyncio.open_connection(
                            self.host, self.port, limit=MAX_HEAD_BYTES
                        )
                    else:
                        reader, writer = await asyncio.open_connection(
                            self.host,
                            self.port,
                            limit=MAX_HEAD_BYTES,
                            ssl=self._ssl,
                            server_hostname=self._server_name,
                        )
                except BaseException:
                    self._open -= 1
                    self._wake_one()
                    raise
                return _Connection(reader, writer)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif not waiter.cancelled():
                    self._wake_one()  # pass on the slot we were handed
                raise

    def _release(self, conn: _Connection, *, reusable: bool) -> None:
        if reusable and not self._closed:
            self._idle.append(conn)
        else:
            conn.close()
            self._open -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    # ------------------------------------------------------------ one exchange
    def encode(
        self,
        method: str,
        route: str,
        headers: bytes,
        body: bytes | None,
        params: dict[str, str] | None,
    ) -> bytes:
        path = f"{self.prefix}/{route.lstrip('/')}"
        if params:
            path = f"{path}?{urlencode(params)}"
        length = len(body) if body is not None else 0
        send_length = body is not None or method in ("POST", "PUT", "PATCH")
        head = (
            f"{method} {path} HTTP/1.1\r\n".encode("latin-1")
            + self._fixed
            + headers
            + (f"Content-Length: {length}\r\n\r\n".encode() if send_length else b"\r\n")
        )
        return head + body if body else head

    async def exchange(self, method: str, data: bytes) -> Answer:
        """Send one encoded request and read its answer, on a pooled connection; sent a
        second time only where that cannot make the server act twice (the module's
        docstring, docs/SPEC.md §2.2)."""
        idempotent = method in IDEMPOTENT_METHODS
        for attempt in (1, 2):
            conn = await self._acquire(fresh=attempt == 2)
            reusable = False
            try:
                conn.writer.write(data)
                if conn.writer.is_closing():
                    # write() hands the bytes to the socket at once when nothing is queued,
                    # which between two requests nothing is; a send the kernel refused
                    # closes the transport inside write(). Not one byte of this request
                    # left, so the server cannot have seen it.
                    raise NotSent("the connection refused the request")
                if len(data) > _DRAIN_ABOVE:
                    try:
                        await conn.writer.drain()
                    except (ConnectionResetError, BrokenPipeError):
                        # Part of it may have been read by then.
                        raise ClosedBeforeAnswer("closed while the request was sent") from None
                answer = await read_answer(
                    conn.reader, head_only=method == "HEAD", max_body=self.max_answer_bytes
                )
                if answer.status == 408 and conn.reused and attempt == 1:
                    continue  # the server's idle timeout beat the request to it: not taken
                reusable = answer.keep_alive
                return answer
            except NotSent:
                if attempt == 1 and conn.reused:
                    continue
                raise
            except ClosedBeforeAnswer:
                # The request went out and may have been acted on: only an idempotent one
                # may go again. Once, and only after a reused connection failed (the stale
                # keep-alive race); a fresh connection closing on us is the server's answer.
                if attempt == 1 and conn.reused and idempotent:
                    continue
                raise
            except asyncio.IncompleteReadError as exc:
                raise ConnectionError(f"connection lost mid-answer: {exc!r}") from None
            finally:
                self._release(conn, reusable=reusable)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------ RouterClient interface
    async def request(
        self,
        target: str,
        route: str,
        *,
        json: Any = None,
        body: bytes | None = None,
        params: dict[str, str] | None = None,
        timeout: float | None = None,
        method: str = "POST",
    ) -> RouterResponse:
        if json is not None:
            data: bytes | None = orjson.dumps(json)
            kind = b"Content-Type: application/json\r\n"
        else:
            data = body
            kind = b"Content-Type: application/octet-stream\r\n" if body is not None else b""
        headers = f"{TARGET_HEADER}: {target}\r\n".encode("latin-1") + kind
        wire = self.encode(method, route, headers, data, params)
        answer = await self.send(route, wire, timeout=timeout, method=method)
        return router_answer(answer.status, answer.body, answer.headers, route)

    async def send(
        self, route: str, wire: bytes, *, timeout: float | None = None, method: str = "POST"
    ) -> Answer:
        """One encoded request (`encode`) and its raw answer, within `timeout` (default the
        client's; see _Deadlines). The seam for a wire form that reads answers its own way
        (the ate wire); failures to get any answer are SubstrateErrors here already."""
        task = asyncio.current_task()
        assert task is not None
        deadlines = self._deadlines
        cancelling = task.cancelling()
        deadlines.watch(task, timeout if timeout is not None else self.timeout)
        try:
            return await self.exchange(method, wire)
        except asyncio.CancelledError:
            if deadlines.expired(task, cancelling):
                raise SubstrateError(
                    TIMEOUT, f"router {route}: no answer within the timeout"
                ) from None
            raise
        except AnswerTooLarge as exc:
            raise SubstrateError(
                ANSWER_TOO_LARGE, f"router {route}: {exc} (target.max_answer_bytes)"
            ) from None
        except (OSError, ProtocolError, asyncio.IncompleteReadError) as exc:
            if self.tls is not None and (diagnosis := await self._tls_diagnosis(exc)):
                raise refused(diagnosis, route) from None
            raise SubstrateError(TRANSPORT, f"router {route}: {exc!r}") from None
        finally:
            deadlines.forget(task)

    async def _tls_diagnosis(self, exc: BaseException) -> Diagnosis | None:
        """Whether a failure on an https:// router is the credentials (the module's doc)."""
        assert self.tls is not None
        if isinstance(exc, ssl.SSLError):
            return in_line(self.tls.settings(self.host, self.port), exc)
        if not isinstance(exc, ClosedBeforeAnswer | ConnectionResetError):
            return None
        cached = self._tls_verdict
        if cached is not None and time.monotonic() - cached[0] < TLS_RECHECK_S:
            return cached[1]
        settings = await asyncio.to_thread(self.tls.settings, self.host, self.port, read_ca=True)
        verdict = await asyncio.to_thread(diagnose, settings)
        self._tls_verdict = (time.monotonic(), verdict)
        return verdict

    async def aclose(self) -> None:
        self._closed = True
        self._deadlines.stop()
        while self._idle:
            conn = self._idle.pop()
            conn.close()
            self._open -= 1
