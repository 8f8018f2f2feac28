"""New feature names in the Redis store: looked up in the process's copy of the stream's
names log, read up to date first, and appended by the commit script as one entry, only
if the log still ends where the lookup saw it end (store/names.py)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any, cast

import pytest
import redis.asyncio as aioredis

from featurestream.config import Settings
from featurestream.errors import ConcurrentUpdate, DuplicateNames
from featurestream.store import Commit, open_store
from featurestream.store.keys import stream_keys
from featurestream.store.names import INLINE_NAMES, split
from featurestream.store.redis import RedisStore
from tests.conftest import RedisServer

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


def _commit(version: int, cid: str, parent: str, names: list[str]) -> Commit:
    return Commit(
        commit_id=cid,
        incarnation="inc-1",
        expected_version=version,
        expected_commit=parent,
        blob=f"state-{version + 1}".encode(),
        updated_at="t",
        selection=b"{}",
        status=b"{}",
        events=json.dumps({"events": [{"type": "batch", "names": names}]}).encode(),
        names=names,
    )


@pytest.fixture
async def store(redis_url: str, key_prefix: str) -> AsyncIterator[RedisStore]:
    st = open_store(Settings(store_url=redis_url, key_prefix=key_prefix))
    assert isinstance(st, RedisStore)
    await st.open()
    await st.create("s", {"id": "s", "kind": "features"}, "inc-1", b"s0", "t0", b"{}", b"{}")
    yield st
    await st.close()


@pytest.fixture
async def other(store: RedisStore, redis_url: str, key_prefix: str) -> AsyncIterator[RedisStore]:
    """The same streams as ``store`` sees them, through another store: another process."""
    st = open_store(Settings(store_url=redis_url, key_prefix=key_prefix))
    assert isinstance(st, RedisStore)
    await st.open()
    yield st
    await st.close()


async def _raw(store: RedisStore, *command: Any) -> Any:
    return await store._redis.execute_command(*command)


async def _log(store: RedisStore, stream_id: str = "s") -> list[list[str]]:
    k = stream_keys(store._prefix, stream_id)
    return [split(e) for e in await _raw(store, "LRANGE", k.names_log, 0, -1)]


async def test_names_go_to_the_log_as_one_entry_and_a_duplicate_writes_nothing(
    store: RedisStore,
) -> None:
    names = [f"f{i}" for i in range(5000)]
    assert await store.commit("s", _commit(0, "c1", "", names)) == 1
    k = stream_keys(store._prefix, "s")
    assert await _log(store) == [names]
    assert await _raw(store, "LRANGE", k.names_ids, 0, -1) == [b"c1"]
    # This process's copy took the names it committed, without reading them back (in a
    # thread, after the answer: its lock is free once they are in).
    copy = store._commits.names.get("s", "inc-1")
    async with copy.lock:
        pass
    assert (copy.chunks, copy.head, len(copy.seen)) == (1, "c1", 5000)
    # A duplicate at the end refuses the whole commit, which writes nothing.
    with pytest.raises(DuplicateNames) as info:
        await store.commit("s", _commit(1, "c2", "c1", ["new", *names[-3:]]))
    assert info.value.names == names[-3:]
    assert (await store.load("s")).version == 1
    assert await _log(store) == [names]
    assert await store.commit("s", _commit(1, "c2", "c1", ["new"])) == 2
    assert await _log(store) == [names, ["new"]]


async def test_the_next_write_sees_the_names_of_a_large_one_at_once(store: RedisStore) -> None:
    """The copy takes a large commit's names after the answer (in a thread): the next
    write of the stream waits for it, and does not read them back from Redis."""
    names = [f"f{i}" for i in range(3 * INLINE_NAMES)]
    assert await store.commit("s", _commit(0, "c1", "", names)) == 1
    with pytest.raises(DuplicateNames):
        await store.commit("s", _commit(1, "c2", "c1", ["g", names[-1]]))
    copy = store._commits.names.get("s", "inc-1")
    assert (copy.chunks, copy.head, len(copy.seen)) == (1, "c1", len(names))


async def test_a_retried_commit_is_not_refused_for_its_own_names(store: RedisStore) -> None:
    c = _commit(0, "c1", "", ["a", "b"])
    assert await store.commit("s", c) == 1
    assert await store.commit("s", c) == 1  # the same commit again: its outcome, no 409
    assert await _log(store) == [["a", "b"]]


async def test_names_another_process_committed_are_read_before_a_lookup(
    store: RedisStore, other: RedisStore
) -> None:
    assert await store.commit("s", _commit(0, "c1", "", ["a", "b"])) == 1
    with pytest.raises(DuplicateNames) as info:
        await other.commit("s", _commit(1, "c2", "c1", ["c", "a"]))
    assert info.value.names == ["a"]
    assert await other.commit("s", _commit(1, "c2", "c1", ["c"])) == 2
    # The first process's copy ends at its own entry: it reads the other's first.
    with pytest.raises(DuplicateNames):
        await store.commit("s", _commit(2, "c3", "c2", ["d", "c"]))
    assert await store.commit("s", _commit(2, "c3", "c2", ["d"])) == 3
    assert await _log(store) == [["a", "b"], ["c"], ["d"]]


async def test_the_script_refuses_names_unless_the_log_ends_where_they_were_looked_up(
    store: RedisStore,
) -> None:
    k = stream_keys(store._prefix, "s")
    assert await store.commit("s", _commit(0, "c1", "", ["a"])) == 1
    # Straight to the script, as if the lookup had seen an empty log: -4, nothing written.
    assert await store._commits.script("s", k, _commit(1, "c2", "c1", ["a"]), (0, "")) == (
        -4,
        False,
    )
    # Or a log of one entry that is not the last one.
    assert await store._commits.script("s", k, _commit(1, "c2", "c1", ["a"]), (1, "x")) == (
        -4,
        False,
    )
    assert (await store.load("s")).version == 1
    assert await _log(store) == [["a"]]
    assert await store._commits.script("s", k, _commit(1, "c2", "c1", ["b"]), (1, "c1")) == (
        2,
        True,
    )


async def test_a_copy_the_log_no_longer_starts_with_is_read_again(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis lost this process's last commit (a failover before it reached the replica)
    and another process committed other names in its place: the copy's entries are
    not the log's any more. The lost names are free again, the other's taken."""
    assert await store.commit("s", _commit(0, "c1", "", ["a"])) == 1
    assert await store.commit("s", _commit(1, "c2", "c1", ["lost"])) == 2
    k = stream_keys(store._prefix, "s")
    # What Redis holds after the failover, then the other process's commit "c9".
    await _raw(store, "RPOP", k.names_log)
    await _raw(store, "RPOP", k.names_ids)
    await _raw(store, "RPUSH", k.names_log, "other")
    await _raw(store, "RPUSH", k.names_ids, "c9")
    await _raw(store, "HSET", k.meta, "commit_id", "c9")
    scripts: list[tuple[int, str]] = []  # where each commit script expects the log to end
    run_script = store._commits.script

    async def watched(*args: Any) -> tuple[int, bool]:
        scripts.append(args[3])
        return await run_script(*args)

    monkeypatch.setattr(store._commits, "script", watched)
    with pytest.raises(DuplicateNames):
        await store.commit("s", _commit(2, "c3", "c9", ["other"]))
    # The read found the copy stale and read the log anew before the lookup: no script
    # ran on the stale copy (the script's own check would have refused it, -4).
    assert scripts == []
    # The stale names went to be freed, refused write or not.
    assert store._commits.names.take_garbage() == []
    assert await store.commit("s", _commit(2, "c3", "c9", ["lost"])) == 3
    assert scripts == [(2, "c9")]
    assert await _log(store) == [["a"], ["other"], ["lost"]]


