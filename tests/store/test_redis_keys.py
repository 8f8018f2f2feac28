"""A stream has one stored format: every key it writes is one of ``StreamKeys.all()``
(or the replicas' barrier), so a delete or a re-create removes all of it."""

from __future__ import annotations

from dataclasses import replace

import pytest
import redis.asyncio as aioredis

from featurestream.store.keys import stream_keys
from featurestream.store.redis import RedisStore
from tests.store.test_stores import _commit, _create

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


async def test_every_key_of_a_stream_is_one_the_store_knows(
    redis_url: str, key_prefix: str
) -> None:
    client = aioredis.Redis.from_url(redis_url)
    store = RedisStore(client, prefix=key_prefix)
    try:
        await _create(store)
        commit = _commit(0, cid="c1", names=["a", "b"], producer="p", responses=[(1, b"{}")])
        commit = replace(commit, seen_ms=1)
        assert await store.commit("s1", commit) == 1
        k = stream_keys(key_prefix, "s1")
        written = {key.decode() async for key in client.scan_iter(match=f"{key_prefix}:{{s1}}:*")}
        assert written == {
            k.meta,
            k.state,
            k.events,
            k.producers,
            k.responses,
            k.replays,
            k.names_log,
            k.names_ids,
            k.seen,
        }
        assert written == set(k.all())
        assert await store.delete("s1")
        assert [key async for key in client.scan_iter(match=f"{key_prefix}:{{s1}}:*")] == []
    finally:
        await store.close()
