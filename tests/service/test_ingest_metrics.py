"""A consumer's metrics and its group's status, against real Redis, a real NATS
JetStream and librdkafka's mock Kafka cluster.

``featurestream consume --metrics-port`` exports what the consumer applied,
replayed and dead-lettered and the group's lag per partition;
``featurestream consume --status`` prints that lag. Before, the runbook sent
operators to ``XINFO GROUPS``, ``nats consumer info`` and Kafka's scripts.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import suppress

import httpx
import pytest
import redis

from tests.service.ingest_support import Sent, consumer, messages, procs, started
from tests.support import free_port

pytestmark = [pytest.mark.redis, pytest.mark.timeout(180)]
__all__ = ["procs"]  # a fixture

NATS_URL = "nats://127.0.0.1:4222"


def status(source: str) -> tuple[int, dict | str]:
    exe = shutil.which("featurestream")
    cmd = [exe] if exe else [sys.executable, "-m", "featurestream"]
    done = subprocess.run(
        [*cmd, "consume", "--status", "--json", source],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode:
        return done.returncode, done.stderr
    return 0, json.loads(done.stdout)


def scrape(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=15).text
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def until(what: str, check: Callable[[], bool], procs: list, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        assert all(p.poll() is None for p in procs), "a consumer exited"
        time.sleep(0.3)


def stop(procs: list) -> None:
    for p in procs:
        started(p)
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0
    procs.clear()


def test_redis_consumer_metrics_and_status(
    redis_url: str, key_prefix: str, procs: list[subprocess.Popen[bytes]]
) -> None:
    r = redis.Redis.from_url(redis_url)
    keys = [f"{key_prefix}:log:{i}" for i in range(2)]
    source = f"{redis_url}?{'&'.join(f'key={k}' for k in keys)}&group=g".replace(
        "redis://", "redis-stream://"
    )
    sent = messages(streams=4, count=60, seed=21)
    for s in sent:
        r.xadd(keys[int(s.stream[1:]) % 2], s.fields)
    code, said = status(source)
    assert code == 2 and "has no consumer group 'g'" in str(said)
    port = free_port()
    procs.append(consumer(redis_url, key_prefix, source, "a", "--metrics-port", str(port)))
    good = sum(not s.hostile for s in sent)
    hostile = len(sent) - good

    def settled() -> bool:
        with suppress(httpx.HTTPError):
            m = scrape(port)
            return m["featurestream_consumer_applied_total"] + m[
                "featurestream_consumer_dead_total"
            ] >= len(sent)
        return False

    until("settled messages", settled, procs)
    m = scrape(port)
    assert m["featurestream_consumer_applied_total"] == good
    assert m["featurestream_consumer_dead_total"] == hostile >= 1
    assert m["featurestream_consumer_replayed_total"] == 0
    assert m["featurestream_consumer_lag_up"] == 1
    for k in keys:
        assert m[f'featurestream_consumer_lag{{partition="redis:{k}"}}'] == 0
    until(
        "no pending entries",
        lambda: all(
            scrape(port)[f'featurestream_consumer_pending{{partition="redis:{k}"}}'] == 0
            for k in keys
        ),
        procs,
    )
    # Messages published while nobody consumes are the group's lag.
    stop(procs)
    for s in messages(streams=4, count=7, seed=22, started={f"s{i}" for i in range(4)}):
        r.xadd(keys[0], s.fields)
    code, doc = status(source)
    assert code == 0 and isinstance(doc, dict)
    assert doc["partitions"] == [
        {"partition": f"redis:{keys[0]}", "lag": 7, "pending": 0},
        {"partition": f"redis:{keys[1]}", "lag": 0, "pending": 0},
    ]
    r.delete(*keys, *(f"{k}:dead" for k in keys))


@pytest.mark.slow
def test_nats_and_kafka_status_count_what_is_left(
    redis_url: str, key_prefix: str, procs: list[subprocess.Popen[bytes]]
) -> None:
    nats = pytest.importorskip("nats")
    kafka = pytest.importorskip("confluent_kafka")
    stream = f"lag{uuid.uuid4().hex[:8]}"
    sent = messages(streams=2, count=12, seed=23)

    async def publish(items: list[Sent]) -> None:
        nc = await nats.connect(NATS_URL)
        js = nc.jetstream()
        with suppress(Exception):
            await js.add_stream(name=stream, subjects=[f"{stream}.in"])
        for s in items:
            fields = dict(s.fields)
            body = fields.pop("body")
            await js.publish(
                f"{stream}.in", body if isinstance(body, bytes) else body.encode(), headers=fields
            )
        await nc.close()

    async def drop() -> None:
        nc = await nats.connect(NATS_URL)
        js = nc.jetstream()
        for name in (stream, f"{stream}-dead", f"KV_fs-lease-{stream}-fs"):
            with suppress(Exception):
                await js.delete_stream(name)
        await nc.close()

    try:
        asyncio.run(publish(sent))
        source = f"{NATS_URL}/{stream}?consumer=fs&claim=1"
        assert "has no consumer 'fs'" in str(status(source)[1])
        procs.append(consumer(redis_url, key_prefix, source, "n"))
        until(
            "an empty NATS backlog",
            lambda: (
                status(source)[1]
                == {"partitions": [{"partition": f"nats:{stream}", "lag": 0, "pending": 0}]}
            ),
            procs,
        )
        stop(procs)
        asyncio.run(publish(messages(streams=2, count=5, seed=24, started={"s0", "s1"})))
        assert status(source)[1] == {
            "partitions": [{"partition": f"nats:{stream}", "lag": 5, "pending": 0}]
        }
    finally:
        asyncio.run(drop())

    mock = kafka.Producer({"test.mock.num.brokers": 3})
    topic = f"t{uuid.uuid4().hex[:8]}"
    for i in range(9):
        mock.produce(topic, value=b"{}", key=f"k{i}".encode())
    assert mock.flush(10) == 0
    md = mock.list_topics(timeout=10)
    servers = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    source = f"kafka://{servers}/{topic}?group=g"
    code, doc = status(source)
    assert code == 0 and isinstance(doc, dict)
    assert len(doc["partitions"]) == 4
    assert sum(p["lag"] for p in doc["partitions"]) == 9
    assert all(p["pending"] is None for p in doc["partitions"])
    # Every record names no stream kind: all dead-lettered, and the lag goes to 0.
    port = free_port()
    procs.append(consumer(redis_url, key_prefix, source, "k", "--metrics-port", str(port)))

    def drained() -> bool:
        with suppress(httpx.HTTPError, KeyError):
            m = scrape(port)
            lags = [v for k, v in m.items() if k.startswith("featurestream_consumer_lag{")]
            return m["featurestream_consumer_dead_total"] == 9 and lags == [0.0] * 4
        return False

    until("a drained topic", drained, procs)
    stop(procs)
