"""The StateStore contract, against the memory store and a real Redis server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from featurestream.errors import (
    ConcurrentUpdate,
    DuplicateNames,
    StoreUnavailable,
    StreamExists,
    StreamNotFound,
)
from featurestream.store import Commit, StateStore
from featurestream.store.keys import stream_keys
from tests.conftest import RedisServer

pytestmark = pytest.mark.anyio


async def _create(store: StateStore, sid: str = "s1", incarnation: str = "inc-1") -> None:
    await store.create(
        sid, {"id": sid, "kind": "features"}, incarnation, b"state-0", "t0", b'{"v":0}', b"{}"
    )


def _commit(
    version: int, *, cid: str, parent: str = "", incarnation: str = "inc-1", **kw: object
) -> Commit:
    """Commit on top of ``version``, whose last commit id is ``parent`` ("" after create)."""
    fields: dict[str, object] = {
        "commit_id": cid,
        "incarnation": incarnation,
        "expected_version": version,
        "expected_commit": parent,
        "blob": f"state-{version + 1}".encode(),
        "updated_at": f"t{version + 1}",
        "selection": json.dumps({"v": version + 1}).encode(),
        "status": b"{}",
        "events": json.dumps({"events": [{"type": "batch", "v": version + 1}]}).encode(),
    }
    fields.update(kw)
    return Commit(**fields)  # type: ignore[arg-type]


async def test_create_then_load_returns_version_zero(store: StateStore) -> None:
    await _create(store)
    rec = await store.load("s1")
    assert (rec.version, rec.blob, rec.incarnation, rec.producers) == (0, b"state-0", "inc-1", {})
    summary = await store.summary("s1")
    assert summary.info["id"] == "s1" and summary.selection == b'{"v":0}'


async def test_create_existing_id_raises(store: StateStore) -> None:
    await _create(store)
    with pytest.raises(StreamExists):
        await _create(store, incarnation="inc-2")


async def test_unknown_stream_raises_not_found(store: StateStore) -> None:
    with pytest.raises(StreamNotFound):
        await store.load("missing")
    with pytest.raises(StreamNotFound):
        await store.summary("missing")
    with pytest.raises(StreamNotFound):
        await store.selection("missing")
    with pytest.raises(StreamNotFound):
        await store.commit("missing", _commit(0, cid="c"))
    assert await store.delete("missing") is False


async def test_commit_bumps_version_and_writes_everything(store: StateStore) -> None:
    await _create(store)
    v = await store.commit(
        "s1", _commit(0, cid="c1", names=["a", "b"], producer="p", responses=[(1, b"r1")])
    )
    assert v == 1
    rec = await store.load("s1")
    assert (rec.version, rec.blob, rec.producers) == (1, b"state-1", {"p": 1})
    assert await store.stored_response("s1", "p", 1) == b"r1"
    # The names are recorded: a later commit naming one of them is refused whole.
    with pytest.raises(DuplicateNames) as info:
        await store.commit("s1", _commit(1, cid="c2", parent="c1", names=["c", "b"]))
    assert info.value.names == ["b"]
    assert (await store.load("s1")).version == 1
    entries = await store.events("s1", 1, 10)
    assert [e.version for e in entries] == [1]
    assert json.loads(entries[0].payload)["events"][0]["v"] == 1
    # GET /selected's read: the version and the document, as summary has them.
    summary = await store.summary("s1")
    assert await store.selection("s1") == (summary.version, summary.selection)
    assert summary.version == 1 and json.loads(summary.selection) == {"v": 1}


async def test_stale_version_is_a_concurrent_update(store: StateStore) -> None:
    await _create(store)
    await store.commit("s1", _commit(0, cid="c1"))
    with pytest.raises(ConcurrentUpdate):
        await store.commit("s1", _commit(0, cid="c2"))
    assert (await store.load("s1")).blob == b"state-1"


async def test_two_racing_commits_exactly_one_wins(store: StateStore) -> None:
    await _create(store)
    results = await asyncio.gather(
        store.commit("s1", _commit(0, cid="a", blob=b"A")),
        store.commit("s1", _commit(0, cid="b", blob=b"B")),
        return_exceptions=True,
    )
    wins = [r for r in results if r == 1]
    losses = [r for r in results if isinstance(r, ConcurrentUpdate)]
    assert len(wins) == 1 and len(losses) == 1
    rec = await store.load("s1")
    assert rec.version == 1 and rec.blob in (b"A", b"B")
    assert len(await store.events("s1", 0, 10)) == 1


async def test_retried_commit_with_same_id_is_not_applied_twice(store: StateStore) -> None:
    await _create(store)
    first = await store.commit("s1", _commit(0, cid="same"))
    again = await store.commit("s1", _commit(0, cid="same"))
    assert first == again == 1
    assert len(await store.events("s1", 0, 10)) == 1


async def test_other_incarnation_is_a_concurrent_update(store: StateStore) -> None:
    # Delete and re-create under the same id: a writer holding the old stream must not win.
    await _create(store)
    await store.delete("s1")
    await _create(store, incarnation="inc-2")
    with pytest.raises(ConcurrentUpdate):
        await store.commit("s1", _commit(0, cid="c", incarnation="inc-1"))


async def test_events_page_by_version(store: StateStore) -> None:
    await _create(store)
    for v in range(5):
        await store.commit("s1", _commit(v, cid=f"c{v}", parent=f"c{v - 1}" if v else ""))
    assert [e.version for e in await store.events("s1", 2, 2)] == [2, 3]
    assert [e.version for e in await store.events("s1", 5, 10)] == [5]
    assert await store.events("s1", 6, 10) == []


async def test_replay_window_drops_old_responses(store: StateStore) -> None:
    await _create(store)
    window = 1000
    await store.commit("s1", _commit(0, cid="c0", producer="p", responses=[(1, b"one")]))
    await store.commit(
        "s1", _commit(1, cid="c1", parent="c0", producer="p", responses=[(1 + window, b"later")])
    )
    assert await store.stored_response("s1", "p", 1) is None
    assert await store.stored_response("s1", "p", 1 + window) == b"later"


async def test_delete_removes_every_key_and_listing(store: StateStore) -> None:
    await _create(store)
    await store.commit("s1", _commit(0, cid="c", names=["a"], producer="p", responses=[(1, b"")]))
    await _create(store, "s2", "inc-x")
    assert [s.info["id"] for s in await store.list_streams()] == ["s1", "s2"]
    assert await store.delete("s1") is True
    assert [s.info["id"] for s in await store.list_streams()] == ["s2"]
    with pytest.raises(StreamNotFound):
        await store.load("s1")
    # Re-creating starts from scratch: no names, producers or events survive.
    await _create(store, "s1", "inc-3")
    assert (await store.load("s1")).producers == {}
    assert await store.events("s1", 0, 10) == []
    # ... and the old names are free again.
    assert await store.commit("s1", _commit(0, cid="c2", names=["a"], incarnation="inc-3")) == 1


@pytest.mark.redis
async def test_redis_keys_of_a_stream_share_one_hash_slot(redis_url: str, key_prefix: str) -> None:
    from redis.crc import key_slot

    keys = stream_keys(key_prefix, "churn-2026").all()
    assert len({key_slot(k.encode()) for k in keys}) == 1
    assert all("{churn-2026}" in k for k in keys)


# --------------------------------------------------------------------------- group commits


async def test_one_commit_records_several_responses_of_a_producer(store: StateStore) -> None:
    await _create(store)
    pairs = [(1, b"r1"), (2, b"r2"), (3, b"r3")]
    v = await store.commit("s1", _commit(0, cid="g", producer="p", responses=pairs))
    assert v == 1
    assert (await store.load("s1")).producers == {"p": 3}
    for seq, body in pairs:
        assert await store.stored_response("s1", "p", seq) == body
    assert [e.version for e in await store.events("s1", 0, 10)] == [1]


async def test_group_commit_trims_each_response_to_the_replay_window(store: StateStore) -> None:
    await _create(store)
    window = 1000
    await store.commit("s1", _commit(0, cid="a", producer="p", responses=[(1, b"1"), (2, b"2")]))
    later = [(1 + window, b"x"), (2 + window, b"y")]
    await store.commit("s1", _commit(1, cid="b", parent="a", producer="p", responses=later))
    assert await store.stored_response("s1", "p", 1) is None
    assert await store.stored_response("s1", "p", 2) is None
    assert await store.stored_response("s1", "p", 2 + window) == b"y"


async def test_records_only_commit_keeps_state_version_and_log(store: StateStore) -> None:
    await _create(store)
    await store.commit("s1", _commit(0, cid="c1", producer="p", responses=[(1, b"ok")]))
    async with store.subscribe("s1") as sub:
        v = await store.commit(
            "s1",
            _commit(
                1,
                cid="c2",
                parent="c1",
                producer="p",
                responses=[(2, b"refused")],
                state_changed=False,
                notify=b"ignored",
            ),
        )
        assert v == 1
        rec = await store.load("s1")
        assert (rec.version, rec.blob, rec.producers) == (1, b"state-1", {"p": 2})
        assert await store.stored_response("s1", "p", 2) == b"refused"
        assert [e.version for e in await store.events("s1", 0, 10)] == [1]
        # It is still a compare-and-set, and it publishes nothing.
        with pytest.raises(ConcurrentUpdate):
            await store.commit(
                "s1", _commit(0, cid="c3", producer="p", responses=[(3, b"")], state_changed=False)
            )
        # A records-only commit is the stream's last commit too.
        await store.commit("s1", _commit(1, cid="c4", parent="c2", notify=b'{"version":2}'))
        assert await asyncio.wait_for(sub.get(), 5) == b'{"version":2}'


# --------------------------------------------------------------------------- notifications


async def test_every_subscriber_gets_the_newest_notification(store: StateStore) -> None:
    """In order, the versions a subscriber did not take in time skipped: it ends with the
    newest (notifications are snapshots), whichever it had taken before."""
    await _create(store)
    async with store.subscribe("s1") as a, store.subscribe("s1") as b:
        for v in range(3):
            notify = f"n{v}".encode()
            await store.commit(
                "s1", _commit(v, cid=f"c{v}", parent=f"c{v - 1}" if v else "", notify=notify)
            )
        await store.commit("s1", _commit(3, cid="quiet", parent="c2"))  # no notify: nothing sent
        await store.commit("s1", _commit(4, cid="c4", parent="quiet", notify=b"n4"))
        sent = [b"n0", b"n1", b"n2", b"n4"]
        for sub in (a, b):
            got = [await asyncio.wait_for(sub.get(), 5)]
            while got[-1] != b"n4":
                got.append(await asyncio.wait_for(sub.get(), 5))
            assert got == sorted(got) and set(got) <= set(sent), got
    # Other streams' notifications are not delivered.
    await _create(store, "s2", "inc-2")
    async with store.subscribe("s1") as sub:
        await store.commit("s2", _commit(0, cid="o", incarnation="inc-2", notify=b"other"))
        await store.commit("s1", _commit(5, cid="c5", parent="c4", notify=b"mine"))
        assert await asyncio.wait_for(sub.get(), 5) == b"mine"


async def test_a_subscription_keeps_only_the_newest_notification() -> None:
    from featurestream.store.base import RESYNC, Subscription

    sub = Subscription("s")
    for i in range(5):
        sub.put(f"n{i}".encode())
    assert sub.pending() == 1
    assert await sub.get() == b"n4"
    assert sub.pending() == 0
    # A resync stays until it is taken: the listener re-reads, which covers the rest.
    sub.put(RESYNC)
    sub.put(b"n5")
    assert await sub.get() == RESYNC
    sub.put(b"n6")
    assert await asyncio.wait_for(sub.get(), 1) == b"n6"


@pytest.mark.redis
async def test_redis_notifications_survive_a_redis_restart(
    redis_server_factory: Callable[..., RedisServer], key_prefix: str
) -> None:
    from featurestream.config import Settings
    from featurestream.store.base import RESYNC
    from featurestream.store.redis import RedisStore

    server = redis_server_factory()
    store = RedisStore.from_settings(Settings(store_url=server.url, key_prefix=key_prefix))
    try:
        await _create(store)
        async with store.subscribe("s1") as sub, store.subscribe("s1") as other:
            await store.commit("s1", _commit(0, cid="c0", notify=b"before"))
            assert await asyncio.wait_for(sub.get(), 5) == b"before"
            assert store.hub.listeners(stream_keys(key_prefix, "s1").channel) == 2
            server.kill()
            server.start()  # same port, AOF kept the stream
            # The shared connection comes back by itself and tells listeners to re-read.
            assert await asyncio.wait_for(sub.get(), 20) == RESYNC
            for _attempt in range(100):
                try:
                    await store.commit("s1", _commit(1, cid="c1", parent="c0", notify=b"after"))
                    break
                except StoreUnavailable:
                    await asyncio.sleep(0.1)
            got = await asyncio.wait_for(sub.get(), 5)
            while got == RESYNC:
                got = await asyncio.wait_for(sub.get(), 5)
            assert got == b"after"
            assert other.pending() >= 1
        assert store.hub.listeners(stream_keys(key_prefix, "s1").channel) == 0
    finally:
        await store.close()


async def test_a_commit_forgets_the_producers_it_drops_whole(store: StateStore) -> None:
    """Dropped producers lose their seq, their time and their stored responses; the
    committing producer's records and time are kept (records-only commits too)."""
    await _create(store)
    p_pairs = [(1, b"p1"), (2, b"p2"), (3, b"p3")]
    await store.commit("s1", _commit(0, cid="c0", producer="p", responses=p_pairs, seen_ms=10))
    await store.commit(
        "s1", _commit(1, cid="c1", parent="c0", producer="log:0", responses=[(7, b"l")])
    )
    rec = await store.load("s1")
    assert (rec.producers, rec.seen) == ({"p": 3, "log:0": 7}, {"p": 10})
    await store.commit(
        "s1",
        _commit(
            2,
            cid="c2",
            parent="c1",
            producer="q",
            responses=[(1, b"q1")],
            seen_ms=20,
            drop_producers=("p",),
            state_changed=False,
        ),
    )
    rec = await store.load("s1")
    assert (rec.version, rec.producers, rec.seen) == (2, {"log:0": 7, "q": 1}, {"q": 20})
    for seq, _ in p_pairs:
        assert await store.stored_response("s1", "p", seq) is None
    assert await store.stored_response("s1", "q", 1) == b"q1"
    assert await store.stored_response("s1", "log:0", 7) == b"l"
    # Dropping a producer the stream does not hold changes nothing.
    await store.commit(
        "s1",
        _commit(
            2,
            cid="c3",
            parent="c2",
            producer="q",
            responses=[(2, b"q2")],
            seen_ms=30,
            drop_producers=("nobody",),
        ),
    )
    rec = await store.load("s1")
    assert (rec.version, rec.producers, rec.seen) == (3, {"log:0": 7, "q": 2}, {"q": 30})


