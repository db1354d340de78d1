"""FastRouterClient against a real socket server that answers in every way HTTP/1.1 allows:
Content-Length and chunked bodies, large bodies both ways, error answers with and without
x-ate-router, Connection: close, read-to-EOF, servers that close idle connections, that read
a request and drop it, that never answer, answer garbage or answer without end. Every resend
is counted on the server side: a POST the server may have read is never sent twice
(docs/SPEC.md §2.2)."""

from __future__ import annotations

import asyncio
import hashlib
import socket
from collections.abc import AsyncIterator, Callable

import orjson
import pytest

from agentsession_core.substrate.errors import (
    ANSWER_TOO_LARGE,
    TIMEOUT,
    TRANSPORT,
    FailureClass,
    SubstrateError,
)
from agentsession_core.substrate.router_client import FastRouterClient
from agentsession_core.substrate.router_tls import RouterTls
from bench.aiohttp_router_client import AiohttpRouterClient

BIG = 4 * 1024 * 1024 + 17
IDLE_408 = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


class Server:
    """Reads requests (Content-Length bodies) and answers per route."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.server: asyncio.Server | None = None
        self.in_flight = 0
        self.max_in_flight = 0
        # Set when an answer without end (or with a length it never sends) finds its
        # connection closed by the client.
        self.abandoned = asyncio.Event()
        # A keep-alive timeout that answers: after this long idle, a 408 and the close.
        self.idle_408_after: float | None = None
        self.timed_out = asyncio.Event()  # set when a 408 went out on an idle connection
        self.answers_408_once = False  # the next request read gets a 408 and the close
        # "held" answers wait for this: a test holds requests in flight as long as it likes.
        self.release = asyncio.Event()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                try:
                    # Keep-alive: the idle time between requests; a fresh connection's first
                    # request is waited for without it, however slow the client.
                    idle = self.idle_408_after if served else None
                    async with asyncio.timeout(idle):
                        head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                except TimeoutError:
                    self.timed_out.set()
                    writer.write(IDLE_408)
                    await writer.drain()
                    return
                lines = head.decode("latin-1").split("\r\n")
                target = lines[0].split(" ")[1]
                headers = {}
                for line in lines[1:]:
                    if line:
                        k, _, v = line.partition(":")
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append((target, headers, body))
                served += 1
                if self.answers_408_once:  # its keep-alive timeout fired as the request came
                    self.answers_408_once = False
                    writer.write(IDLE_408)
                    return
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    keep = await self.answer(target, body, writer, reader)
                finally:
                    self.in_flight -= 1
                await writer.drain()
                if not keep:
                    return
        finally:
            writer.close()

    async def answer(
        self,
        target: str,
        body: bytes,
        writer: asyncio.StreamWriter,
        reader: asyncio.StreamReader,
    ) -> bool:
        route = target.split("?")[0].lstrip("/")

        def send(status: int, payload: bytes, extra: str = "") -> None:
            writer.write(
                f"HTTP/1.1 {status} X\r\nContent-Length: {len(payload)}\r\n{extra}\r\n".encode()
                + payload
            )

        if route == "ping":
            send(200, b'{"message":"pong"}', "x-server-elapsed-us: 42\r\n")
        elif route == "digest":  # ingest-like: hash what was sent
            send(200, orjson.dumps({"sha256": hashlib.sha256(body).hexdigest(), "n": len(body)}))
        elif route == "big":  # read_disk_data-like: a large Content-Length body
            send(200, bytes(range(256)) * (BIG // 256) + b"x" * (BIG % 256))
        elif route == "chunked":
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for part in (b"hello ", b"chunked ", b"x" * 70000):
                writer.write(f"{len(part):x};ext=1\r\n".encode() + part + b"\r\n")
            writer.write(b"0\r\nx-trailer: 1\r\n\r\n")
        elif route == "router-error":
            error = b'{"error":{"code":"ACTOR_NOT_FOUND","message":"no such actor"}}'
            send(404, error, "x-ate-router: 1\r\n")
        elif route == "glutton-error":
            send(400, b'{"error":{"code":"BAD_OP","message":"size too large"}}')
        elif route == "not-json-error":
            send(502, b"<html>bad gateway</html>")
        elif route == "close":
            send(200, b"{}", "Connection: close\r\n")
            return False
        elif route == "eof-body":
            writer.write(b"HTTP/1.0 200 OK\r\n\r\nuntil the end")
            return False
        elif route == "silent":
            await asyncio.sleep(30)
        elif route == "garbage":
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
            return False
        elif route == "drop":
            return False  # close without answering
        elif route == "held":  # answered once the test releases it
            await self.release.wait()
            send(200, b"{}")
        elif route == "empty":
            send(204, b"")
        elif route == "idle-close":  # a keep-alive timeout of zero: answer, then close idle
            send(200, b"{}")
            return False
        elif route in ("endless-chunked", "endless-eof"):
            chunked = route == "endless-chunked"
            writer.write(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                if chunked
                else b"HTTP/1.0 200 OK\r\n\r\n"
            )
            part = b"z" * 65536
            framed = b"10000\r\n" + part + b"\r\n" if chunked else part
            try:
                while True:  # until the client hangs up
                    writer.write(framed)
                    await writer.drain()
            except ConnectionError:
                self.abandoned.set()
            return False
        elif route == "huge-length":  # promises 16 GiB, sends a little, waits
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 17179869184\r\n\r\nabc")
            await writer.drain()
            await reader.read()  # returns when the client closes the connection
            self.abandoned.set()
            return False
        return True

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    s = Server()
    await s.start()
    yield s
    await s.close()


@pytest.fixture
async def client(server: Server) -> AsyncIterator[FastRouterClient]:
    assert server.server is not None
    port = server.server.sockets[0].getsockname()[1]
    c = FastRouterClient(f"http://127.0.0.1:{port}", token="secret", timeout=30)
    yield c
    await c.aclose()


async def test_ping_sends_target_json_and_auth_and_reads_the_answer(
    server: Server, client: FastRouterClient
) -> None:
    answer = await client.request("space/actor-1", "ping", json={"message": "hi"})
    assert answer.status == 200
    assert orjson.loads(answer.body) == {"message": "pong"}
    assert answer.server_elapsed_us == 42
    assert answer.headers["x-server-elapsed-us"] == "42"
    target, headers, body = server.requests[0]
    assert target == "/ping"
    assert headers["ate-target-actor"] == "space/actor-1"
    assert headers["authorization"] == "Bearer secret"
    assert headers["content-type"] == "application/json"
    assert orjson.loads(body) == {"message": "hi"}


async def test_keep_alive_reuses_one_connection(server: Server, client: FastRouterClient):
    for _ in range(50):
        await client.request("s/a", "ping", json={})
    assert server.connections == 1
    assert len(server.requests) == 50


async def test_large_bodies_both_ways_and_query_params(server: Server, client: FastRouterClient):
    payload = bytes(i % 251 for i in range(BIG))
    answer = await client.request("s/a", "digest", body=payload, params={"key": "up load"})
    assert orjson.loads(answer.body) == {"sha256": hashlib.sha256(payload).hexdigest(), "n": BIG}
    target, headers, _ = server.requests[-1]
    assert target == "/digest?key=up+load"
    assert headers["content-type"] == "application/octet-stream"
    big = await client.request("s/a", "big", json={"mode": "data"})
    assert len(big.body) == BIG
    assert big.body[:256] == bytes(range(256)) and big.body.endswith(b"x" * (BIG % 256))
    # the connection is still good after both
    assert (await client.request("s/a", "ping", json={})).status == 200
    assert server.connections == 1


async def test_chunked_answer_with_extensions_and_trailers(
    server: Server, client: FastRouterClient
) -> None:
    answer = await client.request("s/a", "chunked", json={})
    assert answer.body == b"hello chunked " + b"x" * 70000
    assert (await client.request("s/a", "ping", json={})).status == 200
    assert server.connections == 1


async def test_no_content_and_read_to_eof_answers(server: Server, client: FastRouterClient):
    assert (await client.request("s/a", "empty", json={})).body == b""
    assert (await client.request("s/a", "eof-body", json={})).body == b"until the end"
    assert (await client.request("s/a", "ping", json={})).status == 200
    assert server.connections == 2  # the read-to-EOF answer used its connection up


async def test_router_error_keeps_code_and_from_router(client: FastRouterClient) -> None:
    with pytest.raises(SubstrateError) as caught:
        await client.request("s/a", "router-error", json={})
    assert caught.value.code == "ACTOR_NOT_FOUND"
    assert caught.value.status == 404
    assert caught.value.from_router is True


async def test_glutton_error_is_not_from_router(client: FastRouterClient) -> None:
    with pytest.raises(SubstrateError) as caught:
        await client.request("s/a", "glutton-error", json={})
    assert (caught.value.code, caught.value.status) == ("BAD_OP", 400)
    assert caught.value.from_router is False
    with pytest.raises(SubstrateError) as caught:
        await client.request("s/a", "not-json-error", json={})
    assert caught.value.code == "HTTP_502"
    assert "bad gateway" in str(caught.value)


async def test_connection_close_answer_opens_a_new_connection(
    server: Server, client: FastRouterClient
) -> None:
    await client.request("s/a", "close", json={})
    await client.request("s/a", "ping", json={})
    assert server.connections == 2


async def test_timeout_discards_the_connection_and_the_next_request_works(
    server: Server, client: FastRouterClient
) -> None:
    with pytest.raises(SubstrateError) as caught:
        await client.request("s/a", "silent", json={}, timeout=0.2)
    assert caught.value.code == TIMEOUT
    assert (await client.request("s/a", "ping", json={})).status == 200
    assert server.connections == 2


def sent(server: Server, route: str) -> int:
    return [t for t, _, _ in server.requests].count(route)


async def seen_closed(client: FastRouterClient) -> None:
    """Until the client's loop has seen the server close every pooled connection (the FIN
    is on its way once the server closed; the loop notes it on its next turn)."""
    await until(lambda: all(conn.given_up_by_peer() for conn in client._idle))


async def until(holds: Callable[[], bool], cap: float = 60.0) -> None:
    """Poll until `holds()`; the cap only catches a hang."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + cap
    while not holds():
        assert loop.time() < deadline, "the condition never held"
        await asyncio.sleep(0.005)


