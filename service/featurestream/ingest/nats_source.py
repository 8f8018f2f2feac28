"""Consuming NATS JetStream: ``nats://host:port/STREAM?consumer=C``.

The JetStream stream is one partition, its producer ``nats:<stream>``, and a
message's position is its stream sequence. The group is a durable pull
consumer ``C`` (explicit acknowledgements, ``ack_wait`` = the claim timeout):
a message is acknowledged after the engine committed it, and one left
unacknowledged by a consumer that died is delivered again once its
``ack_wait`` passed.

Partition order is what makes a stream's state the same as over HTTP, so at
most one process fetches for the group at a time, holding a lease (a key of a
JetStream key-value bucket whose entries expire after the claim timeout,
renewed while held). A process that takes the lease over waits one
``ack_wait`` first, so the messages its predecessor left are delivered again
(JetStream delivers those before newer ones) before anything newer.

A refused message is published to the dead-letter subject (``dead=``;
default ``<stream>.dead``, kept by the stream ``<stream>-dead`` made for it
when no stream keeps the subject) with its headers, ``Problem`` (the
problem document) and ``Position``, de-duplicated by its position, then
acknowledged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from featurestream.api.problems import problem_of
from featurestream.engine import wire
from featurestream.errors import InvalidInput, StoreUnavailable
from featurestream.ingest.applier import Applier, Dead, Retry
from featurestream.ingest.messages import Message
from featurestream.ingest.stats import ConsumerStats

log = logging.getLogger("featurestream.ingest")

SCHEME = "nats"


@dataclass(frozen=True)
class NatsSource:
    """A parsed ``nats://`` source."""

    servers: str  # nats://host:port
    stream: str
    consumer: str
    dead: str
    claim_after: float = 30.0
    count: int = 100
    block: float = 1.0


def parse(url: str) -> NatsSource:
    """The source ``url`` names, or InvalidInput.

    >>> s = parse("nats://127.0.0.1:4222/orders?consumer=fs&claim=5")
    >>> s.servers, s.stream, s.consumer, s.dead, s.claim_after
    ('nats://127.0.0.1:4222', 'orders', 'fs', 'orders.dead', 5.0)
    """
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    stream = parts.path.strip("/")
    consumer = query.pop("consumer", [""])[-1]
    if parts.scheme != SCHEME or not stream or "/" in stream or not consumer:
        raise InvalidInput(f"A NATS source is nats://host:port/STREAM?consumer=C; got {url!r}.")

    def number(name: str, default: float) -> float:
        raw = query.pop(name, [str(default)])[-1]
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise InvalidInput(f"{name} must be a positive number; got {raw!r}.", field=name)
        return value

    source = NatsSource(
        servers=f"nats://{parts.netloc}",
        stream=stream,
        consumer=consumer,
        dead=query.pop("dead", [f"{stream}.dead"])[-1],
        claim_after=number("claim", 30.0),
        count=int(number("count", 100)),
        block=number("block", 1.0),
    )
    if query:
        raise InvalidInput(f"Unknown option(s) {', '.join(sorted(query))} in {url!r}.")
    return source


def message_of(stream: str, msg: Any) -> Message:
    """The message of a JetStream message (its position: the stream sequence)."""
    headers = msg.headers or {}
    return Message(
        partition=f"nats:{stream}",
        position=int(msg.metadata.sequence.stream),
        ref=str(msg.metadata.sequence.stream),
        stream=headers.get("stream"),
        kind=headers.get("kind"),
        content_type=headers.get("content-type"),
        body=bytes(msg.data),
        create=headers["create"].encode() if "create" in headers else None,
    )


