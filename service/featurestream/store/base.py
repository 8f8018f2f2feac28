"""The StateStore protocol: what the engine needs from persistence.

A stream is stored as

* its *info*: the immutable stream resource (id, algorithm, params, kind, size,
  created_at) and an *incarnation* token that changes if the id is deleted and
  created again;
* its *state*: the encoded selector state (``codec.py``) and the version;
* a *summary*: the current selection and status as JSON, so reads of
  ``/selected`` and ``/status`` never decode the state;
* an *event log*: one entry per commit, holding that commit's events;
* the *producers*: last applied ``seq`` per producer and the stored responses
  of the last ``replay_window`` requests of each;
* the set of feature *names* already seen (duplicate names are rejected).

``commit`` is a compare-and-set on (incarnation, version, last commit id):
state, summary, event entry, producer record and names are written together
or not at all. The last commit id makes a rolled-back stream (a failover to a
replica that missed the last writes, a lost second of AOF, a restored backup)
refuse a writer whose copy holds a version the store lost, even once the
store has reached that version number again with other contents.
One commit may carry the responses of several consecutive requests of one
producer (a group commit of WebSocket frames), and may leave the state as it
is while still recording responses (frames that were refused use up their
``seq``).

``subscribe`` delivers the selection notifications that commits publish
(``Commit.notify``), whichever process committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class StreamRecord:
    """A stream as loaded for writing."""

    info: dict[str, Any]
    incarnation: str
    version: int
    blob: bytes
    producers: dict[str, int]
    commit_id: str = ""  # the last commit applied: the next commit's expected_commit
    # When each producer last wrote (ms, the committing process's clock); a log's
    # partitions have no entry (engine/producers.py).
    seen: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamHead:
    """What identifies the stream's current contents: a copy with the same head is current."""

    incarnation: str
    version: int
    commit_id: str


@dataclass(frozen=True)
class StreamSummary:
    """What reads need, without the state: info, version, selection and status JSON."""

    info: dict[str, Any]
    version: int
    updated_at: str
    selection: bytes
    status: bytes


@dataclass(frozen=True)
class Commit:
    """One atomic state change.

    ``commit_id`` makes the commit idempotent: if a retried call finds its own
    commit already applied (the first attempt landed but its reply was lost),
    the store answers with that commit's version instead of a conflict. It
    becomes the stream's last commit id (records-only commits included), which
    the next commit must name as ``expected_commit``.

    The producer's stored responses are ``responses``, (seq, response) pairs in
    ascending, consecutive seq order; the producer's last seq becomes the last
    of them. With
    ``state_changed`` false the commit writes only those producer records: the
    state, summary, version and event log stay as they are (the compare-and-set
    still applies) and nothing is published.
    """

    commit_id: str
    incarnation: str
    expected_version: int
    expected_commit: str  # the id of the last commit the writer's copy holds
    blob: bytes
    updated_at: str
    selection: bytes
    status: bytes
    events: bytes
    names: Sequence[str] = ()
    producer: str | None = None
    notify: bytes = b""  # published to the stream's channel when non-empty
    responses: Sequence[tuple[int, bytes]] = ()
    state_changed: bool = True
    # When ``producer`` wrote (ms; None: a log's partition, no time is recorded).
    seen_ms: int | None = None
    # Producers forgotten whole by this commit: seq, time and stored responses
    # (engine/producers.py; never ``producer``).
    drop_producers: Sequence[str] = ()

    def seq_responses(self) -> list[tuple[int, bytes]]:
        """The (seq, response) pairs to record for ``producer`` (empty without one)."""
        if self.producer is None:
            return []
        return [(int(q), r) for q, r in self.responses]


def ttl_ms(info: Mapping[str, Any]) -> int:
    """A stream's time to live in milliseconds (0: it never expires).

    A stream created with ``ttl_seconds`` expires, all its keys with it, after
    that long without a write: every commit starts the time again.
    """
    ttl = info.get("ttl_seconds")
    return 0 if ttl is None else max(1, round(float(ttl) * 1000))


class QuotaReached(Exception):
    """A create found its tenant holding ``quota`` streams already; nothing was written."""

    def __init__(self, tenant: str | None, quota: int) -> None:
        super().__init__(f"{tenant!r} holds {quota} streams")
        self.tenant = tenant
        self.quota = quota


@dataclass(frozen=True)
class EventEntry:
    """One commit's entry of the event log."""

    version: int
    payload: bytes


RESYNC = b""
"""Delivered to a subscription when notifications may have been lost (a reconnect,
an overflow): the listener should re-read the stream's summary."""