async def test_a_post_the_server_read_and_dropped_is_not_resent(
    server: Server, client: FastRouterClient
) -> None:
    await client.request("s/a", "ping", json={})
    # The 2nd request on the connection: the server reads all of it, then closes without
    # an answer. It may have run the op, so a POST must fail, not go again.
    with pytest.raises(SubstrateError) as caught:
        await client.request("s/a", "drop", json={"key": "k", "size": 1 << 20})
    assert caught.value.code == TRANSPORT
    assert caught.value.failure_class is FailureClass.COUNT
    assert sent(server, "/drop") == 1
    assert server.requests[-1][2] == b'{"key":"k","size":1048576}'  # it had all of it
    assert server.connections == 1
    assert (await client.request("s/a", "ping", json={})).status == 200


async def test_an_idempotent_request_dropped_on_a_reused_connection_goes_once_more(
    server: Server, client: FastRouterClient
) -> None:
    await client.request("s/a", "ping", json={})
    # A GET may go again on a fresh connection; that one is dropped too: a TRANSPORT error
    # after exactly one resend, not a loop.
    with pytest.raises(SubstrateError) as caught:
        await client.request("s/a", "drop", method="GET")
    assert caught.value.code == TRANSPORT
    assert sent(server, "/drop") == 2
    assert server.connections == 2


