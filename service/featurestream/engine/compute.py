"""Where a write's selector work runs: compute worker processes, or threads of this one.

:class:`Workers` (``compute_workers`` >= 1, the default being the number of
cores) keeps a pool of worker processes beside the serving process. Each
stream's work goes to one worker (affinity by stream id), which keeps the
decoded selectors of the streams it computes (an LRU bounded like the
serving process's cache), so a state crosses the process boundary only when
that worker's copy is not the one the write starts from. A copy is named by
a token: the serving process gives a stream's state a new token whenever it
reads it from the store, and the token of the state a write makes (chosen
before the write is sent) once that write is committed. A worker asked to
work from a token it does not hold answers so, and is sent the state.

The serving process commits what a worker computed: a worker that dies
mid-write leaves nothing half-applied; the request answers 503
``compute-unavailable`` (nothing was committed: a retry with the same seq is
safe) and the worker is replaced.

:class:`Threads` (``compute_workers`` = 0) computes in threads of the serving
process, on the selector its cache holds: the mode for debugging, and for
apps embedded in a test.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import time
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import Any, Protocol

import anyio.to_thread

from featurestream.engine import catalogue
from featurestream.engine.cache import Live, footprint
from featurestream.engine.outcome import Outcome
from featurestream.engine.work import Answer, Work, perform, resume_stored
from featurestream.errors import ComputeUnavailable
from featurestream.selectors import Selector

log = logging.getLogger("featurestream.compute")

#: How often a worker checks that the serving process that started it still runs.
PARENT_POLL_SECONDS = 0.5


class Compute(Protocol):
    """Runs the selector work of writes."""

    async def apply(
        self, stream_id: str, live: Live, work: Work, version: int
    ) -> tuple[Answer, Outcome | None]: ...

    async def load(self, stream_id: str, live: Live, blob: bytes) -> None:
        """Give ``live`` the stored state ``blob``, decoded where it is computed on;
        NumericallyUnstable when it is not finite (see ``work.resume_stored``)."""

    def hold(self, live: Live, blob: bytes) -> None:
        """Give ``live`` (a stream just created, with its selector) the state ``blob``."""

    def committed(self, live: Live, outcome: Outcome) -> None:
        """``live`` now holds the state ``outcome`` made (it was committed)."""

    async def start(self) -> None:
        """Return once selector work can start (the workers have loaded the selectors)."""

    def warm(self, done: Callable[[bool], None]) -> None:
        """Load the compiled kernels where selectors run, in the background; then
        ``done(True)``, or ``done(False)`` when that failed."""

    def close(self) -> None: ...


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def open_compute(
    workers: int | None, cache_streams: int, cache_bytes: int, log_level: str | None = None
) -> Compute:
    """The compute of ``compute_workers``: None is the number of cores, 0 threads.
    ``log_level``: the workers log as the server does (JSON lines) at that level."""
    count = cores() if workers is None else workers
    if count <= 0:
        return Threads()
    return Workers(count, cache_streams, cache_bytes, log_level)


class Threads:
    """Selector work in worker threads of this process, on the cached selectors."""

    async def apply(
        self, stream_id: str, live: Live, work: Work, version: int
    ) -> tuple[Answer, Outcome | None]:
        return await anyio.to_thread.run_sync(perform, live, work, version)

    async def load(self, stream_id: str, live: Live, blob: bytes) -> None:
        live.selector, live.size = await anyio.to_thread.run_sync(resume_stored, stream_id, blob)

    def hold(self, live: Live, blob: bytes) -> None:
        assert live.selector is not None
        live.size = footprint(live.selector.snapshot())

    def committed(self, live: Live, outcome: Outcome) -> None:
        live.size = outcome.footprint

    async def start(self) -> None:
        return None

    def warm(self, done: Callable[[bool], None]) -> None:
        def run() -> None:
            done(warm_kernels())

        threading.Thread(target=run, name="featurestream-warm", daemon=True).start()

    def close(self) -> None:
        return None


@dataclass(frozen=True)
class Call:
    """One write's work as a worker gets it."""

    stream_id: str
    info: dict[str, Any]
    incarnation: str
    version: int  # the version the work starts from
    token: str  # the state the work starts from
    blob: bytes | None  # that state, when the worker may not hold it
    next_token: str  # the state the work makes, once committed
    work: Work


@dataclass(frozen=True)
class _Load:
    """A stored state for a worker to decode, check and keep under ``token``."""

    stream_id: str
    token: str
    blob: bytes


