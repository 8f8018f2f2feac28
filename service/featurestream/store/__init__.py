"""State stores: the StateStore protocol and its in-memory and Redis implementations."""

from __future__ import annotations

from featurestream.config import Settings
from featurestream.store.base import (
    RESYNC,
    Commit,
    EventEntry,
    StateStore,
    StreamHead,
    StreamRecord,
    StreamSummary,
    Subscription,
)


def open_store(settings: Settings) -> StateStore:
    """Build the store named by ``settings.store_url`` (not yet opened)."""
    # Imported here: a memory-only process never loads the Redis client.
    if settings.store_kind == "memory":
        from featurestream.store.memory import InMemoryStore

        return InMemoryStore(
            replay_window=settings.replay_window,
            replay_bytes=settings.replay_bytes,
            event_retention=settings.event_retention,
        )
    from featurestream.store.redis import RedisStore

    return RedisStore.from_settings(settings)


__all__ = [
    "RESYNC",
    "Commit",
    "EventEntry",
    "StateStore",
    "StreamHead",
    "StreamRecord",
    "StreamSummary",
    "Subscription",
    "open_store",
]
