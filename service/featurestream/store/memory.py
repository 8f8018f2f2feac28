"""The embedded store: streams in this process's memory.

For a zero-setup start, notebooks and single-process deployments. It keeps the
same version and atomicity rules as the Redis store: every method runs without
awaiting in its critical section, so on one event loop each call is atomic.
Selection notifications go to this process's subscribers through an
in-process broadcaster. Nothing survives the process.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from featurestream.errors import ConcurrentUpdate, DuplicateNames, StreamExists, StreamNotFound
from featurestream.store.base import (
    Broadcaster,
    Commit,
    EventEntry,
    QuotaReached,
    StreamHead,
    StreamRecord,
    StreamSummary,
    Subscription,
    ttl_ms,
)


@dataclass
class _Stream:
    info: dict[str, Any]
    incarnation: str
    version: int
    blob: bytes
    updated_at: str
    selection: bytes
    status: bytes
    events: list[EventEntry] = field(default_factory=list)
    producers: dict[str, int] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)  # producer -> ms of its last write
    # Stored responses, oldest first (the order the replay bytes bound drops them in).
    responses: OrderedDict[tuple[str, int], bytes] = field(default_factory=OrderedDict)
    response_bytes: int = 0
    names: set[str] = field(default_factory=set)
    last_commit: str = ""
    # A stream with a time to live expires at ``expires`` (the store's clock); each
    # commit sets it again.
    ttl: float | None = None
    expires: float = math.inf

    def store_response(self, key: tuple[str, int], response: bytes) -> None:
        self.drop_response(key)
        self.responses[key] = response
        self.response_bytes += len(response)

    def drop_response(self, key: tuple[str, int]) -> None:
        old = self.responses.pop(key, None)
        if old is not None:
            self.response_bytes -= len(old)


class InMemoryStore:
    """StateStore kept in a dict (see the module docstring)."""

    def __init__(
        self,
        *,
        replay_window: int = 1000,
        replay_bytes: int = 16 * 1024 * 1024,
        event_retention: int = 10_000,
    ) -> None:
        self._streams: dict[str, _Stream] = {}
        self._tenants: dict[str | None, set[str]] = {}  # each tenant's stream ids
        self._replay_window = replay_window
        self._replay_bytes = replay_bytes
        self._event_retention = event_retention
        self._broadcaster = Broadcaster()
        #: The clock of expiries (seconds, monotonic).
        self.clock: Callable[[], float] = time.monotonic

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def ping(self) -> bool:
        return True

    def _get(self, stream_id: str) -> _Stream:
        self._expire(stream_id)
        try:
            return self._streams[stream_id]
        except KeyError:
            raise StreamNotFound(stream_id) from None

    def _expire(self, stream_id: str) -> None:
        """Drop the stream if its time to live ran out (checked on every access)."""
        s = self._streams.get(stream_id)
        if s is not None and s.expires <= self.clock():
            del self._streams[stream_id]
            self._tenants.get(s.info.get("tenant"), set()).discard(stream_id)

    async def create(
        self,
        stream_id: str,
        info: dict[str, Any],
        incarnation: str,
        blob: bytes,
        created_at: str,
        selection: bytes,
        status: bytes,
        *,
        tenant: str | None = None,
        quota: int | None = None,
    ) -> None:
        self._expire(stream_id)
        if stream_id in self._streams:
            raise StreamExists(stream_id)
        owned = self._tenants.setdefault(tenant, set())
        for sid in list(owned):  # expired streams count for nothing
            self._expire(sid)
        if quota is not None and len(owned) >= quota:
            raise QuotaReached(tenant, quota)
        owned.add(stream_id)
        s = _Stream(dict(info), incarnation, 0, blob, created_at, selection, status)
        ttl = ttl_ms(info)
        if ttl:
            s.ttl = ttl / 1000
            s.expires = self.clock() + s.ttl
        self._streams[stream_id] = s

    async def load(self, stream_id: str) -> StreamRecord:
        s = self._get(stream_id)
        return StreamRecord(
            dict(s.info),
            s.incarnation,
            s.version,
            s.blob,
            dict(s.producers),
            s.last_commit,
            seen=dict(s.seen),
        )

    async def head(self, stream_id: str) -> StreamHead:
        s = self._get(stream_id)
        return StreamHead(s.incarnation, s.version, s.last_commit)

    async def selection(self, stream_id: str) -> tuple[int, bytes]:
        s = self._get(stream_id)
        return s.version, s.selection

    async def summary(self, stream_id: str) -> StreamSummary:
        s = self._get(stream_id)
        return StreamSummary(dict(s.info), s.version, s.updated_at, s.selection, s.status)

    async def commit(self, stream_id: str, commit: Commit) -> int:
        s = self._get(stream_id)
        if s.incarnation == commit.incarnation and s.last_commit == commit.commit_id:
            return s.version
        if (
            s.incarnation != commit.incarnation
            or s.version != commit.expected_version
            or s.last_commit != commit.expected_commit
        ):
            raise ConcurrentUpdate(stream_id, commit.expected_version)
        pairs = commit.seq_responses()
        if commit.state_changed:
            dups = [n for n in commit.names if n in s.names]
            if dups:
                raise DuplicateNames(stream_id, dups[:5])
            s.version += 1
            s.blob = commit.blob
            s.updated_at = commit.updated_at
            s.selection = commit.selection
            s.status = commit.status
            s.events.append(EventEntry(s.version, commit.events))
            del s.events[: -self._event_retention]
            s.names.update(commit.names)
        s.last_commit = commit.commit_id
        if s.ttl is not None:
            s.expires = self.clock() + s.ttl
        for gone in commit.drop_producers:
            seq = s.producers.pop(gone, 0)
            s.seen.pop(gone, None)
            # Its stored responses are its latest seqs, consecutive: walk down to the
            # first one not stored (the work is what is stored, not the window).
            stop = max(1, seq - self._replay_window + 1)
            while seq >= stop and (gone, seq) in s.responses:
                s.drop_response((gone, seq))
                seq -= 1
        if commit.producer is not None and pairs:
            if commit.seen_ms is not None:
                s.seen[commit.producer] = commit.seen_ms
            for seq, response in pairs:
                s.store_response((commit.producer, seq), response)
                s.drop_response((commit.producer, seq - self._replay_window))
            # Over the bytes bound, the oldest go first (never this commit's).
            while s.response_bytes > self._replay_bytes and len(s.responses) > len(pairs):
                s.drop_response(next(iter(s.responses)))
            s.producers[commit.producer] = pairs[-1][0]
        if commit.state_changed and commit.notify:
            self._broadcaster.publish(stream_id, commit.notify)
        return s.version

    async def events(self, stream_id: str, from_version: int, count: int) -> list[EventEntry]:
        s = self._get(stream_id)
        # Versions are consecutive, so entry v sits at index v - first.
        first = s.events[0].version if s.events else 1
        start = max(0, from_version - first)
        return s.events[start : start + count]

    async def stored_response(self, stream_id: str, producer: str, seq: int) -> bytes | None:
        return self._get(stream_id).responses.get((producer, seq))

    async def list_streams(self, tenant: str | None = None) -> list[StreamSummary]:
        for k in list(self._tenants.get(tenant, ())):
            self._expire(k)
        return [await self.summary(k) for k in sorted(self._tenants.get(tenant, ()))]

    async def delete(self, stream_id: str) -> bool:
        self._expire(stream_id)
        s = self._streams.pop(stream_id, None)
        if s is None:
            return False
        self._tenants.get(s.info.get("tenant"), set()).discard(stream_id)
        return True

    @asynccontextmanager
    async def subscribe(self, stream_id: str) -> AsyncIterator[Subscription]:
        sub = Subscription(stream_id)
        self._broadcaster.add(stream_id, sub)
        try:
            yield sub
        finally:
            self._broadcaster.remove(stream_id, sub)

    def subscribers(self, stream_id: str) -> int:
        """Local subscriptions of a stream (for tests and metrics)."""
        return self._broadcaster.count(stream_id)


__all__ = ["InMemoryStore"]
