"""Stream labels (``GET /v1/streams?label=k:v``) and ``ttl_seconds``: the stream and all
its keys expire after that long without a write; every write starts the time again.

Against ``featurestream serve`` child processes on the memory store and on real Redis.
"""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
import redis

from featurestream_client import Client
from featurestream_client.errors import InvalidInput, StreamNotFound
from tests.support import ServeProcess


def new_id() -> str:
    return f"l-{uuid.uuid4().hex[:12]}"


def test_labels_are_kept_and_filter_the_list(server: ServeProcess) -> None:
    with Client(server.url) as c:
        a = c.create_stream("saola", target=[0.0, 1.0, 0.0], labels={"team": "risk", "env": "dev"})
        b = c.create_stream("saola", target=[0.0, 1.0, 0.0], labels={"team": "risk"})
        other = c.create_stream(
            "ofs", feature_names=["x"], params={"num_features": 1}, labels={"team": "growth"}
        )
        assert a.refresh().labels == {"team": "risk", "env": "dev"}
        assert {s.id for s in c.streams({"team": "risk"})} == {a.id, b.id}
        assert {s.id for s in c.streams({"team": "risk", "env": "dev"})} == {a.id}
        assert {s.id for s in c.streams({"team": "growth"})} == {other.id}
        assert c.streams({"team": "nobody"}) == []
    answer = httpx.get(f"{server.url}/v1/streams", params={"label": "no-colon"})
    assert answer.status_code == 422 and answer.json()["errors"][0]["field"] == "label"
    nested = {"algorithm": "saola", "target": [0, 1], "labels": {"k": {"deep": "x"}}}
    answer = httpx.post(f"{server.url}/v1/streams", json=nested)
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "labels.k"


def test_a_stream_expires_after_its_ttl_without_a_write(server: ServeProcess) -> None:
    with Client(server.url) as c:
        stream = c.create_stream("saola", target=[0.0, 1.0, 0.0, 1.0], ttl_seconds=1.5)
        forever = c.create_stream("saola", target=[0.0, 1.0, 0.0, 1.0])
        assert stream.refresh().ttl_seconds == 1.5
        for i in range(3):  # writes keep it alive past its ttl
            time.sleep(0.8)
            stream.add_features([[0.0], [1.0], [0.5], [1.5]], [f"f{i}"])
        assert c.get_stream(stream.id).refresh().version == 3
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if stream.id not in {s.id for s in c.streams()}:
                break
            time.sleep(0.2)
        with pytest.raises(StreamNotFound):
            c.get_stream(stream.id)
        assert forever.refresh().ttl_seconds is None
        assert forever.id in {s.id for s in c.streams()}
        with pytest.raises(InvalidInput):
            c.create_stream("saola", target=[0.0, 1.0], ttl_seconds=0)


@pytest.mark.redis
def test_every_redis_key_of_a_stream_expires(redis_url: str, key_prefix: str) -> None:
    proc = ServeProcess(redis_url, prefix=key_prefix).start()
    r = redis.Redis.from_url(redis_url)
    try:
        with Client(proc.url) as c:
            stream = c.create_stream("saola", target=[0.0, 1.0, 0.0, 1.0], ttl_seconds=60)
            stream.add_features([[0.0], [1.0], [0.5], [1.5]], ["a"])
            keys = r.keys(f"{key_prefix}:{{{stream.id}}}:*")
            assert len(keys) >= 5
            ttls = [r.pttl(k) for k in keys]
            assert all(0 < t <= 60_000 for t in ttls), dict(zip(keys, ttls, strict=True))
            plain = c.create_stream("saola", target=[0.0, 1.0, 0.0, 1.0])
            plain.add_features([[0.0], [1.0], [0.5], [1.5]], ["a"])
            assert all(r.pttl(k) == -1 for k in r.keys(f"{key_prefix}:{{{plain.id}}}:*"))
    finally:
        proc.kill()
        r.close()
