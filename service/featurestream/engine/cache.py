"""The streams this process holds decoded, and the locks that serialise their writers.

A process that holds the latest version of a stream applies a write without
reading the state back from the store. The cache is bounded twice: by the
number of streams (``cache_streams``) and by the memory their decoded states
take (``cache_bytes``, measured by :func:`footprint`: the bytes of every array
and of every Python object of the state, names included, which can be several
times the encoded length); the least recently used streams go first.

Each stream's writers in this process take its asyncio lock. A lock lives
only while somebody holds or waits for it, or while the stream is cached, so
the table does not grow with every stream id ever named (unknown ids too).
When the holder fails because the store is unavailable (a hung Redis: it
waited ``store_timeout``), the writers that were already waiting fail at once
with it instead of each waiting ``store_timeout`` in turn: every request is
answered within about one ``store_timeout`` however many queue on a stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from featurestream.errors import StoreFull, StoreUnavailable
from featurestream.selectors import Selector


@dataclass
class Live:
    """A stream as this process last saw it."""

    info: dict[str, Any]
    incarnation: str
    version: int
    # The decoded selector, where this process computes (compute_workers = 0); None where
    # compute workers do (engine/compute.py): then ``blob`` holds the encoded state.
    selector: Selector[Any, Any] | None
    producers: dict[str, int] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)  # producer -> ms of its last write
    # Memory the decoded state takes (footprint; decoded here or in its compute worker):
    # the stream's weight in the bytes bound.
    size: int = 0
    from_cache: bool = False
    # The last commit this copy holds: the next commit's expected_commit.
    commit_id: str = ""
    blob: bytes = b""
    # Compute workers: the name of the state held (``token``), and of the state the
    # write being applied makes (``next_token``), once committed.
    token: str = ""
    next_token: str = ""

    @property
    def kind(self) -> str:
        return str(self.info["kind"])


_STR = sys.getsizeof("")
_ARRAY = sys.getsizeof(np.empty(0))


def footprint(value: Any) -> int:
    """Bytes a decoded selector state takes in memory, about.

    Arrays count their buffers, sequences of names their strings, other Python
    values their objects: what the state holds, not what its encoding weighs
    (a name costs its length and a few bytes encoded, some 60 bytes more decoded).

    >>> footprint(np.zeros(1000)) > 8000
    True
    """
    if isinstance(value, np.ndarray):
        return int(value.nbytes) + _ARRAY
    if isinstance(value, str):
        return sys.getsizeof(value)
    if isinstance(value, (tuple, list)):
        size = sys.getsizeof(value)
        if value and all(type(v) is str for v in value):
            # The long sequences of names: summed in bulk (most are ASCII).
            return size + len(value) * _STR + sum(map(len, value))
        return size + sum(footprint(v) for v in value)
    if isinstance(value, Mapping):
        return sys.getsizeof(value) + sum(footprint(k) + footprint(v) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sys.getsizeof(value) + sum(
            footprint(getattr(value, f.name)) for f in dataclasses.fields(value)
        )
    return sys.getsizeof(value)


@dataclass
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # tasks holding or waiting for the lock
    unavailable_at: float = -1.0  # when a holder last failed for want of the store


class StreamCache:
    """An LRU of decoded streams, bounded by count and bytes, with per-stream locks."""

    def __init__(self, max_streams: int, max_bytes: int) -> None:
        self.max_streams = max_streams
        self.max_bytes = max_bytes
        self._live: OrderedDict[str, Live] = OrderedDict()
        self._bytes = 0
        self._slots: dict[str, _Slot] = {}

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, stream_id: str) -> bool:
        return stream_id in self._live

    @property
    def bytes(self) -> int:
        """Memory the cached streams' decoded states take (their footprints)."""
        return self._bytes

    def locks(self) -> int:
        """Locks in the table (held, waited for, or of a cached stream)."""
        return len(self._slots)

    def peek(self, stream_id: str) -> Live | None:
        """The cached stream, without counting it as a use."""
        return self._live.get(stream_id)

    def get(self, stream_id: str) -> Live | None:
        """The cached stream, now the most recently used."""
        live = self._live.get(stream_id)
        if live is not None:
            self._live.move_to_end(stream_id)
        return live

    def put(self, stream_id: str, live: Live) -> None:
        """Keep ``live`` as the most recently used, then evict down to the bounds."""
        if self.max_streams <= 0:
            return
        old = self._live.pop(stream_id, None)
        if old is not None:
            self._bytes -= old.size
        self._live[stream_id] = live
        self._bytes += live.size
        while self._live and (len(self._live) > self.max_streams or self._bytes > self.max_bytes):
            evicted, gone = self._live.popitem(last=False)
            self._bytes -= gone.size
            self._prune(evicted)

    def drop(self, stream_id: str) -> None:
        """Forget the stream (its state may be behind the store's)."""
        live = self._live.pop(stream_id, None)
        if live is not None:
            self._bytes -= live.size
            self._prune(stream_id)

    @asynccontextmanager
    async def locked(self, stream_id: str) -> AsyncIterator[None]:
        """Hold the stream's lock: this process's writers of a stream go one at a time."""
        slot = self._slots.get(stream_id)
        if slot is None:
            slot = self._slots[stream_id] = _Slot()
        slot.users += 1
        arrived = time.monotonic()
        try:
            async with slot.lock:
                if slot.unavailable_at >= arrived:
                    # The writer ahead of us waited for the store in vain meanwhile.
                    raise StoreUnavailable(
                        "The store did not answer the request ahead of this one on the "
                        "same stream; nothing was applied."
                    )
                try:
                    yield
                except StoreUnavailable as exc:
                    if not isinstance(exc, StoreFull):
                        slot.unavailable_at = time.monotonic()
                    raise
        finally:
            slot.users -= 1
            self._prune(stream_id)

    def _prune(self, stream_id: str) -> None:
        slot = self._slots.get(stream_id)
        if slot is not None and slot.users == 0 and stream_id not in self._live:
            del self._slots[stream_id]


__all__ = ["Live", "StreamCache", "footprint"]
