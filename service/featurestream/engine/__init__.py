"""The stream engine: applies writes to streams kept in a state store.

``core.py`` holds :class:`StreamEngine`; ``transact.py`` the write
transaction it is built on (load, apply, compare-and-set commit, retry);
``cache.py`` the streams this process holds decoded; ``sequencing.py`` the
rule for a producer's seq; ``frames.py`` the group commit of WebSocket
frames; ``results.py`` the typed results; ``wire.py`` every document sent
to clients.
"""

from __future__ import annotations

from featurestream.engine.core import StreamEngine, new_stream_id, utcnow
from featurestream.engine.frames import Frame
from featurestream.engine.results import (
    AlgorithmInfo,
    EventPage,
    EventRecord,
    FeaturesWritten,
    FrameAck,
    FrameResult,
    FramesResult,
    InstancesWritten,
    Problem,
    Selection,
    StoredSelection,
    StreamResource,
    StreamStatus,
    WriteResult,
)
from featurestream.store.base import RESYNC, Subscription

__all__ = [
    "RESYNC",
    "AlgorithmInfo",
    "EventPage",
    "EventRecord",
    "FeaturesWritten",
    "Frame",
    "FrameAck",
    "FrameResult",
    "FramesResult",
    "InstancesWritten",
    "Problem",
    "Selection",
    "StoredSelection",
    "StreamEngine",
    "StreamResource",
    "StreamStatus",
    "Subscription",
    "WriteResult",
    "new_stream_id",
    "utcnow",
]
