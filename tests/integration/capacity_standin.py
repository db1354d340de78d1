"""A router whose capacity is known by construction, for the capacity search's tests: a
reverse proxy in front of a local substrate's router that serves wake probes one at a time,
each for a fixed service time, so no more than 1 / service time wakes per second succeed.
A wake that waited longer than the queue bound for its turn is refused as a real router
refuses one it could not place before its park timeout (503, "resource exhausted"), so an
overload leaves no backlog behind that would slow the next, lighter probe.
Every other request (a step's ops, either wire form) passes straight through, and so do
wakes until the test asks for the limit (`POST /__standin/limit`, `OneAtATimeRouter.limit`):
registration's primes and the fill are then not minutes of queueing, and the campaign's
judged windows all see the limit.

A wake probe is a `ping` whose message is "wake" (docs/SPEC.md §5.1): JSON on the JSON wire,
a PingRequest on the ate wire; both carry the bytes `wake`, which is all this looks at.

It runs as its own process (`python -m tests.integration.capacity_standin --upstream URL
--service-seconds S`, which prints its URL), so its timing is not the load generator's
event loop and its load is not the generator's; `OneAtATimeRouter` starts and stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from types import TracebackType

import aiohttp
from aiohttp import web

# Hop-by-hop headers and the ones aiohttp sets itself.
LIMIT_PATH = "/__standin/limit"
_DROPPED = {"host", "content-length", "connection", "keep-alive", "transfer-encoding"}


def is_wake_probe(path: str, body: bytes) -> bool:
    return path.rstrip("/").endswith("ping") and b"wake" in body


class Proxy:
    def __init__(self, upstream: str, service_seconds: float, queue_seconds: float) -> None:
        self.upstream = upstream.rstrip("/")
        self.service_seconds = service_seconds
        self.queue_seconds = queue_seconds
        self.one_at_a_time = asyncio.Lock()
        self.session: aiohttp.ClientSession | None = None
        self.limiting = False
        self.verbose = bool(os.environ.get("CAPACITY_STANDIN_VERBOSE"))

    async def forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.path == LIMIT_PATH:
            self.limiting = True
            return web.Response(text="limiting")
        if not self.limiting or not is_wake_probe(request.path, body):
            return await self._send(request, body)
        arrived = time.monotonic()
        async with self.one_at_a_time:
            began = time.monotonic()
            if began - arrived > self.queue_seconds:
                return web.Response(
                    status=503,
                    text="resource exhausted: no room before the park timeout",
                    content_type="text/plain",
                )
            answer = await self._send(request, body)
            if self.verbose:
                print(
                    f"wake queued {began - arrived:.3f}s upstream {time.monotonic() - began:.3f}s "
                    f"{answer.status}",
                    file=sys.stderr,
                    flush=True,
                )
            # The service time is fixed: a wake that was quicker upstream still holds the
            # server for the rest of it.
            await asyncio.sleep(max(0.0, began + self.service_seconds - time.monotonic()))
            return answer

    async def _send(self, request: web.Request, body: bytes) -> web.Response:
        assert self.session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        async with self.session.request(
            request.method, self.upstream + request.path_qs, data=body, headers=headers
        ) as answer:
            data = await answer.read()
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in _DROPPED}
            return web.Response(status=answer.status, body=data, headers=kept)

    async def serve(self) -> None:
        timeout = aiohttp.ClientTimeout(total=120)
        self.session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self.forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(f"http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
        try:
            await asyncio.Event().wait()  # until the launcher stops the process
        finally:
            await self.session.close()
            await runner.cleanup()


class OneAtATimeRouter:
    """The stand-in as a subprocess (a context manager): `url` is its router URL."""

    def __init__(self, upstream: str, service_seconds: float, queue_seconds: float) -> None:
        self.args = [
            sys.executable,
            "-m",
            "tests.integration.capacity_standin",
            "--upstream",
            upstream,
            "--service-seconds",
            str(service_seconds),
            "--queue-seconds",
            str(queue_seconds),
        ]
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> OneAtATimeRouter:
        self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.process.kill()
            raise RuntimeError(f"the stand-in router did not start: {self.url!r}")
        return self

    def limit(self) -> None:
        """From now on wakes are served one at a time (blocking: call it from a thread)."""
        request = urllib.request.Request(self.url + LIMIT_PATH, method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--service-seconds", type=float, required=True)
    parser.add_argument("--queue-seconds", type=float, required=True)
    args = parser.parse_args()
    try:
        asyncio.run(Proxy(args.upstream, args.service_seconds, args.queue_seconds).serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
