"""A campaign's upload against a store that throttles (docs/SPEC.md §7): a real S3 endpoint
(moto's server mode) behind a small real HTTP proxy on 127.0.0.1 that answers S3's
`503 SlowDown` to the first N PUTs, as a fresh bucket answers a write burst. The throttled
attempts are their own class: said as throttling in the log, backed off with a seeded jitter,
counted in the upload's result, and named in the error when every attempt was throttled."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentsession_core.campaign.params import CampaignParams
from agentsession_core.campaign.upload import upload_with_retries
from agentsession_core.output.run_dir import RunDir
from agentsession_core.output.upload import read_object, s3_client

pytestmark = pytest.mark.timeout(120)
BUCKET = "throttled-runs"
SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>proxy</RequestId></Error>"
)


@dataclass
class Throttler:
    """A TCP proxy in front of `upstream` that reads each new connection's first request: a
    PUT while refusals are left gets `503 SlowDown` and the connection closed (so the client's
    retry comes on a fresh connection, read again); anything else is piped through as bytes,
    the rest of that connection with it."""

    upstream: tuple[str, int]
    refuse: int
    url: str = ""
    refused: int = 0
    piped: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        if head.startswith(b"PUT ") and self.refused < self.refuse:
            self.refused += 1
            lowered = head.lower()
            if b"expect: 100-continue" not in lowered:  # the body is on its way: read it
                length = re.search(rb"content-length:\s*(\d+)", lowered)
                await reader.readexactly(int(length.group(1)) if length else 0)
            writer.write(
                b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                + f"Content-Length: {len(SLOW_DOWN)}\r\n".encode()
                + b"Connection: close\r\n\r\n"
                + SLOW_DOWN
            )
            await writer.drain()
            writer.close()
            return
        self.piped += 1
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        up_writer.write(head)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest.fixture(scope="module")
def bucket(s3_server: str) -> str:
    s3_client(s3_server).create_bucket(Bucket=BUCKET)
    return s3_server


async def throttler(upstream: str, refuse: int) -> AsyncIterator[Throttler]:
    host, _, port = upstream.removeprefix("http://").partition(":")
    proxy = Throttler((host, int(port)), refuse)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    proxy.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield proxy
    finally:
        server.close()


def sealed_run(root: Path) -> RunDir:
    run = RunDir.create(str(root), "nightly", "throttled", time.time())
    run.write_text("logs.txt", "hello\n" * 100)
    run.write_bytes("report.html", os.urandom(20_000))
    run.write_json("gate.json", {"verdict": "pass"})
    run.write_json("status.json", {"status": "completed"})
    run.write_manifest()
    return run


def campaign(root: Path, endpoint: str, attempts: int) -> CampaignParams:
    return CampaignParams(
        name="nightly",
        tag="throttled",
        seed=7,
        out=str(root),
        dest=f"s3://{BUCKET}/team",
        upload={"endpoint_url": endpoint, "attempts": attempts, "retry_delay_seconds": 0.05},
    )


async def test_slowdown_answers_are_throttling_backed_off_and_the_upload_lands(
    bucket: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # botocore retries inside each call; 4 refusals outlast at least its first attempt.
    async for proxy in throttler(bucket, refuse=4):
        run = sealed_run(tmp_path)
        with caplog.at_level(logging.WARNING, logger="agentsession"):
            result = await upload_with_retries(run.path, campaign(tmp_path, proxy.url, 5))
    assert proxy.refused == 4
    assert result.ok, result.error
    assert result.throttled >= 1 and result.attempts == result.throttled + 1
    said = [r.getMessage() for r in caplog.records if "throttled by the store" in r.getMessage()]
    assert len(said) == result.throttled
    assert all("SlowDown" in line and "backoff with jitter" in line for line in said)
    gate = read_object(f"{result.location}/gate.json", endpoint_url=bucket)
    assert gate == (run.path / "gate.json").read_bytes()


async def test_a_store_that_keeps_throttling_fails_the_upload_naming_the_class(
    bucket: str, tmp_path: Path
) -> None:
    async for proxy in throttler(bucket, refuse=1_000):
        run = sealed_run(tmp_path)
        result = await upload_with_retries(run.path, campaign(tmp_path, proxy.url, 2))
    assert proxy.refused > 0 and proxy.piped == 0
    assert not result.ok and result.throttled == 2 == result.attempts
    assert result.error is not None
    assert result.error.startswith("throttled by the store on 2 of 2 attempts")
    status = json.loads((run.path / "status.json").read_text())
    assert status["upload"]["ok"] is False and "SlowDown" in status["upload"]["error"]