async def test_a_connection_closed_while_idle_is_set_aside_and_the_post_goes_once(
    server: Server, client: FastRouterClient
) -> None:
    await client.request("s/a", "idle-close", json={})
    await seen_closed(client)
    payload = b"op" * 1000
    answer = await client.request("s/a", "digest", body=payload)
    assert orjson.loads(answer.body)["n"] == len(payload)
    assert sent(server, "/digest") == 1
    assert server.connections == 2


async def test_an_idle_connection_the_server_answered_and_closed_costs_no_request(
    server: Server, client: FastRouterClient
) -> None:
    # A server whose keep-alive timeout writes a 408 and closes (the case behind the
    # README's known limit): the pooled connection holds that unasked-for answer, so it is
    # set aside before the next POST is written, and the POST goes once, on a new connection.
    server.idle_408_after = 0.05

    async def idle_spell() -> None:
        await asyncio.wait_for(server.timed_out.wait(), 60)
        server.timed_out.clear()
        await seen_closed(client)

    await client.request("s/a", "ping", json={})
    await idle_spell()
    for n in range(3):  # and again after each idle spell: never a failure, never a resend
        answer = await client.request("s/a", "digest", body=b"op")
        assert orjson.loads(answer.body)["n"] == 2
        assert sent(server, "/digest") == n + 1
        await idle_spell()
    assert server.connections == 4


