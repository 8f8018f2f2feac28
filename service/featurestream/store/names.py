"""A process's copy of the feature names of the streams it writes (Redis store).

A feature stream's names are unique. Redis keeps them as a log, one entry per
commit that brought new names (the names joined by newlines), beside a list of
those commits' ids; the commit script appends to both, atomically with the
commit. Each process keeps, per stream it writes, the names of the log's first
``chunks`` entries (a ``NameSet``), with the id of the last of them
(``head``). A write's new names are looked up there after it has read the entries
since (``store/redis/names_since.lua``), and the commit script refuses the commit unless
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
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain

# Names the copies of one process hold together (the setting names_cache): beyond it,
# the copies of the streams written least recently are dropped (read again from Redis
# at their next write).
INDEX_NAMES = 2_000_000

# Dicts a copy's names are spread over (a power of two): see NameSet.
SHARDS = 256

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


class NameSet:
    """A set of names, kept as ``SHARDS`` dicts by hash (the names their keys).

    Dicts, not sets: the garbage collector stops looking into a dict whose keys
    and values are all strings and None, where it walks every member of a set at
    each full collection (long, at a million names, and the event loop answers
    nobody meanwhile). Shards: Python grows a dict (or a set) by rehashing it
    whole, in one step that holds the interpreter lock; a shard holds a
    ``SHARDS``-th of the names and grows in microseconds.

    >>> s = NameSet()
    >>> s.update(["a", "b"])
    >>> "a" in s, "c" in s, len(s)
    (True, False, 2)
    >>> s.duplicates(s.groups(["c", "b", "a"]), ["c", "b", "a"])
    ['b', 'a']
    """

    __slots__ = ("_shards",)

    def __init__(self) -> None:
        self._shards: list[dict[str, None]] = [{} for _ in range(SHARDS)]

    def __contains__(self, name: object) -> bool:
        return name in self._shards[hash(name) & (SHARDS - 1)]

    def __len__(self) -> int:
        return sum(map(len, self._shards))

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._shards)

    @staticmethod
    def groups(names: Iterable[str]) -> list[list[str]]:
        """``names`` by shard: those of shard i in item i, in their order."""
        out: list[list[str]] = [[] for _ in range(SHARDS)]
        mask = SHARDS - 1
        for n in names:
            out[hash(n) & mask].append(n)
        return out

    def add_groups(self, groups: list[list[str]]) -> None:
        """Add names grouped by :meth:`groups`."""
        for shard, group in zip(self._shards, groups, strict=True):
            if group:
                shard.update(dict.fromkeys(group))

    def update(self, names: Iterable[str]) -> None:
        self.add_groups(self.groups(names))

    def free(self) -> None:
        """Empty, a shard at a time: each step frees a ``SHARDS``-th of the names, and
        other threads get the interpreter lock in between."""
        for i in range(SHARDS):
            self._shards[i] = {}

    def duplicates(
        self, groups: list[list[str]], names: Sequence[str], limit: int = 5
    ) -> list[str]:
        """The first ``limit`` of ``names`` (grouped in ``groups``) already in the set,
        in their order."""
        found: set[str] = set()
        for shard, group in zip(self._shards, groups, strict=True):
            if group and not shard.keys().isdisjoint(group):
                found.update(shard.keys() & group)
        if not found:
            return []
        return [n for n in names if n in found][:limit]


class StreamNames:
    """The names of the first ``chunks`` entries of one stream's names log."""

    __slots__ = ("chunks", "head", "incarnation", "lock", "seen")

    def __init__(self, incarnation: str) -> None:
        self.incarnation = incarnation
        self.seen = NameSet()
        self.chunks = 0
        self.head = ""
        # One write of this stream at a time in this process reads, checks and extends
        # the copy (two reading the same entries would count them twice).
        self.lock = asyncio.Lock()

    def reset(self) -> NameSet:
        """Empty, to be read again from the start of the log; the names it held."""
        held, self.seen = self.seen, NameSet()
        self.chunks = 0
        self.head = ""
        return held

    def take(self, ids: Sequence[bytes], entries: Sequence[bytes]) -> None:
        """Entries ``chunks``, ``chunks + 1``... of the log, with their commits' ids."""
        for entry in entries:
            self.seen.update(split(entry))
        self.chunks += len(entries)
        if ids:
            self.head = bytes(ids[-1]).decode()

    def check(self, names: Sequence[str], limit: int = 5) -> tuple[list[str], list[list[str]]]:
        """The first ``limit`` of ``names`` already in the stream (in their order), and
        the names grouped for :meth:`add`."""
        groups = self.seen.groups(names)
        return self.seen.duplicates(groups, names, limit), groups

    def add(self, groups: list[list[str]], commit_id: str) -> None:
        """The names (as :meth:`check` grouped them) that a commit of this process
        appended as the log's next entry."""
        self.seen.add_groups(groups)
        self.chunks += 1
        self.head = commit_id


class NamesCache:
    """The copies of one process, the least recently written dropped beyond ``limit``.

    A copy dropped while no write holds it is emptied on the spot (a write that
    still had it would read the log again) and its names go to ``garbage``, for
    the caller to free in a thread (``NameSet.free``): freeing a million names
    at once takes the interpreter lock for tens of milliseconds.
    """

    def __init__(self, limit: int = INDEX_NAMES) -> None:
        self.limit = limit
        self._copies: OrderedDict[str, StreamNames] = OrderedDict()
        self.garbage: list[NameSet] = []

    def get(self, stream_id: str, incarnation: str) -> StreamNames:
        """The copy of ``stream_id`` (a new, empty one for another incarnation)."""
        copy = self._copies.get(stream_id)
        if copy is None or copy.incarnation != incarnation:
            if copy is not None:
                self._retire(copy)
            copy = StreamNames(incarnation)
            self._copies[stream_id] = copy
        self._copies.move_to_end(stream_id)
        return copy

    def drop(self, stream_id: str) -> None:
        """Forget the copy of ``stream_id`` (its stream is gone)."""
        copy = self._copies.pop(stream_id, None)
        if copy is not None:
            self._retire(copy)

    def trim(self) -> None:
        """Drop the least recently written copies while they hold more than ``limit``
        names together (never the most recent one, nor one a write holds)."""
        total = sum(len(c.seen) for c in self._copies.values())
        for stream_id in list(self._copies)[:-1]:
            if total <= self.limit:
                break
            copy = self._copies[stream_id]
            if copy.lock.locked():
                continue
            del self._copies[stream_id]
            total -= len(copy.seen)
            self._retire(copy)

    def take_garbage(self) -> list[NameSet]:
        """The names of the copies dropped since the last call, to free."""
        out, self.garbage = self.garbage, []
        return out

    def _retire(self, copy: StreamNames) -> None:
        if not copy.lock.locked():
            self.garbage.append(copy.reset())

    def __len__(self) -> int:
        return len(self._copies)


__all__ = ["INDEX_NAMES", "INLINE_NAMES", "SHARDS", "NameSet", "NamesCache", "StreamNames", "split"]
