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

``commit`` is a compare-and-set on (incarnation, version): state, summary,
event entry, producer record and names are written together or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from featurestream.config import Settings


@dataclass(frozen=True)
class StreamRecord:
    """A stream as loaded for writing."""

    info: dict[str, Any]
    incarnation: str
    version: int
    blob: bytes
    producers: dict[str, int]


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
    the store answers with that commit's version instead of a conflict.
    """

    commit_id: str
    incarnation: str
    expected_version: int
    blob: bytes
    updated_at: str
    selection: bytes
    status: bytes
    events: bytes
    names: Sequence[str] = ()
    producer: str | None = None
    seq: int | None = None
    response: bytes = b""
    notify: bytes = b""  # published to the stream's channel when non-empty


@dataclass(frozen=True)
class EventEntry:
    """One commit's entry of the event log."""

    version: int
    payload: bytes


@dataclass
class StoreStats:
    commits: int = 0
    conflicts: int = 0
    extra: dict[str, int] = field(default_factory=dict)


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
    ) -> None:
        """Create a stream at version 0; raises StreamExists."""

    async def load(self, stream_id: str) -> StreamRecord:
        """Everything needed to write; raises StreamNotFound."""

    async def summary(self, stream_id: str) -> StreamSummary:
        """Info, version, selection and status; raises StreamNotFound."""

    async def commit(self, stream_id: str, commit: Commit) -> int:
        """Apply a state change; returns the new version.

        Raises ConcurrentUpdate when the stream's version or incarnation is not
        the expected one, StreamNotFound when it no longer exists.
        """

    async def events(self, stream_id: str, from_version: int, count: int) -> list[EventEntry]:
        """Up to ``count`` log entries with version >= from_version, in order."""

    async def stored_response(self, stream_id: str, producer: str, seq: int) -> bytes | None:
        """The response stored for (producer, seq), or None outside the window."""

    async def known_names(self, stream_id: str, names: Sequence[str]) -> list[str]:
        """The subset of names that the stream has already seen."""

    async def list_streams(self) -> list[StreamSummary]: ...

    async def delete(self, stream_id: str) -> bool:
        """Remove every key of the stream; False when it did not exist."""


def open_store(settings: Settings) -> StateStore:
    """Build the store named by ``settings.store_url`` (not yet opened)."""
    if settings.store_kind == "memory":
        from featurestream.store.memory import InMemoryStore

        return InMemoryStore(replay_window=settings.replay_window)
    from featurestream.store.redis import RedisStore

    return RedisStore.from_settings(settings)


__all__ = ["Commit", "EventEntry", "StateStore", "StreamRecord", "StreamSummary", "open_store"]
