"""What the local router may buffer (docs/SPEC.md §2.4): it reads each request body whole
before forwarding it, and each answer whole before sending it on, so both are bounded.

- per request: a body above `per_request` bytes is refused with 413 before it is read (or as
  soon as a chunked body passes the cap): it could never fit, so retrying is pointless;
- all at once: request and answer bodies held by the router share a budget of `total`
  bytes. A body waits (first come, first served) up to `wait` seconds for room, then is
  refused with RESOURCE_EXHAUSTED (a 503 router verdict: retry later, §3.4). Memory in use
  for bodies therefore never passes `total`, however many large requests arrive at once.

A body's bytes are held from the moment it is read until the router's handler returns; the
answer's until aiohttp has been handed it (the few microseconds while aiohttp writes it out
are not counted).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from local_substrate.protocol import WireError

_CHUNK = 1 << 20


class ByteBudget:
    def __init__(self, total: int, per_request: int, wait: float) -> None:
        self.total = total
        self.per_request = per_request
        self.wait = wait
        self.free = total
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def acquire(self, n: int, what: str) -> None:
        if n > self.total:
            raise WireError(
                "RESOURCE_EXHAUSTED",
                f"router: {what} of {n} bytes is above the router's buffer budget "
                f"of {self.total} bytes",
                router=True,
            )
        if not self._waiters and n <= self.free:
            self.free -= n
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (n, future)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(self.wait):
                await asyncio.shield(future)
        except TimeoutError:
            if future.done() and not future.cancelled():
                self.release(n)  # granted just as we gave up: hand it on
            future.cancel()
            raise WireError(
                "RESOURCE_EXHAUSTED",
                f"router: no room to buffer {what} of {n} bytes within {self.wait}s "
                f"({self.total - self.free} of {self.total} bytes held by other requests)",
                router=True,
            ) from None
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)

    def release(self, n: int) -> None:
        self.free += n
        while self._waiters:
            wanted, future = self._waiters[0]
            if future.done():
                self._waiters.popleft()
                continue
            if wanted > self.free:
                return  # first come, first served: no overtaking by smaller bodies
            self._waiters.popleft()
            self.free -= wanted
            future.set_result(None)

    def too_large(self, n: int) -> WireError:
        return WireError(
            "INVALID_ARGUMENT",
            f"router: request body of {n} bytes is above the per-request cap of "
            f"{self.per_request} bytes",
            status=413,
            router=True,
        )

    @contextlib.asynccontextmanager
    async def request_body(self, request: web.Request) -> AsyncIterator[bytes]:
        """The request's body, read within the budget and held until the block ends."""
        held = 0
        try:
            declared = request.content_length
            if declared is not None:
                if declared > self.per_request:
                    raise self.too_large(declared)
                await self.acquire(declared, "a request body")
                held = declared
                yield await request.read()
                return
            parts = []  # chunked: counted as it arrives
            async for chunk in request.content.iter_chunked(_CHUNK):
                if held + len(chunk) > self.per_request:
                    raise self.too_large(held + len(chunk))
                await self.acquire(len(chunk), "a request body")
                held += len(chunk)
                parts.append(chunk)
            yield b"".join(parts)
        finally:
            if held:
                self.release(held)

    @contextlib.asynccontextmanager
    async def answer_body(self, resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
        """A worker's answer, read within the budget and held until the block ends."""
        held = 0
        try:
            declared = resp.content_length
            if declared is not None:
                await self.acquire(declared, "an answer")
                held = declared
                yield await resp.read()
                return
            parts = []
            async for chunk in resp.content.iter_chunked(_CHUNK):
                await self.acquire(len(chunk), "an answer")
                held += len(chunk)
                parts.append(chunk)
            yield b"".join(parts)
        finally:
            if held:
                self.release(held)
