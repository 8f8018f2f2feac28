"""The store's guards: commit-id compare-and-set, bounded growth, hung and full Redis."""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest

from featurestream import codec
from featurestream.config import Settings
from featurestream.engine import catalogue
from featurestream.engine.cache import footprint
from featurestream.errors import ConcurrentUpdate, StoreFull, StoreUnavailable
from featurestream.store import Commit, StateStore, open_store
from featurestream.store.redis import RedisStore
from tests.conftest import RedisServer

pytestmark = pytest.mark.anyio


async def _create(store: StateStore, sid: str = "s1") -> None:
    await store.create(sid, {"id": sid, "kind": "features"}, "inc", b"s0", "t0", b"{}", b"{}")


def _commit(version: int, cid: str, parent: str, **kw: object) -> Commit:
    fields: dict[str, object] = {
        "commit_id": cid,
        "incarnation": "inc",
        "expected_version": version,
        "expected_commit": parent,
        "blob": f"state-{cid}".encode(),
        "updated_at": "t",
        "selection": b"{}",
        "status": b"{}",
        "events": json.dumps({"events": [{"type": "batch", "cid": cid}]}).encode(),
    }
    fields.update(kw)
    return Commit(**fields)  # type: ignore[arg-type]


@pytest.fixture
def limited(store_settings: Settings) -> Settings:
    return store_settings.model_copy(update={"event_retention": 100, "replay_bytes": 1024 * 1024})


@pytest.fixture
async def small_store(limited: Settings) -> StateStore:
    st = open_store(limited)
    await st.open()
    yield st  # type: ignore[misc]
    await st.close()


async def test_a_commit_on_a_version_the_store_lost_is_refused(store: StateStore) -> None:
    # A copy holds version 1 by commit "a"; the store lost it and reached version 1
    # again by commit "b" (a rollback): same incarnation and version, other contents.
    await _create(store)
    await store.commit("s1", _commit(0, "b", ""))
    with pytest.raises(ConcurrentUpdate):
        await store.commit("s1", _commit(1, "c", "a"))
    head = await store.head("s1")
    assert (head.version, head.commit_id) == (1, "b")
    assert (await store.load("s1")).commit_id == "b"
    assert await store.commit("s1", _commit(1, "c", "b")) == 2
    # A retried call of an applied commit still answers its version.
    assert await store.commit("s1", _commit(1, "c", "b")) == 2


async def test_a_records_only_commit_becomes_the_last_commit(store: StateStore) -> None:
    await _create(store)
    await store.commit("s1", _commit(0, "a", ""))
    records = _commit(1, "r", "a", producer="p", responses=[(1, b"x")], state_changed=False)
    assert await store.commit("s1", records) == 1
    assert (await store.head("s1")).commit_id == "r"
    with pytest.raises(ConcurrentUpdate):
        await store.commit("s1", _commit(1, "c", "a"))


async def test_the_event_log_keeps_event_retention_entries(small_store: StateStore) -> None:
    await _create(small_store)
    parent = ""
    for v in range(130):
        await small_store.commit("s1", _commit(v, f"c{v}", parent))
        parent = f"c{v}"
    entries = await small_store.events("s1", 0, 1000)
    assert [e.version for e in entries] == list(range(31, 131))
    assert [e.version for e in await small_store.events("s1", 100, 3)] == [100, 101, 102]


async def test_stored_responses_are_bounded_by_bytes_oldest_first(small_store: StateStore) -> None:
    await _create(small_store)
    body = b"r" * (300 * 1024)
    parent = ""
    for seq in range(1, 9):
        producer = "p" if seq % 2 else "q"
        commit = _commit(seq - 1, f"c{seq}", parent, producer=producer, responses=[(seq, body)])
        await small_store.commit("s1", commit)
        parent = f"c{seq}"
    kept = [
        seq
        for seq in range(1, 9)
        if await small_store.stored_response("s1", "p" if seq % 2 else "q", seq) is not None
    ]
    assert kept == [6, 7, 8]  # 3 x 300 KiB fit in 1 MiB, whichever producer
    # The responses of one commit are kept whole, even beyond the bound.
    big = [(9, body), (10, body), (11, body), (12, body)]
    await small_store.commit("s1", _commit(8, "c9", parent, producer="p", responses=big))
    for seq, _ in big:
        assert await small_store.stored_response("s1", "p", seq) == body
    assert await small_store.stored_response("s1", "q", 8) is None


