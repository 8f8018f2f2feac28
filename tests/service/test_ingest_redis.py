"""``featurestream consume`` on Redis Streams: consumer processes killed and restarted.

Every message is applied exactly once (each stream's batch events against the
messages' positions), every stream ends with the bytes of the same messages
written over HTTP in the same order, the entries killed consumers left
pending are claimed, and hostile messages all end in the dead letters.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from typing import Any

import pytest
import redis

from featurestream.ingest.redis_source import position
from featurestream.store.keys import stream_keys
from tests.conftest import RedisServer
from tests.service.ingest_support import (
    Sent,
    batch_seqs,
    consumer,
    messages,
    procs,
    reference,
    started,
)
from tests.support import free_port

pytestmark = [pytest.mark.redis, pytest.mark.timeout(240)]

GROUP = "g"
__all__ = ["procs"]  # a fixture


def publish(
    r: redis.Redis,
    keys: list[str],
    streams: int,
    count: int,
    seed: int,
    started: set[str] | None = None,
) -> list[Sent]:
    """The messages of :func:`messages`, each stream's on one of ``keys``."""
    sent = messages(streams, count, seed, started)
    for s in sent:
        s.key = keys[int(s.stream[1:]) % len(keys)]
        s.ref = r.xadd(s.key, s.fields).decode()
        s.position = position(s.ref)
    return sent


def source_url(redis_url: str, keys: list[str], **options: Any) -> str:
    query = "&".join([f"key={k}" for k in keys] + [f"group={GROUP}"])
    query += "".join(f"&{k}={v}" for k, v in options.items())
    return redis_url.replace("redis://", "redis-stream://", 1) + "?" + query


def drained(r: redis.Redis, keys: list[str]) -> bool:
    for key in keys:
        groups = {g["name"].decode(): g for g in r.xinfo_groups(key)}
        g = groups.get(GROUP)
        if g is None or g["pending"] or g["lag"]:
            return False
    return True


@pytest.mark.slow
def test_killed_consumers_apply_every_message_exactly_once(
    redis_url: str, key_prefix: str, procs: list[subprocess.Popen[bytes]]
) -> None:
    r = redis.Redis.from_url(redis_url)
    keys = [f"{key_prefix}:log:{i}" for i in range(2)]
    sent = publish(r, keys, streams=6, count=200, seed=7)
    source = source_url(redis_url, keys, claim=1, count=16)
    names = [f"c{i}" for i in range(3)]
    for name in names:
        procs.append(consumer(redis_url, key_prefix, source, name))
    rng = random.Random(3)
    for k in range(3):
        time.sleep(rng.uniform(0.3, 1.0))
        i = rng.randrange(3)
        procs[i].send_signal(signal.SIGKILL)
        procs[i].wait(10)
        # Half come back under their own name (their pending entries are theirs again),
        # half under a new one (theirs are claimed by whoever holds the key).
        names[i] = names[i] if k % 2 else f"{names[i]}-{k}"
        procs[i] = consumer(redis_url, key_prefix, source, names[i])
    deadline = time.monotonic() + 90
    while not drained(r, keys):
        assert time.monotonic() < deadline, [r.xinfo_groups(k) for k in keys]
        assert all(p.poll() is None for p in procs), "a consumer exited"
        time.sleep(0.2)
    for p in procs:
        started(p)
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
    # Nothing is left pending with any consumer, the killed ones included.
    for key in keys:
        for c in r.xinfo_consumers(key, GROUP):
            assert c["pending"] == 0, c
    # Exactly once: each stream's batches are its good messages' positions, in order.
    for sid in {s.stream for s in sent if not s.hostile}:
        seqs = batch_seqs(r.xrange(stream_keys(key_prefix, sid).events))
        wanted = [position(s.ref) for s in sent if s.stream == sid and not s.hostile]
        assert seqs == wanted, sid
    # Every hostile message is dead-lettered once, with its problem and position.
    dead = [(k, f) for k in keys for _, f in r.xrange(f"{k}:dead")]
    got = sorted((f[b"source"].decode(), f[b"position"].decode()) for _, f in dead)
    problems = [json.loads(f[b"problem"])["detail"] for _, f in dead]
    assert got == sorted((s.key, s.ref) for s in sent if s.hostile), problems
    for _, f in dead:
        problem = json.loads(f[b"problem"])
        assert problem["status"] in (404, 422), problem
        assert f[b"stream"] in (b"nowhere", b"s0", b"s1", b"s2", b"s3", b"s4", b"s5")
    # The same bytes as the same messages written over HTTP in the same order.
    ref = reference(redis_url, sent)
    for sid in {s.stream for s in sent if not s.hostile}:
        mine = r.get(stream_keys(key_prefix, sid).state)
        assert mine is not None and mine == r.get(stream_keys(ref, sid).state), sid


def test_a_store_outage_pauses_consumption_and_it_resumes(
    redis_url: str,
    key_prefix: str,
    procs: list[subprocess.Popen[bytes]],
    tmp_path: Any,
) -> None:
    store = RedisServer(free_port(), str(tmp_path), appendonly=True)
    store.start()
    try:
        r = redis.Redis.from_url(redis_url)
        keys = [f"{key_prefix}:log"]
        sent = publish(r, keys, streams=2, count=30, seed=1)
        source = source_url(redis_url, keys, claim=1, count=5)
        procs.append(consumer(store.url, key_prefix, source, "c"))
        deadline = time.monotonic() + 60
        while not drained(r, keys):
            assert time.monotonic() < deadline, r.xinfo_groups(keys[0])
            time.sleep(0.2)
        store.pause()  # the store hangs: nothing can be committed
        sent += publish(r, keys, streams=2, count=20, seed=2, started={"s0", "s1"})
        time.sleep(2.5)
        g = r.xinfo_groups(keys[0])[0]
        # At most one batch read, nothing of it acknowledged, while the store does not answer.
        assert g["pending"] + g["lag"] == 20 and g["pending"] <= 5, g
        store.resume()
        while not drained(r, keys):
            assert time.monotonic() < deadline, r.xinfo_groups(keys[0])
            time.sleep(0.2)
        s = redis.Redis.from_url(store.url)
        for sid in {x.stream for x in sent if not x.hostile}:
            seqs = batch_seqs(s.xrange(stream_keys(key_prefix, sid).events))
            wanted = [position(x.ref) for x in sent if x.stream == sid and not x.hostile]
            assert seqs == wanted, sid
    finally:
        store.kill()
