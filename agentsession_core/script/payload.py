"""Seeded payload bytes: SHAKE-128 keyed by a short seed, in 1 MiB chunks.

Used by the engine for ingest bodies and by the local substrate's worker for RAM and file
fills. The seed is drawn from a seeded stream (pacing.stream), so the same run seed gives
the same bytes; SHAKE is about 3× faster than `random.randbytes` and its output never
changes between releases.

Big payloads are built in a thread (`await payload(seed, size)`). SHAKE's digest holds the
GIL while it squeezes (≈2 ms per MiB), so the builder hands the GIL back after every chunk
and joins the chunks with `bytes.join`, which releases it for large results: the event
loop waits at most about one chunk, never for the whole payload.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator

CHUNK = 1 << 20
SEED_BYTES = 16
# Below this a thread hop costs more than it saves: 64 KiB of SHAKE is ≈0.1 ms on the loop.
INLINE_MAX = 64 * 1024


def random_chunks(seed: bytes, size: int) -> Iterator[tuple[int, bytes]]:
    """(offset, chunk) pairs covering exactly `size` bytes; chunk i depends only on
    (seed, i), so a fill can be written piecewise without holding it all."""
    for index, offset in enumerate(range(0, size, CHUNK)):
        n = min(CHUNK, size - offset)
        yield offset, hashlib.shake_128(seed + index.to_bytes(8, "little")).digest(n)


def build(seed: bytes, size: int) -> bytes:
    """All `size` bytes for `seed`, blocking; call it from a thread for big sizes."""
    parts = []
    for _, chunk in random_chunks(seed, size):
        parts.append(chunk)
        time.sleep(0)  # let a waiting event loop take the GIL now, not at the switch interval
    return b"".join(parts)


async def payload(seed: bytes, size: int) -> bytes:
    """`build(seed, size)` without stalling the event loop."""
    if size <= INLINE_MAX:
        return b"".join(chunk for _, chunk in random_chunks(seed, size))
    return await asyncio.to_thread(build, seed, size)