def test_the_footprint_of_a_decoded_state_is_the_memory_it_takes() -> None:
    """What the cache counts is what decoding allocates (tracemalloc sees numpy too)."""
    rng = np.random.default_rng(3)
    d = 20_000
    names = [f"feature-{i:06d}" for i in range(d)]
    for algorithm in ("ofs", "fires", "fsds"):
        # OFS with values as sent: its state is the weights and the names alone.
        params = {"num_features": 10, **({"scale": "none"} if algorithm == "ofs" else {})}
        cls, resolved = catalogue.resolve(algorithm, params)
        start, _ = catalogue.starter(cls, resolved, None, names, max_name_length=1024)
        sel = start()
        sel.learn_instances(rng.normal(size=(20, d)), (rng.random(20) > 0.5).astype(float))
        blob = codec.encode(cls.name, resolved.to_dict(), sel.snapshot())
        tracemalloc.start()
        try:
            decoded = codec.decode(blob)
            allocated, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        measured = footprint(decoded.state)
        assert abs(measured - allocated) < 0.1 * allocated, (algorithm, measured, allocated)
        if algorithm == "ofs":
            # Names weigh far more decoded than encoded: the encoded length undercounts.
            assert measured > 2.5 * len(blob)


# --------------------------------------------------------------------------- hung, full Redis


@pytest.mark.redis
async def test_a_hung_redis_fails_each_call_in_store_timeout_and_no_reply_goes_astray(
    redis_server_factory: Callable[..., RedisServer], key_prefix: str
) -> None:
    server = redis_server_factory()
    settings = Settings(store_url=server.url, key_prefix=key_prefix, store_timeout=0.5)
    store = RedisStore.from_settings(settings)
    try:
        ids = [f"s{i}" for i in range(20)]
        for sid in ids:
            await _create(store, sid)
        server.pause()
        try:
            t = time.monotonic()
            results = await asyncio.gather(
                *(store.summary(sid) for sid in ids),
                *(store.selection(sid) for sid in ids),
                *(store.commit(sid, _commit(0, "x", "")) for sid in ids),
                return_exceptions=True,
            )
            took = time.monotonic() - t
            assert all(isinstance(r, StoreUnavailable) for r in results), results
            assert took < 1.5
            assert await store.ping() is False
        finally:
            server.resume()
        # Every connection cut short was closed, not handed out again with its reply
        # pending: each call gets its own answer.
        for _ in range(3):
            got = await asyncio.gather(*(store.summary(sid) for sid in ids))
            assert [s.info["id"] for s in got] == ids
            read = await asyncio.gather(*(store.selection(sid) for sid in ids))
            assert read == [(s.version, s.selection) for s in got]
        assert await store.ping() is True
    finally:
        await store.close()


@pytest.mark.redis
async def test_store_commands_wait_on_store_timeout_the_notifications_on_the_socket(
    redis_url: str, key_prefix: str
) -> None:
    """The commands of store calls have no socket timeout (``store_timeout`` bounds the
    call, see the test above; with one, each command is sent from a task of its own);
    the connections of selection notifications, which wait outside any call, keep
    ``redis_socket_timeout``."""
    settings = Settings(store_url=redis_url, key_prefix=key_prefix, redis_socket_timeout=3.5)
    store = RedisStore.from_settings(settings)
    try:
        await _create(store, "s1")
        assert store.client.connection_pool.connection_kwargs["socket_timeout"] is None
        async with store.subscribe("s1"):
            own = store.hub._single
            assert own is not None
            assert own.connection_pool.connection_kwargs["socket_timeout"] == 3.5
    finally:
        await store.close()


@pytest.mark.redis
async def test_an_out_of_memory_redis_is_store_full_and_not_ready_until_it_has_room(
    redis_server_factory: Callable[..., RedisServer], key_prefix: str
) -> None:
    import redis as sync_redis

    server = redis_server_factory(extra=("--maxmemory", "4mb", "--maxmemory-policy", "noeviction"))
    store = RedisStore.from_settings(Settings(store_url=server.url, key_prefix=key_prefix))
    filler = sync_redis.Redis.from_url(server.url)
    try:
        await _create(store)
        assert await store.ping() is True
        keys = []
        for i in range(1000):
            try:
                filler.set(f"filler-{i}", b"x" * 65536)
            except sync_redis.exceptions.OutOfMemoryError:
                break
            keys.append(f"filler-{i}")
        with pytest.raises(StoreFull):
            # A commit carries a whole state: its own bytes take Redis past the limit.
            await store.commit("s1", _commit(0, "a", "", blob=b"s" * 256 * 1024))
        assert isinstance(StoreFull("x"), StoreUnavailable)
        assert store.full and await store.ping() is False
        filler.delete(*keys)
        assert await store.ping() is True and not store.full
        assert await store.commit("s1", _commit(0, "a", "")) == 1
    finally:
        filler.close()
        await store.close()