async def test_a_408_racing_a_post_on_a_reused_connection_is_resent_on_a_fresh_one(
    server: Server, client: FastRouterClient
) -> None:
    await client.request("s/a", "ping", json={})
    # The keep-alive timeout fired as the request arrived: the server says 408 and closes
    # without serving it (RFC 9110 §15.5.9), so the POST may go again, once, on a fresh
    # connection; the caller sees one request and its answer.
    server.answers_408_once = True
    answer = await client.request("s/a", "digest", body=b"once")
    assert orjson.loads(answer.body)["n"] == 4
    assert server.connections == 2
    assert sent(server, "/digest") == 2  # the 408 and the one served
    # A 408 on a fresh connection is the server's answer to this request: not resent.
    assert server.server is not None
    port = server.server.sockets[0].getsockname()[1]
    fresh = FastRouterClient(f"http://127.0.0.1:{port}")
    try:
        server.answers_408_once = True
        with pytest.raises(SubstrateError) as caught:
            await fresh.request("s/a", "digest", body=b"x")
        assert caught.value.status == 408
        assert sent(server, "/digest") == 3
    finally:
        await fresh.aclose()


async def test_a_write_refused_on_a_reused_connection_is_resent_on_a_fresh_one(
    server: Server, client: FastRouterClient
) -> None:
    await client.request("s/a", "ping", json={})
    # The pooled socket can no longer send (as after a reset the loop has not yet seen):
    # the request's first write fails, so not one byte of it left and a POST may go again.
    # No await between the two lines, so the loop cannot notice the socket first.
    [conn] = client._idle
    conn.writer.get_extra_info("socket").shutdown(socket.SHUT_WR)
    answer = await client.request("s/a", "digest", body=b"once")
    assert orjson.loads(answer.body)["n"] == 4
    assert sent(server, "/digest") == 1
    assert server.connections == 2


