"""A process's copy of the feature names of the streams it writes (Redis store).

A feature stream's names are unique. Redis keeps them as a log, one entry per
commit that brought new names (the names joined by newlines), beside a list of
those commits' ids; the commit script appends to both, atomically with the
commit. Each process keeps, per stream it writes, the names of the log's first
``chunks`` entries in a set, with the id of the last of them (``head``). A
write's new names are looked up in that set after it has read the entries
since (``NAMES_SINCE_LUA``), and the commit script refuses the commit unless
the log still ends where the set does (``chunks`` entries, the last one
``head``'s). So the lookup costs the process a set lookup per name and Redis
nothing per name, and it is atomic with the commit however many processes
write.

A copy whose ``head`` is no longer the id at its position (Redis lost commits
in a failover, or the stream was deleted and created again) is dropped and
read again from the start.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable, Sequence

# Names the copies of one process hold together (the setting names_cache): beyond it,
# the copies of the streams written least recently are dropped (read again from Redis
# at their next write).
INDEX_NAMES = 2_000_000

# Names a lookup or an addition handles on the event loop; more go to a thread.
INLINE_NAMES = 4096


def split(joined: bytes | bytearray | memoryview) -> list[str]:
    """The names of one log entry (joined by newlines).

    >>> split(b"a\\nb")
    ['a', 'b']
    >>> split(b"")
    []
    """
    return [n for n in bytes(joined).decode().split("\n") if n]


class StreamNames:
    """The names of the first ``chunks`` entries of one stream's names log."""

    __slots__ = ("chunks", "head", "incarnation", "legacy_read", "lock", "seen")

    def __init__(self, incarnation: str) -> None:
        self.incarnation = incarnation
        self.seen: set[str] = set()
        self.chunks = 0
        self.head = ""
        # Whether the names kept by releases before the log (a set) have been read.
        self.legacy_read = False
        # One write of this stream at a time in this process reads, checks and extends
        # the copy (two reading the same entries would count them twice).
        self.lock = asyncio.Lock()

    def reset(self) -> None:
        """Empty, to be read again from the start of the log."""
        self.seen = set()
        self.chunks = 0
        self.head = ""
        self.legacy_read = False

    def take(self, ids: Sequence[bytes], entries: Sequence[bytes]) -> None:
        """Entries ``chunks``, ``chunks + 1``... of the log, with their commits' ids."""
        for entry in entries:
            self.seen.update(split(entry))
        self.chunks += len(entries)
        if ids:
            self.head = bytes(ids[-1]).decode()

    def add(self, names: Iterable[str], commit_id: str) -> None:
        """The names a commit of this process appended as the log's next entry."""
        self.seen.update(names)
        self.chunks += 1
        self.head = commit_id

    def duplicates(self, names: Sequence[str], limit: int = 5) -> list[str]:
        """The first ``limit`` of ``names`` already in the stream, in order."""
        seen = self.seen
        found: list[str] = []
        for n in names:
            if n in seen:
                found.append(n)
                if len(found) == limit:
                    break
        return found


class NamesCache:
    """The copies of one process, the least recently written dropped beyond ``limit``."""

    def __init__(self, limit: int = INDEX_NAMES) -> None:
        self.limit = limit
        self._copies: OrderedDict[str, StreamNames] = OrderedDict()

    def get(self, stream_id: str, incarnation: str) -> StreamNames:
        """The copy of ``stream_id`` (a new, empty one for another incarnation)."""
        copy = self._copies.get(stream_id)
        if copy is None or copy.incarnation != incarnation:
            copy = StreamNames(incarnation)
            self._copies[stream_id] = copy
        self._copies.move_to_end(stream_id)
        return copy

    def drop(self, stream_id: str, copy: StreamNames | None = None) -> None:
        """Forget the copy of ``stream_id`` (only if it is ``copy``, when given)."""
        if copy is None or self._copies.get(stream_id) is copy:
            self._copies.pop(stream_id, None)

    def trim(self) -> None:
        """Drop the least recently written copies while they hold more than ``limit``
        names together (never the most recent one)."""
        total = sum(len(c.seen) for c in self._copies.values())
        while total > self.limit and len(self._copies) > 1:
            _, oldest = self._copies.popitem(last=False)
            total -= len(oldest.seen)

    def __len__(self) -> int:
        return len(self._copies)


__all__ = ["INDEX_NAMES", "INLINE_NAMES", "NamesCache", "StreamNames", "split"]
