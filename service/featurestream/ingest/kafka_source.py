"""Consuming Kafka: ``kafka://host:port[,host:port]/TOPIC?group=G`` (confluent-kafka).

Each partition of the topic is a producer, ``kafka:<topic>:<partition>``, and
a record's position is its offset plus one (positions start at 1). The
record key is the stream id, the headers ``kind``, ``content-type`` and
``create``, the value the body. The consumer group owns partitions (one
consumer at a time each, handed over by the group's rebalances); offsets are
committed after the engine committed the records, never automatically. A
consumer that lost a partition in a rebalance while applying it applies what
it holds in the partition's order, as the new owner does from the last
committed offset: whichever comes second finds each record applied (a
replay), so nothing is applied twice or out of order.

A refused record is produced to the dead-letter topic (``dead=``; default
``<topic>.dead``) with its key, headers, ``problem`` and ``position`` before
its offset is committed (a consumer killed between the two produces that dead
letter again on the next delivery).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio

from featurestream.engine import wire
from featurestream.errors import InvalidInput, StoreUnavailable
from featurestream.ingest.applier import Applier, Dead, Outcome, Retry
from featurestream.ingest.messages import Message
from featurestream.ingest.stats import ConsumerStats

log = logging.getLogger("featurestream.ingest")

SCHEME = "kafka"


@dataclass(frozen=True)
class KafkaSource:
    """A parsed ``kafka://`` source."""

    servers: str  # host:port[,host:port]
    topic: str
    group: str
    dead: str
    count: int = 100
    block: float = 1.0


def parse(url: str) -> KafkaSource:
    """The source ``url`` names, or InvalidInput.

    >>> s = parse("kafka://a:9092,b:9092/orders?group=fs")
    >>> s.servers, s.topic, s.group, s.dead
    ('a:9092,b:9092', 'orders', 'fs', 'orders.dead')
    """
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    topic = parts.path.strip("/")
    group = query.pop("group", [""])[-1]
    if parts.scheme != SCHEME or not parts.netloc or not topic or "/" in topic or not group:
        raise InvalidInput(f"A Kafka source is kafka://host:port/TOPIC?group=G; got {url!r}.")
    try:
        count = int(query.pop("count", ["100"])[-1])
        block = float(query.pop("block", ["1"])[-1])
    except ValueError:
        raise InvalidInput(f"count and block must be numbers in {url!r}.") from None
    if count < 1 or not block > 0:
        raise InvalidInput(f"count must be >= 1 and block > 0 in {url!r}.")
    source = KafkaSource(
        parts.netloc, topic, group, query.pop("dead", [f"{topic}.dead"])[-1], count, block
    )
    if query:
        raise InvalidInput(f"Unknown option(s) {', '.join(sorted(query))} in {url!r}.")
    return source


def message_of(record: Any) -> Message:
    """The message of a Kafka record (its position: offset + 1)."""
    headers = {k: v for k, v in record.headers() or [] if v is not None}

    def text(name: str) -> str | None:
        raw = headers.get(name)
        return None if raw is None else raw.decode(errors="replace")

    key = record.key()
    return Message(
        partition=f"kafka:{record.topic()}:{record.partition()}",
        position=record.offset() + 1,
        ref=f"{record.partition()}:{record.offset()}",
        stream=None if key is None else key.decode(errors="replace"),
        kind=text("kind"),
        content_type=text("content-type"),
        body=record.value() or b"",
        create=headers.get("create"),
    )


class KafkaConsumer:
    """One member of a consumer group (see the module docstring)."""

    def __init__(
        self, source: KafkaSource, applier: Applier, *, name: str, stats: ConsumerStats
    ) -> None:
        from confluent_kafka import Consumer, Producer

        self.source = source
        self.applier = applier
        self.name = name
        self.stats = stats
        self._consumer = Consumer(
            {
                "bootstrap.servers": source.servers,
                "group.id": source.group,
                "client.id": name,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "logger": logging.getLogger("featurestream.ingest.kafka"),
            }
        )
        self._producer = Producer({"bootstrap.servers": source.servers, "client.id": name})
        self._held: list[Any] = []

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set; then leave the group."""
        self._consumer.subscribe([self.source.topic])
        pause = 0.05
        try:
            while not stop.is_set():
                try:
                    if not self._held:
                        self._held = await anyio.to_thread.run_sync(self._poll)
                    if self._held:
                        # Held until settled: a batch that failed is tried again first.
                        await self._settle(self._held)
                        self._held = []
                    pause = 0.05
                except (StoreUnavailable, Retry) as exc:
                    self.stats.pauses += 1
                    log.warning("consumer %s paused: %s", self.name, exc)
                    with suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), pause)
                    pause = min(pause * 2, 2.0)
        finally:
            await anyio.to_thread.run_sync(self._consumer.close)

    def _poll(self) -> list[Any]:
        records = self._consumer.consume(self.source.count, self.source.block)
        good = []
        for r in records:
            if r.error() is not None:
                log.warning("consumer %s: %s", self.name, r.error())
                continue
            good.append(r)
        return good

    async def _settle(self, records: list[Any]) -> None:
        outcomes: list[Outcome] = await self.applier.apply([message_of(r) for r in records])
        for r, outcome in zip(records, outcomes, strict=True):
            if isinstance(outcome, Dead):
                problem = json.dumps(wire.problem(outcome.problem), separators=(",", ":"))
                headers = [*(r.headers() or []), ("problem", problem.encode())]
                headers.append(("position", f"{r.partition()}:{r.offset()}".encode()))
                self._producer.produce(
                    self.source.dead, value=r.value(), key=r.key(), headers=headers
                )
        if any(isinstance(o, Dead) for o in outcomes):
            await anyio.to_thread.run_sync(self._producer.flush, 30.0)
        offsets = _next_offsets(records)
        try:
            await anyio.to_thread.run_sync(
                lambda: self._consumer.commit(offsets=offsets, asynchronous=False)
            )
        except Exception as exc:
            # Revoked meanwhile: the new owner delivers them again, as replays.
            log.warning("consumer %s: offsets not committed: %s", self.name, exc)
        self.stats.count(outcomes)


def _next_offsets(records: Iterable[Any]) -> list[Any]:
    """The offsets to commit after ``records``: the next one of each partition."""
    from confluent_kafka import TopicPartition

    last: dict[tuple[str, int], int] = {}
    for r in records:
        last[(r.topic(), r.partition())] = r.offset() + 1
    return [TopicPartition(t, p, o) for (t, p), o in last.items()]


__all__ = ["SCHEME", "KafkaConsumer", "KafkaSource", "message_of", "parse"]