async def test_first_request_on_a_fresh_connection_is_not_retried(server: Server) -> None:
    assert server.server is not None
    port = server.server.sockets[0].getsockname()[1]
    fresh = FastRouterClient(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(SubstrateError) as caught:
            await fresh.request("s/a", "drop", json={})
        assert caught.value.code == TRANSPORT
        assert [t for t, _, _ in server.requests].count("/drop") == 1
    finally:
        await fresh.aclose()


async def test_garbage_answer_is_a_transport_error(client: FastRouterClient) -> None:
    with pytest.raises(SubstrateError) as caught:
        await client.request("s/a", "garbage", json={})
    assert caught.value.code == TRANSPORT
    assert "bad status line" in str(caught.value)


async def test_refused_connection_is_a_transport_error() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    c = FastRouterClient(f"http://127.0.0.1:{port}")
    with pytest.raises(SubstrateError) as caught:
        await c.request("s/a", "ping", json={})
    assert caught.value.code == TRANSPORT
    await c.aclose()


async def test_max_connections_bounds_concurrency(server: Server) -> None:
    assert server.server is not None
    port = server.server.sockets[0].getsockname()[1]
    c = FastRouterClient(f"http://127.0.0.1:{port}", max_connections=3)
    try:
        # Twelve at once, answered only once three are in flight and the rest wait their turn.
        sent = [asyncio.create_task(c.request("s/a", "held", json={})) for _ in range(12)]
        await until(lambda: server.in_flight == 3 and len(c._waiters) == 9)
        server.release.set()
        answers = await asyncio.gather(*sent)
        assert all(a.status == 200 for a in answers)
        assert server.connections == 3
        assert server.max_in_flight == 3
    finally:
        await c.aclose()


async def test_cancelled_waiter_does_not_leak_a_slot(server: Server) -> None:
    assert server.server is not None
    port = server.server.sockets[0].getsockname()[1]
    c = FastRouterClient(f"http://127.0.0.1:{port}", max_connections=1)
    try:
        first = asyncio.create_task(c.request("s/a", "held", json={}))
        await until(lambda: server.in_flight == 1)  # the one slot is taken
        waiting = asyncio.create_task(c.request("s/a", "ping", json={}))
        await until(lambda: len(c._waiters) == 1)  # and the second waits for it
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        server.release.set()
        assert (await first).status == 200
        assert (await c.request("s/a", "ping", json={})).status == 200
        assert server.connections == 1
    finally:
        await c.aclose()


@pytest.mark.parametrize("route", ["endless-chunked", "endless-eof"])
async def test_an_endless_answer_stops_at_the_cap_and_its_connection_is_dropped(
    server: Server, route: str
) -> None:
    assert server.server is not None
    port = server.server.sockets[0].getsockname()[1]
    c = FastRouterClient(f"http://127.0.0.1:{port}", timeout=30, max_answer_bytes=1 << 20)
    try:
        await c.request("s/a", "ping", json={})
        with pytest.raises(SubstrateError) as caught:
            await c.request("s/a", route, json={})
        assert caught.value.code == ANSWER_TOO_LARGE
        assert caught.value.failure_class is FailureClass.COUNT
        assert "target.max_answer_bytes" in str(caught.value)
        await asyncio.wait_for(server.abandoned.wait(), 60)  # the client hung up
        assert (await c.request("s/a", "ping", json={})).status == 200
        assert server.connections == 2  # the capped answer's connection was not reused
    finally:
        await c.aclose()


async def test_a_content_length_over_the_cap_is_refused_before_reading(server: Server) -> None:
    assert server.server is not None
    port = server.server.sockets[0].getsockname()[1]
    c = FastRouterClient(f"http://127.0.0.1:{port}", timeout=30)  # the 64 MiB default
    try:
        with pytest.raises(SubstrateError) as caught:
            await c.request("s/a", "huge-length", json={})
        # Not TIMEOUT: the client did not wait for the 16 GiB the server promised.
        assert caught.value.code == ANSWER_TOO_LARGE
        assert "17179869184 bytes" in str(caught.value)
        await asyncio.wait_for(server.abandoned.wait(), 60)
        assert (await c.request("s/a", "ping", json={})).status == 200
        assert server.connections == 2
    finally:
        await c.aclose()


async def test_an_answer_of_exactly_the_cap_is_read(server: Server) -> None:
    assert server.server is not None
    port = server.server.sockets[0].getsockname()[1]
    for cap, chunked_cap in ((BIG, 70014), (BIG - 1, 70013)):
        c = FastRouterClient(f"http://127.0.0.1:{port}", max_answer_bytes=cap)
        chunked = FastRouterClient(f"http://127.0.0.1:{port}", max_answer_bytes=chunked_cap)
        try:
            if cap == BIG:
                assert len((await c.request("s/a", "big", json={})).body) == BIG
                assert len((await chunked.request("s/a", "chunked", json={})).body) == 70014
            else:
                for client, route in ((c, "big"), (chunked, "chunked")):
                    with pytest.raises(SubstrateError) as caught:
                        await client.request("s/a", route, json={})
                    assert caught.value.code == ANSWER_TOO_LARGE
        finally:
            await c.aclose()
            await chunked.aclose()


@pytest.mark.parametrize("route", ["endless-chunked", "huge-length"])
async def test_the_aiohttp_router_client_caps_answers_alike(server: Server, route: str) -> None:
    assert server.server is not None
    port = server.server.sockets[0].getsockname()[1]
    c = AiohttpRouterClient(f"http://127.0.0.1:{port}", timeout=30, max_answer_bytes=1 << 20)
    try:
        with pytest.raises(SubstrateError) as caught:
            await c.request("s/a", route, json={})
        assert caught.value.code == ANSWER_TOO_LARGE
        await asyncio.wait_for(server.abandoned.wait(), 60)
        assert (await c.request("s/a", "ping", json={})).status == 200
    finally:
        await c.aclose()


def test_only_http_and_https_urls_are_accepted() -> None:
    with pytest.raises(ValueError, match=r"only http\(s\)://"):
        FastRouterClient("ftp://example.invalid")
    with pytest.raises(ValueError, match="TLS settings need an https:// router"):
        FastRouterClient("http://example.invalid", tls=RouterTls())
    assert FastRouterClient("https://example.invalid").port == 443
