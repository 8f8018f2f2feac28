"""Each tenant's index of streams: the quota counted atomically with the create, listings
that read one tenant only, reservations left by creates that never happened."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis import exceptions as rex

from featurestream.errors import StoreFull, StreamExists
from featurestream.store import StateStore
from featurestream.store.base import QuotaReached
from featurestream.store.keys import tenant_index_key
from featurestream.store.redis import RESERVATION_GRACE, RedisStore

pytestmark = pytest.mark.anyio


async def _create(
    store: StateStore, sid: str, tenant: str | None, quota: int | None, incarnation: str = "i"
) -> None:
    info: dict[str, Any] = {"id": sid, "kind": "features", "tenant": tenant}
    await store.create(sid, info, incarnation, b"s", "t0", b"{}", b"{}", tenant=tenant, quota=quota)


async def test_the_quota_counts_the_tenant_only_and_a_delete_frees_a_slot(
    store: StateStore,
) -> None:
    for sid in ("a~1", "a~2"):
        await _create(store, sid, "a", 2)
    with pytest.raises(QuotaReached):
        await _create(store, "a~3", "a", 2)
    # The same id again is a conflict, not a quota problem, and counts nothing.
    with pytest.raises(StreamExists):
        await _create(store, "a~1", "a", 2, incarnation="another")
    await _create(store, "b~1", "b", 2)
    await _create(store, "plain", None, 2)
    assert [s.info["id"] for s in await store.list_streams("a")] == ["a~1", "a~2"]
    assert [s.info["id"] for s in await store.list_streams("b")] == ["b~1"]
    assert [s.info["id"] for s in await store.list_streams()] == ["plain"]
    assert await store.delete("a~1")
    await _create(store, "a~3", "a", 2)
    assert [s.info["id"] for s in await store.list_streams("a")] == ["a~2", "a~3"]


@pytest.mark.redis
async def test_a_reservation_whose_create_never_happened_is_dropped_when_old(
    redis_url: str, key_prefix: str
) -> None:
    client = aioredis.Redis.from_url(redis_url)
    store = RedisStore(client, prefix=key_prefix)
    try:
        await _create(store, "a~1", "a", 2)
        owned = tenant_index_key(key_prefix, "a")
        # A fresh reservation (a create under way elsewhere) holds its slot ...
        await client.zadd(owned, {"a~pending": time.time()})
        with pytest.raises(QuotaReached):
            await _create(store, "a~2", "a", 2)
        assert await client.zscore(owned, "a~pending") is not None
        # ... one older than the grace, whose stream does not exist, does not.
        await client.zadd(owned, {"a~pending": time.time() - RESERVATION_GRACE - 5})
        other = RedisStore(client, prefix=key_prefix)  # checks for stale entries now
        await _create(other, "a~2", "a", 2)
        assert await client.zscore(owned, "a~pending") is None
        assert [s.info["id"] for s in await other.list_streams("a")] == ["a~1", "a~2"]
        # An old entry whose stream exists is kept.
        await client.zadd(owned, {"a~1": time.time() - RESERVATION_GRACE - 5})
        with pytest.raises(QuotaReached):
            await _create(RedisStore(client, prefix=key_prefix), "a~3", "a", 2)
        assert await client.zscore(owned, "a~1") is not None
    finally:
        await client.aclose()


@pytest.mark.redis
async def test_a_create_refused_for_want_of_memory_gives_its_reservation_back(
    redis_url: str, key_prefix: str
) -> None:
    client = aioredis.Redis.from_url(redis_url)
    store = RedisStore(client, prefix=key_prefix)
    owned = tenant_index_key(key_prefix, "a")

    async def refused(**_: Any) -> Any:
        raise rex.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")

    try:
        await _create(store, "a~1", "a", 2)
        store._create = refused
        with pytest.raises(StoreFull):
            await _create(store, "a~2", "a", 2)
        # Nothing of a~2 was written, so its reservation is gone at once, not in a minute.
        assert await client.zscore(owned, "a~2") is None
        assert await client.zscore(owned, "a~1") == 0
        assert [s.info["id"] for s in await store.list_streams("a")] == ["a~1"]
    finally:
        await client.aclose()


@pytest.mark.redis
async def test_a_create_between_a_deletes_steps_stays_listed(
    redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delete: UNLINK of the stream, then ZREM of its index entry. A create of the same id in
    between must not end unlisted (nor uncounted by the quota)."""
    client = aioredis.Redis.from_url(redis_url)
    store = RedisStore(client, prefix=key_prefix)
    try:
        await _create(store, "a~1", "a", 2)
        write = store._write

        async def write_then_create(key: str, *command: Any) -> Any:
            out = await write(key, *command)
            if command[0] == "UNLINK":  # the stream is gone: another process creates it again
                monkeypatch.setattr(store, "_write", write)
                await _create(store, "a~1", "a", 2, incarnation="again")
            return out

        monkeypatch.setattr(store, "_write", write_then_create)
        assert await store.delete("a~1")
        assert [s.info["id"] for s in await store.list_streams("a")] == ["a~1"]
        await _create(store, "a~2", "a", 2)
        with pytest.raises(QuotaReached):  # a~1 still counts
            await _create(store, "a~3", "a", 2)
    finally:
        await client.aclose()
