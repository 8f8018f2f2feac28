"""``featurestream consume kafka://...`` on librdkafka's mock cluster: consumers join and leave.

The test process starts the mock cluster (a producer with
``test.mock.num.brokers=3``; topics auto-create with 4 partitions) and hands
its brokers' addresses to ``featurestream consume`` processes. Consumers
joining and leaving the group move partitions between them mid-stream;
every record is applied exactly once, every stream ends with the bytes of
the same messages written over HTTP in the same order, and hostile records
all end in the dead-letter topic.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid

import pytest
import redis

from featurestream.store.keys import stream_keys
from tests.service.ingest_support import (
    Sent,
    batch_seqs,
    consumer,
    messages,
    procs,
    reference,
    started,
)

kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.redis, pytest.mark.timeout(240)]

__all__ = ["procs"]  # a fixture


def produce(producer: kafka.Producer, topic: str, sent: list[Sent]) -> None:
    def delivered(s: Sent) -> object:
        def report(err: object, record: kafka.Message) -> None:
            assert err is None, err
            s.key = str(record.partition())
            s.position = record.offset() + 1

        return report

    for s in sent:
        fields = dict(s.fields)
        body, stream = fields.pop("body"), fields.pop("stream")
        headers = [(k, v.encode()) for k, v in fields.items()]
        value = body if isinstance(body, bytes) else body.encode()
        # Keyed by the stream's own id, so that hostile records land beside its others.
        producer.produce(
            topic, value=value, key=s.stream.encode(), headers=headers, on_delivery=delivered(s)
        )
        if stream != s.stream:
            s.fields["unknown"] = stream
    assert producer.flush(30) == 0


def committed(servers: str, topic: str, group: str) -> dict[int, int]:
    """The group's committed offset of each partition (0 when none yet)."""
    c = kafka.Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        parts = c.committed([kafka.TopicPartition(topic, p) for p in range(4)], timeout=10)
    finally:
        c.close()
    return {tp.partition: max(tp.offset, 0) for tp in parts}


def wait_for(servers: str, topic: str, at_least: int, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 120
    while sum(committed(servers, topic, "g").values()) < at_least:
        assert time.monotonic() < deadline, committed(servers, topic, "g")
        assert all(p.poll() is None for p in procs), "a consumer exited"
        time.sleep(0.3)


@pytest.mark.slow
def test_consumers_joining_and_leaving_apply_every_record_once(
    redis_url: str, key_prefix: str, procs: list[subprocess.Popen[bytes]]
) -> None:
    mock = kafka.Producer({"test.mock.num.brokers": 3})
    topic = f"t{uuid.uuid4().hex[:8]}"
    mock.produce(topic, value=b"", key=b"warm")  # creates the topic (4 partitions)
    assert mock.flush(10) == 0
    md = mock.list_topics(timeout=10)
    servers = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    assert len(md.topics[topic].partitions) == 4
    # The warm-up record is a message without a stream kind: dead-lettered like any.
    sent = messages(streams=6, count=120, seed=13)
    produce(mock, topic, sent[:60])
    source = f"kafka://{servers}/{topic}?group=g&count=10"
    procs.append(consumer(redis_url, key_prefix, source, "a"))
    wait_for(servers, topic, 10, procs)
    procs.append(consumer(redis_url, key_prefix, source, "b"))  # joins: a rebalance
    produce(mock, topic, sent[60:])
    wait_for(servers, topic, 50, procs)
    procs.append(consumer(redis_url, key_prefix, source, "c"))  # joins
    time.sleep(1)
    started(procs[0])
    procs[0].send_signal(signal.SIGTERM)  # leaves mid-stream
    assert procs[0].wait(30) == 0
    wait_for(servers, topic, len(sent) + 1, procs[1:])
    for p in procs[1:]:
        started(p)
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0
    r = redis.Redis.from_url(redis_url)
    good = {s.stream for s in sent if not s.hostile}
    for sid in good:
        seqs = batch_seqs(r.xrange(stream_keys(key_prefix, sid).events))
        wanted = [s.position for s in sent if s.stream == sid and not s.hostile]
        assert seqs == wanted, sid
    # The dead letters: every hostile record (and the warm-up one), with its problem.
    reader = kafka.Consumer(
        {"bootstrap.servers": servers, "group.id": "dead", "auto.offset.reset": "earliest"}
    )
    reader.subscribe([f"{topic}.dead"])
    dead: list[dict[str, bytes]] = []
    deadline = time.monotonic() + 30
    hostile = sum(s.hostile for s in sent) + 1
    while len(dead) < hostile and time.monotonic() < deadline:
        record = reader.poll(0.5)
        if record is not None and record.error() is None:
            dead.append(dict(record.headers() or []))
    reader.close()
    assert len(dead) == hostile
    wanted_dead = {f"{s.key}:{s.position - 1}".encode() for s in sent if s.hostile}
    assert wanted_dead <= {h["position"] for h in dead}
    for h in dead:
        assert json.loads(h["problem"])["status"] in (404, 422), h
    ref = reference(redis_url, sent)
    for sid in good:
        mine = r.get(stream_keys(key_prefix, sid).state)
        assert mine is not None and mine == r.get(stream_keys(ref, sid).state), sid