async def test_names_of_a_deleted_stream_are_free_in_its_new_incarnation(
    store: RedisStore,
) -> None:
    k = stream_keys(store._prefix, "s")
    assert await store.commit("s", _commit(0, "c1", "", ["a", "b"])) == 1
    assert await store.delete("s")
    assert await _raw(store, "EXISTS", k.names_log, k.names_ids) == 0
    await store.create("s", {"id": "s", "kind": "features"}, "inc-2", b"s0", "t0", b"{}", b"{}")
    new = replace(_commit(0, "n1", "", ["a"]), incarnation="inc-2")
    assert await store.commit("s", new) == 1
    with pytest.raises(DuplicateNames):
        await store.commit("s", replace(_commit(1, "n2", "n1", ["a"]), incarnation="inc-2"))


async def test_a_stale_commit_is_a_concurrent_update_before_any_name_is_checked(
    store: RedisStore,
) -> None:
    """A process whose copy is behind must reload and apply the write again (its retried
    seq may have been applied elsewhere, and then it answers from the stored response),
    not answer DuplicateNames for names its own write added."""
    assert await store.commit("s", _commit(0, "c1", "", ["a"])) == 1
    with pytest.raises(ConcurrentUpdate):
        await store.commit("s", _commit(0, "c2", "", ["a", "z"]))
    with pytest.raises(ConcurrentUpdate):  # another incarnation
        await store.commit("s", replace(_commit(1, "c3", "c1", ["a"]), incarnation="inc-2"))
    with pytest.raises(DuplicateNames):  # on top of the current version: the name is taken
        await store.commit("s", _commit(1, "c3", "c1", ["a"]))


async def test_names_of_a_stream_with_a_time_to_live_expire_with_it(
    redis_url: str, key_prefix: str
) -> None:
    st = open_store(Settings(store_url=redis_url, key_prefix=key_prefix))
    assert isinstance(st, RedisStore)
    await st.open()
    try:
        info = {"id": "t", "kind": "features", "ttl_seconds": 60}
        await st.create("t", info, "inc-1", b"s0", "t0", b"{}", b"{}")
        k = stream_keys(st._prefix, "t")
        if await _raw(st, "PTTL", k.meta) < 0:
            pytest.skip("this store version does not take ttl_seconds from the info")
        assert await st.commit("t", _commit(0, "c1", "", ["a"])) == 1
        assert 0 < await _raw(st, "PTTL", k.names_log) <= 60_000
        assert 0 < await _raw(st, "PTTL", k.names_ids) <= 60_000
    finally:
        await st.close()


