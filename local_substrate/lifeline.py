"""Dying with the process that started us (docs/SPEC.md §2.4): an embedded local substrate
must not outlive the run that embedded it, even a run killed with SIGKILL, and a worker must
not outlive its server.

Two mechanisms, because each has a gap the other covers:
- the parent's pipe: the parent holds the write end of our stdin; when it dies for any
  reason the kernel closes it and we read EOF. Reliable, but only while our event loop runs;
- PR_SET_PDEATHSIG (Linux, through ctypes): the kernel signals us when the *thread* that
  forked us exits. Immediate even when the loop is busy, but a parent that forked us from a
  short-lived thread (the launcher starts the server from asyncio's executor threads) would
  have us killed when that thread ends. So it is used only for workers, which their server
  forks from its event loop's thread, the one thread that lives as long as the server;
  the server itself relies on the pipe, and on noticing that it was re-parented.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_POLL = 1.0


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send `sig` when our parent goes; False where that is not offered."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


async def parent_gone(poll: float = PARENT_POLL) -> None:
    """Return once our parent has gone: EOF on stdin (a pipe whose write end only the parent
    holds), or a new parent pid (we were re-parented, e.g. to init)."""
    parent = os.getppid()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def eof() -> None:
        while await reader.read(4096):
            pass

    task = asyncio.ensure_future(eof())
    try:
        while not task.done() and os.getppid() == parent:
            await asyncio.wait({task}, timeout=poll)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def readable(fd: int) -> None:
    """Until `fd` can be read (data, or EOF: the other end closed), without a thread."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def on_readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, on_readable)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
