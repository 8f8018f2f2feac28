"""How far a consumer group is behind its log, per partition, as the log itself says.

* Redis Streams: ``XINFO GROUPS`` of each key: the group's ``lag`` (entries
  not yet delivered to the group) and ``pending`` (delivered, not acknowledged).
* NATS JetStream: the durable consumer's info: ``num_pending`` (not yet
  delivered) and ``num_ack_pending`` (delivered, not acknowledged).
* Kafka: each partition's high watermark minus the group's committed offset
  (from the low watermark when it has committed none); Kafka keeps no pending
  count (``None``).

``featurestream consume --status SOURCE`` prints it; a consumer's metrics
(``--metrics-port``) export it at each scrape.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import redis.asyncio as aioredis

from featurestream.errors import InvalidInput
from featurestream.ingest import kafka_source, nats_source, redis_source

# Seconds the log may take to answer one status read.
TIMEOUT = 10.0


@dataclass(frozen=True)
class PartitionLag:
    """One partition: messages the group has not been given yet (``lag``) and
    messages given but not acknowledged (``pending``); None where unknown."""

    partition: str
    lag: int | None
    pending: int | None


async def group_lag(source: str) -> list[PartitionLag]:
    """The lag of the group ``source`` names, per partition (InvalidInput when the
    group or its log does not exist; StoreUnavailable-like errors pass through)."""
    scheme = source.partition("://")[0]
    with anyio.fail_after(TIMEOUT):
        if scheme == nats_source.SCHEME:
            return await _nats(nats_source.parse(source))
        if scheme == kafka_source.SCHEME:
            return await anyio.to_thread.run_sync(_kafka, kafka_source.parse(source))
        return await _redis(redis_source.parse(source))


async def _redis(source: redis_source.RedisSource) -> list[PartitionLag]:
    client = aioredis.Redis.from_url(source.url)
    try:
        out = []
        for key in source.keys:
            try:
                groups = await client.xinfo_groups(key)
            except aioredis.ResponseError:
                raise InvalidInput(f"No Redis stream {key!r} at {source.url}.") from None
            found = [g for g in groups if _text(g.get("name")) == source.group]
            if not found:
                raise InvalidInput(f"Stream {key!r} has no consumer group {source.group!r}.")
            lag = found[0].get("lag")
            out.append(PartitionLag(f"redis:{key}", _int(lag), _int(found[0].get("pending"))))
        return out
    finally:
        await client.aclose()


async def _nats(source: nats_source.NatsSource) -> list[PartitionLag]:
    import nats

    nc = await nats.connect(servers=[source.servers], connect_timeout=5, max_reconnect_attempts=0)
    try:
        try:
            info = await nc.jetstream().consumer_info(source.stream, source.consumer)
        except nats.js.errors.NotFoundError:
            raise InvalidInput(
                f"NATS stream {source.stream!r} has no consumer {source.consumer!r}."
            ) from None
        return [
            PartitionLag(
                f"nats:{source.stream}", int(info.num_pending or 0), int(info.num_ack_pending or 0)
            )
        ]
    finally:
        await nc.close()


def _kafka(source: kafka_source.KafkaSource) -> list[PartitionLag]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": source.servers,
            "group.id": source.group,
            "enable.auto.commit": False,
        }
    )
    try:
        topic = c.list_topics(source.topic, timeout=TIMEOUT).topics.get(source.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            raise InvalidInput(f"No Kafka topic {source.topic!r} at {source.servers}.")
        parts = [TopicPartition(source.topic, p) for p in sorted(topic.partitions)]
        out = []
        for tp in c.committed(parts, timeout=TIMEOUT):
            low, high = c.get_watermark_offsets(tp, timeout=TIMEOUT)
            done = tp.offset if tp.offset >= 0 else low
            out.append(PartitionLag(f"kafka:{source.topic}:{tp.partition}", high - done, None))
        return out
    finally:
        c.close()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _int(value: object) -> int | None:
    return None if value is None else int(str(_text(value)))


__all__ = ["PartitionLag", "group_lag"]