class Workers:
    """A pool of compute worker processes, one stream always on the same one."""

    def __init__(
        self, count: int, cache_streams: int, cache_bytes: int, log_level: str | None = None
    ) -> None:
        self.count = count
        self._bounds = (cache_streams, cache_bytes)
        self._log_level = log_level
        self._pools: list[ProcessPoolExecutor | None] = [None] * count
        self.states_sent = 0  # states sent to a worker that did not hold them
        self._warm = False
        # Started now, not at the first write: importing the selectors takes a while.
        self._starting = [self._pool(i).submit(_ready) for i in range(count)]

    async def start(self) -> None:
        # The app answers nothing before this returns: its first writes do not wait for
        # an interpreter to start and import the selectors.
        await asyncio.gather(*(asyncio.wrap_future(f) for f in self._starting))

    def warm(self, done: Callable[[bool], None]) -> None:
        self._warm = True
        pending = [self._pool(i).submit(warm_kernels) for i in range(self.count)]
        left = [len(pending)]
        lock = threading.Lock()

        def one(future: Future[bool]) -> None:
            with lock:
                left[0] -= 1
                if left[0] == 0:
                    done(all(not f.exception() and f.result() for f in pending))

        for future in pending:
            future.add_done_callback(one)

    def _pool(self, i: int) -> ProcessPoolExecutor:
        pool = self._pools[i]
        if pool is None:
            pool = self._pools[i] = ProcessPoolExecutor(
                max_workers=1,
                # A fresh interpreter: the serving process's threads and sockets stay there.
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start,
                initargs=(*self._bounds, os.getpid(), self._log_level),
            )
        return pool

    def worker_of(self, stream_id: str) -> int:
        """The worker that computes ``stream_id`` (stable across processes and restarts)."""
        return zlib.crc32(stream_id.encode()) % self.count

    async def apply(
        self, stream_id: str, live: Live, work: Work, version: int
    ) -> tuple[Answer, Outcome | None]:
        i = self.worker_of(stream_id)
        call = Call(
            stream_id, live.info, live.incarnation, live.version, live.token, None,
            uuid.uuid4().hex, work,
        )  # fmt: skip
        reply = await self._run(i, call)
        if reply is None:
            # The worker does not hold this state: send it.
            self.states_sent += 1
            reply = await self._run(i, replace(call, blob=live.blob))
        assert isinstance(reply, tuple)
        answer, outcome = reply
        live.next_token = call.next_token
        return answer, outcome

    async def load(self, stream_id: str, live: Live, blob: bytes) -> None:
        # Decoded (and checked) by its worker now, which keeps it for the next write.
        live.selector, live.blob, live.token = None, blob, uuid.uuid4().hex
        self.states_sent += 1
        size = await self._run(self.worker_of(stream_id), _Load(stream_id, live.token, blob))
        assert isinstance(size, int)
        live.size = size

    def hold(self, live: Live, blob: bytes) -> None:
        # A stream's weight in either cache is what its state takes decoded (footprint).
        assert live.selector is not None
        live.size = footprint(live.selector.snapshot())
        live.selector, live.blob, live.token = None, blob, uuid.uuid4().hex

    def committed(self, live: Live, outcome: Outcome) -> None:
        live.token, live.blob, live.size = live.next_token, outcome.blob, outcome.footprint

    async def _run(self, i: int, call: Call | _Load) -> tuple[Answer, Outcome | None] | int | None:
        pool = self._pool(i)
        try:
            return await asyncio.wrap_future(pool.submit(_serve, call))
        except BrokenProcessPool:
            if self._pools[i] is pool:
                log.error("compute worker %d died; starting another", i)
                self._pools[i] = None
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool(i).submit(warm_kernels if self._warm else _ready)
            raise ComputeUnavailable(
                f"The compute worker of stream {call.stream_id!r} stopped while it applied "
                "this write; nothing was committed. Send the write again (with the same "
                "seq, if it had one)."
            ) from None

    def close(self) -> None:
        for i, pool in enumerate(self._pools):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
                self._pools[i] = None


# ----------------------------------------------------------------------- in the worker

_held: OrderedDict[str, tuple[str, Selector[Any, Any], int]] = OrderedDict()
_bounds = [0, 0]


def _start(cache_streams: int, cache_bytes: int, parent: int, log_level: str | None) -> None:
    if log_level is not None:
        from featurestream.logs import configure_logging

        configure_logging(log_level)
    _bounds[:] = [cache_streams, cache_bytes]
    # A worker outlives no serving process, however that one ended (SIGKILL included).
    threading.Thread(target=_orphaned, args=(parent,), name="parent-watch", daemon=True).start()
    import featurestream.selectors  # noqa: F401  (loaded once, before the first write)


def _orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(0)


def _ready() -> None:
    return None


def warm_kernels() -> bool:
    """Load the compiled kernels (OFS) in this process; False when that failed (a kernel
    that cannot load fails its first batch instead)."""
    started = time.monotonic()
    try:
        catalogue.warm_kernels()
    except Exception:
        log.exception("loading the compiled kernels failed")
        return False
    log.info("compiled kernels loaded in %.1f s", time.monotonic() - started)
    return True


def _serve(call: Call | _Load) -> tuple[Answer, Outcome | None] | int | None:
    """Do a call's work on the selector this worker holds; None when it holds another
    state of the stream and the call did not bring it. A load answers the footprint of
    the state it decoded."""
    if isinstance(call, _Load):
        _held.pop(call.stream_id, None)
        selector, size = resume_stored(call.stream_id, call.blob)
        _keep(call.stream_id, call.token, selector, size)
        return size
    held = _held.pop(call.stream_id, None)
    if held is not None and held[0] == call.token:
        _, selector, size = held
    elif call.blob is None:
        return None
    else:
        selector, size = resume_stored(call.stream_id, call.blob)
    live = Live(call.info, call.incarnation, call.version, selector)
    try:
        answer, outcome = perform(live, call.work, call.version + 1)
    except BaseException:
        _keep(call.stream_id, call.token, live.selector, size)  # put back as it was
        raise
    assert live.selector is not None
    if outcome is None:
        _keep(call.stream_id, call.token, live.selector, size)
    else:
        _keep(call.stream_id, call.next_token, live.selector, outcome.footprint)
    return answer, outcome


def _keep(stream_id: str, token: str, selector: Selector[Any, Any] | None, size: int) -> None:
    streams, most = _bounds
    if selector is None or streams <= 0:
        return
    _held[stream_id] = (token, selector, size)
    total = sum(s for _, _, s in _held.values())
    while _held and (len(_held) > streams or total > most):
        _, (_, _, gone) = _held.popitem(last=False)
        total -= gone


__all__ = ["Compute", "Threads", "Workers", "cores", "open_compute"]
