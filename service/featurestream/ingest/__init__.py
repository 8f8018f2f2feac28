"""Consuming a log: messages from Redis, NATS or Kafka applied exactly once in effect.

``messages.py`` reads a message into what it asks of a stream,
``applier.py`` applies a partition's messages through the engine's writes,
``redis_source.py`` consumes Redis Streams in a consumer group,
``nats_source.py`` a NATS JetStream durable consumer, ``kafka_source.py`` a
Kafka consumer group, and
``command.py`` is ``featurestream consume SOURCE`` and :func:`consume`.
"""

from __future__ import annotations

from featurestream.ingest.command import consume

__all__ = ["consume"]
