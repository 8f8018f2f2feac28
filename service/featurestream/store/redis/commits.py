"""The commit of a write (``commit.lua``), with the check that a feature stream's new
names are not in it yet.

A write's new names are looked up in this process's copy of the stream's names
log (``store/names.py``), read up to date first (``names_since.lua``); the commit
script appends them to the log as one entry, only if the log still ends where
the copy does. Redis does no work per name, and no command holds it longer
than a copy of the request's names takes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, suppress
from typing import Any, TypeVar

from featurestream.errors import ConcurrentUpdate, DuplicateNames, StreamNotFound
from featurestream.store.base import Commit
from featurestream.store.keys import StreamKeys, stream_keys
from featurestream.store.names import INLINE_NAMES, NamesCache, NameSet, StreamNames
from featurestream.store.redis.health import Readiness
from featurestream.store.redis.scripts import Scripts, commit_args
from featurestream.store.redis.writes import Writes

T = TypeVar("T")

# Log entries one names_since.lua call returns at most: an entry holds the names of a
# request (at most max_columns_per_request of them), so a reply holds no more names
# than the commit that wrote them carried.
NAMES_ENTRIES = 1


class Commits:
    """The commits of one store, and this process's copies of its streams' names."""

    def __init__(
        self,
        scripts: Scripts,
        writes: Writes,
        guard: Callable[[], AbstractAsyncContextManager[None]],
        readiness: Readiness,
        *,
        prefix: str,
        limits: tuple[int, int, int],
        names_cache: int,
    ) -> None:
        self._commit, self._names_since = scripts.commit, scripts.names_since
        self._writes = writes
        self._guard = guard
        self._readiness = readiness
        self._prefix = prefix
        # The replay window, the event retention and the replay bytes (commit_args).
        self._limits = limits
        self.names = NamesCache(names_cache)
        self._adding: set[asyncio.Task[None]] = set()  # see commit

    async def close(self) -> None:
        """Wait for the names of commits still being added to their copies."""
        for task in list(self._adding):
            with suppress(Exception):
                await task

    def forget(self, stream_id: str) -> None:
        """Drop this process's copy of the names of a deleted stream."""
        self.names.drop(stream_id)
        self._free_names()

    async def commit(self, stream_id: str, commit: Commit) -> int:
        """Commit a write as one compare-and-set (``commit.lua``).

        A feature stream's names are unique: a write's new names are looked up in
        this process's copy of the stream's names log, read up to date first
        (``_names_of``); the script appends them to the log as one entry, only if
        the log still ends where the copy does (else -4: read again, look up again).
        Redis does no work per name, and no command holds it longer than a copy of
        the request's names takes. See ``store/names.py``.
        """
        k = stream_keys(self._prefix, stream_id)
        names = list(commit.names) if commit.state_changed else []
        if not names:
            result, _ = await self.script(stream_id, k, commit)
            return result
        copy = self.names.get(stream_id, commit.incarnation)
        await copy.lock.acquire()
        handed = False  # the lock handed to the task that adds the names to the copy
        try:
            for _ in range(3):
                looked = await self._names_of(stream_id, k, commit, copy)
                if looked is None:
                    # This commit is recorded (a retried call): its names are its own.
                    result, _ = await self.script(stream_id, k, commit)
                    return result
                known, groups = looked
                result, appended = await self.script(stream_id, k, commit, known)
                if result != -4:
                    break
                # The log moved under the copy (a failover lost commits?): read it anew.
                self.names.garbage.append(copy.reset())
            else:
                raise ConcurrentUpdate(stream_id, commit.expected_version)
            if appended and (copy.chunks, copy.head) == known:
                if len(names) > INLINE_NAMES:
                    # Committed: the answer need not wait for the copy, only the next
                    # write of this stream in this process does (it takes the lock).
                    task = asyncio.get_running_loop().create_task(
                        self._add_names(copy, groups, commit.commit_id)
                    )
                    self._adding.add(task)
                    task.add_done_callback(self._adding.discard)
                    handed = True
                else:
                    copy.add(groups, commit.commit_id)
        finally:
            if not handed:
                copy.lock.release()
            # Refused or failed too: the copy may have grown, or been read anew.
            self.names.trim()
            self._free_names()
        return result

    async def _add_names(self, copy: StreamNames, groups: list[list[str]], commit_id: str) -> None:
        """The names of a commit into ``copy``, in a thread; then the copy's lock is free."""
        try:
            await asyncio.to_thread(copy.add, groups, commit_id)
        finally:
            copy.lock.release()

    def _free_names(self) -> None:
        """Free the names of the copies dropped, in a thread when they are many (not
        awaited: nothing waits for memory to be freed)."""
        garbage = self.names.take_garbage()
        if sum(map(len, garbage)) > INLINE_NAMES:
            asyncio.get_running_loop().run_in_executor(None, _free, garbage)
        else:
            _free(garbage)

    async def script(
        self, stream_id: str, k: StreamKeys, commit: Commit, known: tuple[int, str] = (0, "")
    ) -> tuple[int, bool]:
        """The commit script's (result, whether the names were appended to the log);
        ``known``: where the names log ended when the names were looked up."""
        args = commit_args(commit, k.channel, self._limits, known)
        async with self._guard():
            reply: Any = await self._writes.script(self._commit, list(k.all()), args)
        result, appended = int(reply[0]), bool(int(reply[1]))
        if result >= 0:
            self._readiness.full_at = None  # a write went through: Redis has room
        if result == -2:
            raise StreamNotFound(stream_id)
        if result == -1:
            raise ConcurrentUpdate(stream_id, commit.expected_version)
        return result, appended

    async def _names_of(
        self, stream_id: str, k: StreamKeys, commit: Commit, copy: StreamNames
    ) -> tuple[tuple[int, str], list[list[str]]] | None:
        """Bring ``copy`` up to the end of the stream's names log and refuse the names of
        ``commit`` already in it (DuplicateNames); where the log ends (entries, last id),
        and the names grouped for ``copy.add``.

        Only on top of the version the commit expects (else ConcurrentUpdate, as the
        script would answer: the engine reloads and applies the write again); None
        when the commit is already recorded (a retried call).
        """
        while True:
            async with self._guard():
                reply: Any = await self._names_since(
                    keys=[k.meta, k.names_ids, k.names_log],
                    args=[copy.chunks, copy.head, NAMES_ENTRIES],
                )
            head = tuple(None if v is None else bytes(v).decode() for v in reply[:3])
            if head[2] == commit.commit_id:
                return None
            self._expect(stream_id, commit, head)
            total, start = int(reply[3]), int(reply[4])
            if start < 0:
                # Not the log's first entries any more: read it from the start.
                self.names.garbage.append(copy.reset())
                continue
            ids, entries = reply[5], reply[6]
            if entries:
                size = sum(len(e) for e in entries) // 8
                await _off_loop(size, copy.take, ids, entries)
            if copy.chunks >= total:
                break
        names = list(commit.names)
        dups, groups = await _off_loop(len(names), copy.check, names)
        if dups:
            raise DuplicateNames(stream_id, dups)
        return (copy.chunks, copy.head), groups

    @staticmethod
    def _expect(stream_id: str, commit: Commit, head: tuple[str | None, ...]) -> None:
        """StreamNotFound or ConcurrentUpdate unless the stream is where ``commit`` expects."""
        version, incarnation, last = head[0], head[1], head[2] or ""
        if version is None:
            raise StreamNotFound(stream_id)
        if (
            incarnation != commit.incarnation
            or int(version) != commit.expected_version
            or last != commit.expected_commit
        ):
            raise ConcurrentUpdate(stream_id, commit.expected_version)


def _free(garbage: list[NameSet]) -> None:
    for names in garbage:
        names.free()


async def _off_loop(size: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``: in a thread when it handles more than INLINE_NAMES names."""
    if size > INLINE_NAMES:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


__all__ = ["NAMES_ENTRIES", "Commits"]
