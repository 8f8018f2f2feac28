"""``featurestream consume nats://...`` on the real NATS JetStream: processes killed and restarted.

Each test has a JetStream stream of its own. Every message is applied exactly
once, every stream ends with the bytes of the same messages written over
HTTP in the same order, and hostile messages all end in the dead letters.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

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

nats = pytest.importorskip("nats")

pytestmark = [pytest.mark.redis, pytest.mark.timeout(240)]

NATS_URL = "nats://127.0.0.1:4222"
__all__ = ["procs"]  # a fixture


async def _publish(stream: str, sent: list[Sent]) -> None:
    nc = await nats.connect(NATS_URL)
    js = nc.jetstream()
    for s in sent:
        fields = dict(s.fields)
        body = fields.pop("body")
        ack = await js.publish(
            f"{stream}.in", body if isinstance(body, bytes) else body.encode(), headers=fields
        )
        s.key, s.ref, s.position = stream, str(ack.seq), ack.seq
    await nc.close()


async def _state(stream: str) -> tuple[Any, list[dict[str, str]]]:
    """The consumer's info (None before a consumer made it), and the dead letters' headers."""
    nc = await nats.connect(NATS_URL)
    js = nc.jetstream()
    info: Any = None
    dead: list[dict[str, str]] = []
    try:
        info = await js.consumer_info(stream, "fs")
        last = (await js.stream_info(f"{stream}-dead")).state.last_seq
        for seq in range(1, last + 1):
            dead.append(dict((await js.get_msg(f"{stream}-dead", seq)).headers or {}))
    except nats.js.errors.NotFoundError:
        pass
    finally:
        await nc.close()
    return info, dead


async def _drop(stream: str) -> None:
    nc = await nats.connect(NATS_URL)
    js = nc.jetstream()
    for name in (stream, f"{stream}-dead", f"KV_fs-lease-{stream}-fs"):
        with suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(name)
    await nc.close()


@pytest.fixture
def stream(key_prefix: str) -> Iterator[str]:
    async def make() -> None:
        nc = await nats.connect(NATS_URL)
        await nc.jetstream().add_stream(name=key_prefix, subjects=[f"{key_prefix}.in"])
        await nc.close()

    asyncio.run(make())
    yield key_prefix
    asyncio.run(_drop(key_prefix))


@pytest.mark.slow
def test_killed_nats_consumers_apply_every_message_exactly_once(
    redis_url: str, key_prefix: str, stream: str, procs: list[subprocess.Popen[bytes]]
) -> None:
    sent = messages(streams=4, count=120, seed=11)
    asyncio.run(_publish(stream, sent))
    source = f"{NATS_URL}/{stream}?consumer=fs&claim=1&count=10"
    names = ["a", "b"]
    for name in names:
        procs.append(consumer(redis_url, key_prefix, source, name))
    rng = random.Random(5)
    for k in range(3):
        time.sleep(rng.uniform(1.0, 2.0))
        i = rng.randrange(2)
        procs[i].send_signal(signal.SIGKILL)
        procs[i].wait(10)
        procs[i] = consumer(redis_url, key_prefix, source, f"{names[i]}{k}")
    deadline = time.monotonic() + 120
    while True:
        info, dead = asyncio.run(_state(stream))
        if info is not None and info.num_pending == 0 and info.num_ack_pending == 0:
            break
        assert time.monotonic() < deadline, info
        assert all(p.poll() is None for p in procs), "a consumer exited"
        time.sleep(0.3)
    for p in procs:
        started(p)
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
    r = redis.Redis.from_url(redis_url)
    good = {s.stream for s in sent if not s.hostile}
    for sid in good:
        seqs = batch_seqs(r.xrange(stream_keys(key_prefix, sid).events))
        assert seqs == [s.position for s in sent if s.stream == sid and not s.hostile], sid
    assert sorted(int(h["Position"]) for h in dead) == [s.position for s in sent if s.hostile]
    for h in dead:
        assert json.loads(h["Problem"])["status"] in (404, 422), h
    ref = reference(redis_url, sent)
    for sid in good:
        mine = r.get(stream_keys(key_prefix, sid).state)
        assert mine is not None and mine == r.get(stream_keys(ref, sid).state), sid
