"""Sharded pub/sub on a single Redis 7: the commit script SPUBLISHes, the hub SSUBSCRIBEs.

Redis 7 serves SPUBLISH and SSUBSCRIBE without cluster mode too, so one code
path serves both; a classic SUBSCRIBE to the same channel hears nothing.
"""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from featurestream.config import Settings
from featurestream.store.keys import stream_keys
from featurestream.store.redis import RedisStore
from tests.store.test_stores import _commit, _create

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


async def test_a_single_redis_7_uses_sharded_pubsub(redis_url: str, key_prefix: str) -> None:
    store = RedisStore.from_settings(Settings(store_url=redis_url, key_prefix=key_prefix))
    plain = aioredis.Redis.from_url(redis_url)
    channel = stream_keys(key_prefix, "s1").channel
    classic = plain.pubsub()
    try:
        info = await plain.info("server")
        assert int(str(info["redis_version"]).split(".")[0]) >= 7, "these tests run Redis 7"
        await _create(store)
        await classic.subscribe(channel)
        async with store.subscribe("s1") as sub:
            assert store.hub.sharded is True
            assert await plain.execute_command("PUBSUB", "SHARDCHANNELS", channel) == [
                channel.encode()
            ]
            await store.commit("s1", _commit(0, cid="c0", notify=b"sharded"))
            assert await asyncio.wait_for(sub.get(), 5) == b"sharded"
        # The classic subscriber got its confirmation and nothing else.
        first = await classic.get_message(timeout=1)
        assert first is not None and first["type"] == "subscribe"
        assert await classic.get_message(timeout=0.5) is None
        assert await plain.execute_command("PUBSUB", "SHARDCHANNELS", channel) == []
    finally:
        await classic.aclose()
        await plain.aclose()
        await store.close()
