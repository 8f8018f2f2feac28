"""Decoding off the event loop: large bodies and frames are read in worker threads.

The event loop serves every connection of the process (reads of the
selection, health checks, other producers): a body that takes tens of
milliseconds to parse must not hold it. Bodies and frames of at least
``INLINE_BYTES`` are decoded in a worker thread; smaller ones inline, where
decoding costs less than handing the work to a thread and back (a thread hop
costs tens of microseconds; 64 KiB of JSON take about a millisecond with
orjson and the bulk checks, so the loop is never held much longer than that).

Evaluations (``GET /evaluation``: scikit-learn fits) always run in a worker
thread, at most ``EVALUATION_THREADS`` at once under a limiter of their own
(``compute``), so they never take the threads of decodes or writes.

At most ``DECODE_THREADS`` decodes run at once, under a limiter of their own:
decoding holds the GIL most of the time, so more threads would only contend
with each other, and a flood of large bodies waits here instead of taking the
threads the engine applies writes in (anyio's default limiter).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")

INLINE_BYTES = 64 * 1024
DECODE_THREADS = 2
EVALUATION_THREADS = 1

# One limiter per event loop (a limiter belongs to the loop that made it).
_limiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = (
    weakref.WeakKeyDictionary()
)


_heavy: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.CapacityLimiter] = (
    weakref.WeakKeyDictionary()
)


def limiter() -> anyio.CapacityLimiter:
    """The decode threads' limiter of the running event loop."""
    loop = asyncio.get_running_loop()
    lim = _limiters.get(loop)
    if lim is None:
        lim = _limiters[loop] = anyio.CapacityLimiter(DECODE_THREADS)
    return lim


async def compute(fn: Callable[[], T]) -> T:
    """``fn()`` in a worker thread, at most ``EVALUATION_THREADS`` at once (any size)."""
    loop = asyncio.get_running_loop()
    lim = _heavy.get(loop)
    if lim is None:
        lim = _heavy[loop] = anyio.CapacityLimiter(EVALUATION_THREADS)
    return await anyio.to_thread.run_sync(fn, limiter=lim)


async def run(size: int, fn: Callable[[], T]) -> T:
    """``fn()``: inline for input under ``INLINE_BYTES``, else in a decode thread."""
    if size < INLINE_BYTES:
        return fn()
    return await anyio.to_thread.run_sync(fn, limiter=limiter())


__all__ = ["DECODE_THREADS", "EVALUATION_THREADS", "INLINE_BYTES", "compute", "limiter", "run"]
