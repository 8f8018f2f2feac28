"""Where work runs: inline on the event loop, or in a worker thread (one threshold).

The event loop serves every connection of the process (reads of the
selection, health checks, other producers): work that takes milliseconds
must not hold it. Work on at least ``INLINE_BYTES`` of input (a body or frame
to decode, the names of a request, a content digest, event-log entries to
parse) runs in a worker thread; smaller work inline, where it costs less
than handing it to a thread and back. This module is the only place that
makes that choice; work that is always heavy (a selector's update, a
stored state's decoding) always runs in a worker thread.

Evaluations (``GET /evaluation``: scikit-learn fits) always run in a worker
thread, at most ``EVALUATION_THREADS`` at once under a limiter of their own
(``compute``), so they never take the threads of decodes or writes.

At most ``DECODE_THREADS`` pieces of work of :func:`run` go at once, under a
limiter of their own: decoding holds the GIL most of the time, so more
threads would only contend with each other, and a flood of large bodies
waits here instead of taking the threads the engine applies writes in
(anyio's default limiter).
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
    """``fn()``: inline for ``size`` (bytes of input) under ``INLINE_BYTES``, else in a
    worker thread."""
    if size < INLINE_BYTES:
        return fn()
    return await anyio.to_thread.run_sync(fn, limiter=limiter())


__all__ = ["DECODE_THREADS", "EVALUATION_THREADS", "INLINE_BYTES", "compute", "limiter", "run"]
