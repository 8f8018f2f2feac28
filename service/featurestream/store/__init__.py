"""State stores: the StateStore protocol and its in-memory and Redis implementations."""

from __future__ import annotations

from featurestream.store.base import (
    Commit,
    EventEntry,
    StateStore,
    StreamRecord,
    StreamSummary,
    open_store,
)

__all__ = ["Commit", "EventEntry", "StateStore", "StreamRecord", "StreamSummary", "open_store"]
