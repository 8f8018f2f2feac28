"""Cyclic garbage collection paused while work makes many short-lived containers.

Reading a large JSON body, or applying a write of thousands of columns, makes
a container or more per column (parsed lists, decisions, their documents).
None of them form cycles: reference counting frees them as soon as the work
is done. The cyclic collector, though, counts them as they are made, and runs
collections that walk every one of them while they are still alive, holding
the interpreter lock throughout: a pause of 10-20 ms for the event loop and
every read it was about to answer, for nothing collected.

:func:`paused` stops automatic collection while such work runs, in any thread.
Collection resumes when the last paused piece of work is done, and runs at the
latest every ``MAX_PAUSE`` seconds while pieces of work keep overlapping, so
that no stream of writes can put it off for good.

Freeing those containers holds the lock as well, all of them in one step when
the last reference to their list goes: :func:`release` frees them a piece at
a time instead.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Work done back to back (in several threads) may keep collection paused; after this
# long it runs once anyway.
MAX_PAUSE = 2.0

_lock = threading.Lock()
_pausers = 0
_was_enabled = False
_paused_at = 0.0


@contextmanager
def paused(pause: bool = True) -> Iterator[None]:
    """No automatic cyclic garbage collection inside (``pause`` False: as it was).

    A process that had collection off keeps it off.
    """
    global _pausers, _was_enabled, _paused_at
    if not pause:
        yield
        return
    with _lock:
        if _pausers == 0:
            _was_enabled = gc.isenabled()
            _paused_at = time.monotonic()
            gc.disable()
        _pausers += 1
    try:
        yield
    finally:
        with _lock:
            _pausers -= 1
            if _pausers == 0:
                if _was_enabled:
                    gc.enable()
            elif _was_enabled and time.monotonic() - _paused_at > MAX_PAUSE:
                gc.collect()
                _paused_at = time.monotonic()


# Items freed at a time by :func:`release`.
RELEASE_PIECE = 1000


def release(*lists: list[Any]) -> None:
    """Empty ``lists`` a piece at a time, freeing what only they hold.

    Dropping the last reference to a list of 20,000 documents frees them all in
    one step that holds the interpreter lock for milliseconds; emptied a piece
    at a time, other threads (the event loop) get the lock in between.

    >>> a, b = [{"k": i} for i in range(2500)], [[i] for i in range(10)]
    >>> release(a, b)
    >>> a, b
    ([], [])
    """
    for items in lists:
        while items:
            del items[-RELEASE_PIECE:]


__all__ = ["MAX_PAUSE", "RELEASE_PIECE", "paused", "release"]