async def test_racing_commits_with_the_same_name_add_it_once(
    store: RedisStore, other: RedisStore
) -> None:
    got = await asyncio.gather(
        store.commit("s", _commit(0, "x", "", ["same", "x1"])),
        other.commit("s", _commit(0, "y", "", ["same", "y1"])),
        store.commit("s", _commit(0, "z", "", ["same", "z1"])),
        return_exceptions=True,
    )
    wins = [r for r in got if r == 1]
    # A loser is stale (ConcurrentUpdate) or, having read the winner's names, sees its
    # name taken (DuplicateNames): names never leave a stream, so either is final.
    losses = [r for r in got if isinstance(r, (ConcurrentUpdate, DuplicateNames))]
    assert len(wins) == 1 and len(losses) == 2, got
    winner = ["x1", "y1", "z1"][got.index(1)]
    assert await _log(store) == [["same", winner]]


async def test_a_commit_of_20000_names_costs_redis_no_command_per_name(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    """The finding: a commit of 20,000 new names ran 40,000 set operations inside one
    script, and Redis answered nobody else meanwhile (a read waited up to 33 ms); then
    40 short scripts around the commit, 3 seconds of Redis's time for a million names.
    Now no command looks up or adds a name on its own: the commit script appends the
    request's names as one value. MONITOR shows each call and the commands it ran."""
    server = redis_server_factory(appendonly=False)
    client = aioredis.Redis.from_url(server.url)
    calls: list[list[tuple[str, int]]] = []  # per top-level command: it, then its script's
    token = re.compile(rb'"(?:[^"\\]|\\.)*"')

    def watch(sock: socket.socket) -> None:
        # A plain socket: a script call's line carries megabytes of arguments.
        lines = sock.makefile("rb")
        assert lines.readline().startswith(b"+OK")
        for line in lines:
            source = line.split(b"[", 1)[1].split(b"]", 1)[0]
            words = token.findall(line)
            name, count = words[0].strip(b'"').decode().upper(), len(words) - 2
            if source.endswith(b"lua") and calls:
                calls[-1].append((name, count))
            else:
                calls.append([(name, count)])
            if name == "ECHO":
                return

    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(b"MONITOR\r\n")
    watcher = threading.Thread(target=watch, args=(sock,))
    watcher.start()
    st = open_store(Settings(store_url=server.url, key_prefix="p"))
    await st.open()
    try:
        await st.create("s", {"id": "s", "kind": "features"}, "inc-1", b"s0", "t0", b"{}", b"{}")
        names = [f"feature-{i}" for i in range(20_000)]
        assert await st.commit("s", _commit(0, "c1", "", names)) == 1
        more = [f"more-{i}" for i in range(20_000)]
        assert await st.commit("s", _commit(1, "c2", "c1", more)) == 2
        await client.echo("done")
        watcher.join(30)
        assert not watcher.is_alive()
        ran = [name for call in calls for name, _ in call]
        assert not {"SADD", "SMISMEMBER", "SISMEMBER"} & set(ran)
        pushes = [(name, n) for call in calls for name, n in call if name == "RPUSH"]
        assert pushes == [("RPUSH", 1)] * 4  # per commit: its names, its id
        # Per commit: one look at the log's end (the copy is up to date: nothing read
        # back), then the commit script.
        at_log = [c for c in calls if any(name == "LLEN" for name, _ in c)]
        assert len(at_log) == 4
        assert "LRANGE" not in ran
        log = await client.lrange("p:{s}:names-log", 0, -1)
        assert [split(cast(bytes, e)) for e in log] == [names, more]
    finally:
        sock.close()
        await st.close()
        await client.aclose()


async def test_a_delete_leaves_freeing_the_stream_to_a_background_thread(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    """The finding: DEL of a stream holding a million feature names kept Redis busy for
    180 to 250 ms (every other read waited). The delete UNLINKs: Redis frees the values
    in a background thread."""
    server = redis_server_factory(appendonly=False)
    client = aioredis.Redis.from_url(server.url)
    st = open_store(Settings(store_url=server.url, key_prefix="p"))
    await st.open()
    try:
        await st.create("s", {"id": "s", "kind": "features"}, "inc-1", b"s0", "t0", b"{}", b"{}")
        assert await st.commit("s", _commit(0, "c1", "", [f"f{i}" for i in range(5000)])) == 1
        await client.config_resetstat()
        assert await st.delete("s")
        stats = await client.info("commandstats")
        assert "cmdstat_unlink" in stats and "cmdstat_del" not in stats
        assert await client.exists("p:{s}:names-log", "p:{s}:names-ids", "p:{s}:meta") == 0
    finally:
        await st.close()
        await client.aclose()