class NatsConsumer:
    """One process of a durable consumer (see the module docstring)."""

    def __init__(
        self, source: NatsSource, applier: Applier, *, name: str, stats: ConsumerStats
    ) -> None:
        self.source = source
        self.applier = applier
        self.name = name
        self.stats = stats
        self._revision: int | None = None
        self._ready_at = 0.0
        self._held: list[Any] = []

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set; then give the lease back."""
        import nats
        from nats.js import api

        nc = await nats.connect(servers=[self.source.servers], max_reconnect_attempts=-1)
        try:
            js = nc.jetstream()
            try:
                await js.consumer_info(self.source.stream, self.source.consumer)
            except nats.js.errors.NotFoundError:
                await js.add_consumer(
                    self.source.stream,
                    api.ConsumerConfig(
                        durable_name=self.source.consumer,
                        ack_policy=api.AckPolicy.EXPLICIT,
                        ack_wait=self.source.claim_after,
                        max_ack_pending=self.source.count,
                    ),
                )
            await self._dead_stream(js)
            bucket = f"fs-lease-{self.source.stream}-{self.source.consumer}"
            kv = await js.create_key_value(
                api.KeyValueConfig(bucket=bucket.replace(".", "_"), ttl=self.source.claim_after)
            )
            sub = await js.pull_subscribe_bind(
                durable=self.source.consumer, stream=self.source.stream
            )
            renewing = asyncio.get_running_loop().create_task(self._renew(kv, stop))
            try:
                await self._loop(js, kv, sub, stop)
            finally:
                renewing.cancel()
                with suppress(asyncio.CancelledError):
                    await renewing
                if self._revision is not None:
                    with suppress(Exception):
                        await kv.delete("lease", last=self._revision)
        finally:
            with suppress(Exception):
                await nc.close()

    async def _dead_stream(self, js: Any) -> None:
        import nats

        try:
            await js.find_stream_name_by_subject(self.source.dead)
        except nats.js.errors.NotFoundError:
            with suppress(nats.js.errors.BadRequestError):
                await js.add_stream(name=f"{self.source.stream}-dead", subjects=[self.source.dead])

    async def _loop(self, js: Any, kv: Any, sub: Any, stop: asyncio.Event) -> None:
        import nats

        pause = 0.05
        while not stop.is_set():
            try:
                if not await self._hold(kv):
                    await asyncio.sleep(min(self.source.claim_after / 3, 1.0))
                    continue
                wait = self._ready_at - time.monotonic()
                if wait > 0:
                    # Taken over: what the last holder left comes again first, after ack_wait.
                    await asyncio.sleep(min(wait, 0.5))
                    continue
                if not self._held:
                    try:
                        self._held = await sub.fetch(self.source.count, timeout=self.source.block)
                    except nats.errors.TimeoutError:
                        continue
                # Held until settled: a batch that failed is tried again before anything newer.
                await self._settle(js, kv, self._held)
                self._held = []
                pause = 0.05
            except (StoreUnavailable, Retry, nats.errors.Error, OSError) as exc:
                # Nothing acknowledged: delivered again after ack_wait.
                self.stats.pauses += 1
                log.warning("consumer %s paused: %s", self.name, exc)
                with suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)
                pause = min(pause * 2, 2.0)

    async def _hold(self, kv: Any) -> bool:
        """Whether this process holds the lease (renewing it, or taking a free one)."""
        import nats

        try:
            if self._revision is not None:
                self._revision = await kv.update("lease", self.name.encode(), last=self._revision)
                return True
            self._revision = await kv.create("lease", self.name.encode())
            self._ready_at = time.monotonic() + self.source.claim_after
            return True
        except nats.js.errors.KeyWrongLastSequenceError:
            self._revision = None
            return False

    async def _renew(self, kv: Any, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(self.source.claim_after / 3)
            with suppress(Exception):
                if self._revision is not None:
                    await self._hold(kv)

    async def _settle(self, js: Any, kv: Any, msgs: list[Any]) -> None:
        msgs = sorted(msgs, key=lambda m: m.metadata.sequence.stream)
        if not await self._hold(kv):
            return  # the lease is lost: the messages come again to its holder
        for m in msgs:
            await m.in_progress()  # tried again: not delivered elsewhere meanwhile
        read: list[Message | Dead] = []
        for m in msgs:
            try:
                read.append(message_of(self.source.stream, m))
            except (InvalidInput, ValueError, UnicodeDecodeError) as exc:
                error = exc if isinstance(exc, InvalidInput) else InvalidInput(str(exc))
                read.append(Dead(problem_of(error)))
        applied = iter(await self.applier.apply([m for m in read if isinstance(m, Message)]))
        settled = [m if isinstance(m, Dead) else next(applied) for m in read]
        for m, outcome in zip(msgs, settled, strict=True):
            if isinstance(outcome, Dead):
                seq = m.metadata.sequence.stream
                problem = json.dumps(wire.problem(outcome.problem), separators=(",", ":"))
                headers = {
                    **(m.headers or {}),
                    "Problem": problem,
                    "Position": str(seq),
                    "Source": self.source.stream,
                    # A dead letter published again (the ack was lost) is dropped as a copy.
                    "Nats-Msg-Id": f"{self.source.stream}:{seq}",
                }
                await js.publish(self.source.dead, m.data, headers=headers)
            await m.ack()
        self.stats.count(settled)


__all__ = ["SCHEME", "NatsConsumer", "NatsSource", "message_of", "parse"]