async def test_redis_counts_the_bytes_of_dropped_responses_out(
    redis_url: str, key_prefix: str
) -> None:
    import redis.asyncio as aioredis

    from featurestream.store.redis import RedisStore

    client = aioredis.Redis.from_url(redis_url)
    store = RedisStore(client, prefix=key_prefix)
    try:
        await _create(store)
        await store.commit(
            "s1", _commit(0, cid="c0", producer="p", responses=[(1, b"x" * 50)], seen_ms=1)
        )
        await store.commit(
            "s1",
            _commit(
                1,
                cid="c1",
                parent="c0",
                producer="q",
                responses=[(1, b"y" * 7)],
                seen_ms=2,
                drop_producers=("p",),
            ),
        )
        k = stream_keys(key_prefix, "s1")
        assert int(await client.hget(k.meta, "replay_bytes")) == 7
        assert await client.hlen(k.responses) == 1
        assert await client.zcard(k.replays) == 1
        assert await client.hgetall(k.seen) == {b"q": b"2"}
    finally:
        await store.close()


async def test_a_dropped_producer_far_past_the_window_loses_every_stored_response(
    store: StateStore,
) -> None:
    """The responses of a dropped producer are found from its last seq down, however
    high its seqs: the latest two of a producer at seq 5,001 go with it."""
    await _create(store)
    pairs = [(5000, b"a"), (5001, b"b")]
    await store.commit("s1", _commit(0, cid="c0", producer="p", responses=pairs, seen_ms=1))
    await store.commit(
        "s1",
        _commit(
            1,
            cid="c1",
            parent="c0",
            producer="q",
            responses=[(1, b"q")],
            seen_ms=2,
            drop_producers=("p",),
        ),
    )
    for seq, _ in pairs:
        assert await store.stored_response("s1", "p", seq) is None
    assert (await store.load("s1")).producers == {"q": 1}
