"""The glutton's real work on bytes, files and CPU, with no wire in sight: filling and
checksumming RAM arrays, hashing files, burning CPU on threads (docs/SPEC.md §1.2, §2.3).
glutton.py calls these from both wire forms' handlers.

Random bytes come from SHAKE-128 (script/payload.py) keyed by a per-op seed: seeded, and
about 3x faster than `random.randbytes`. Big fills, hashes and file work run in threads in
1 MiB chunks so the event loop keeps answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from agentsession_core.script.payload import random_chunks
from agentsession_core.substrate.protocol import PAGE

CHUNK = 1 << 20
_BURN_BLOCK = b"\x5a" * 65536  # > 2047 bytes, so hashlib releases the GIL while hashing


def fill_random(array: bytearray, start: int, size: int, seed: bytes) -> None:
    """Overwrite `size` bytes of `array` from `start`, wrapping at its end."""
    length = len(array)
    for offset, chunk in random_chunks(seed, size):
        pos = (start + offset) % length
        first = min(len(chunk), length - pos)
        array[pos : pos + first] = chunk[:first]
        if first < len(chunk):
            array[0 : len(chunk) - first] = chunk[first:]


def page_checksum(view: memoryview) -> int:
    # One byte per 4 KiB page: what walking the array touches.
    return zlib.crc32(view[::PAGE].tobytes())


def file_digest(path: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as src:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def burn(deadline: float) -> int:
    iterations = 0
    while time.monotonic() < deadline:
        hashlib.sha256(_BURN_BLOCK).digest()
        iterations += 1
    return iterations


async def in_threads(fn: Callable[..., Any], args: tuple[Any, ...], count: int) -> list[Any]:
    """Run fn(*args) on `count` fresh threads (the default pool is too small for
    parallel burns) without blocking the loop."""
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(count)]

    def run(future: asyncio.Future[Any]) -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to the awaiting coroutine
            loop.call_soon_threadsafe(_settle, future, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, future, result, None)

    for future in futures:
        threading.Thread(target=run, args=(future,), daemon=True).start()
    return list(await asyncio.gather(*futures))


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


def write_hashed(out: IO[bytes], digest: Any, block: bytes) -> None:
    digest.update(block)
    out.write(block)


def close_and_remove(out: IO[bytes], path: Path) -> None:
    out.close()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