class Subscription:
    """The selection notifications of one stream, for one local listener.

    Notifications are snapshots of the selection, so a subscription keeps only
    the newest one not yet taken: a listener slower than the commits skips the
    versions in between, and one that never takes any holds one notification,
    never a backlog. The publisher never waits. A :data:`RESYNC` marker (the
    listener should re-read the current state) stays until it is taken.
    """

    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id
        self._next: bytes | None = None
        self._ready = asyncio.Event()
        self.closed = False

    def put(self, message: bytes) -> None:
        if self.closed or self._next == RESYNC:
            return
        self._next = message
        self._ready.set()

    async def get(self) -> bytes:
        """The newest notification (selection JSON) or :data:`RESYNC`."""
        while self._next is None:
            self._ready.clear()
            await self._ready.wait()
        message, self._next = self._next, None
        return message

    def pending(self) -> int:
        return 0 if self._next is None else 1


class Broadcaster:
    """Fans notifications out to this process's subscriptions, by key."""

    def __init__(self) -> None:
        self._subs: dict[str, set[Subscription]] = {}

    def add(self, key: str, sub: Subscription) -> bool:
        """Register ``sub``; True when it is the first one of ``key``."""
        subs = self._subs.setdefault(key, set())
        subs.add(sub)
        return len(subs) == 1

    def remove(self, key: str, sub: Subscription) -> bool:
        """Unregister ``sub``; True when ``key`` has no subscription left."""
        sub.closed = True
        subs = self._subs.get(key)
        if subs is None:
            return False
        subs.discard(sub)
        if subs:
            return False
        del self._subs[key]
        return True

    def publish(self, key: str, message: bytes) -> None:
        for sub in tuple(self._subs.get(key, ())):
            sub.put(message)

    def resync_all(self) -> None:
        for subs in tuple(self._subs.values()):
            for sub in tuple(subs):
                sub.put(RESYNC)

    def keys(self) -> list[str]:
        return list(self._subs)

    def count(self, key: str) -> int:
        return len(self._subs.get(key, ()))


class StateStore(Protocol):
    """Async persistence of streams; see the module docstring."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self) -> bool: ...

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
        """Create a stream at version 0 for ``tenant``; raises StreamExists.

        With a ``quota``, raises QuotaReached when the tenant already holds that
        many streams: the count and the create are one atomic step, so
        concurrent creates never exceed it.
        """

    async def load(self, stream_id: str) -> StreamRecord:
        """Everything needed to write; raises StreamNotFound."""

    async def summary(self, stream_id: str) -> StreamSummary:
        """Info, version, selection and status; raises StreamNotFound."""

    async def head(self, stream_id: str) -> StreamHead:
        """Incarnation, version and last commit id (one small read); raises StreamNotFound."""

    async def selection(self, stream_id: str) -> tuple[int, bytes]:
        """The version and the committed selection document, nothing else (one small
        read: ``GET /selected`` polls it many times a second); raises StreamNotFound."""

    async def commit(self, stream_id: str, commit: Commit) -> int:
        """Apply a state change; returns the new version.

        Raises ConcurrentUpdate when the stream's incarnation, version or last
        commit id is not the expected one, StreamNotFound when it no longer exists.
        """

    async def events(self, stream_id: str, from_version: int, count: int) -> list[EventEntry]:
        """Up to ``count`` log entries with version >= from_version, in order.

        Only the last ``event_retention`` entries are kept: the first one returned
        may be past ``from_version`` when older ones were trimmed.
        """

    async def stored_response(self, stream_id: str, producer: str, seq: int) -> bytes | None:
        """The response stored for (producer, seq), or None outside the window."""

    async def list_streams(self, tenant: str | None = None) -> list[StreamSummary]:
        """The streams of ``tenant`` (None: those created without one), by id.

        Reads that tenant's index and streams only, never another tenant's.
        """

    async def delete(self, stream_id: str) -> bool:
        """Remove every key of the stream; False when it did not exist."""

    def subscribe(self, stream_id: str) -> AbstractAsyncContextManager[Subscription]:
        """Receive the stream's selection notifications while the context is open.

        Once entered, every later commit's notification is delivered (raises
        StoreUnavailable when the subscription cannot be set up).
        """


__all__ = [
    "RESYNC",
    "Broadcaster",
    "Commit",
    "EventEntry",
    "QuotaReached",
    "StateStore",
    "StreamHead",
    "StreamRecord",
    "StreamSummary",
    "Subscription",
    "ttl_ms",
]
