"""Consuming a log: messages from Redis Streams applied to streams, exactly once in effect.

``messages.py`` reads a message into what it asks of a stream,
``applier.py`` applies a partition's messages through the engine's writes,
``redis_source.py`` consumes Redis Streams in a consumer group, and
``command.py`` is ``featurestream consume SOURCE`` and :func:`consume`.
"""

from __future__ import annotations

from featurestream.ingest.command import consume

__all__ = ["consume"]
