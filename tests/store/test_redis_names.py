"""New feature names around the Redis commit script: checked before it, added after it in
pieces, never more than a piece in one Redis command (so reads interleave with a commit
of 20,000 names), and finished by the next commit when a process fails in between."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from featurestream.config import Settings
from featurestream.errors import ConcurrentUpdate, DuplicateNames
from featurestream.store import Commit, open_store
from featurestream.store.keys import stream_keys
from featurestream.store.redis import NAMES_PIECE, RedisStore
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


async def _raw(store: RedisStore, *command: Any) -> Any:
    return await store._redis.execute_command(*command)


async def test_names_are_added_in_pieces_and_the_mark_is_gone(store: RedisStore) -> None:
    names = [f"f{i}" for i in range(2 * NAMES_PIECE + 7)]
    assert await store.commit("s", _commit(0, "c1", "", names)) == 1
    k = stream_keys(store._prefix, "s")
    assert await _raw(store, "SCARD", k.names) == len(names)
    assert await _raw(store, "HGET", k.meta, "names_pending") is None
    assert await _raw(store, "EXISTS", k.names_pending) == 0
    # A duplicate in the last piece refuses the whole commit, which writes nothing.
    with pytest.raises(DuplicateNames) as info:
        await store.commit("s", _commit(1, "c2", "c1", ["new", *names[-3:]]))
    assert info.value.names == names[-3:]
    assert (await store.load("s")).version == 1
    assert await _raw(store, "SISMEMBER", k.names, "new") == 0


async def test_a_retried_commit_is_not_refused_for_its_own_names(store: RedisStore) -> None:
    c = _commit(0, "c1", "", ["a", "b"])
    assert await store.commit("s", c) == 1
    assert await store.commit("s", c) == 1  # the same commit again: its outcome, no 409


async def test_names_left_pending_are_finished_by_the_next_commit(store: RedisStore) -> None:
    k = stream_keys(store._prefix, "s")
    # A process that ran the script and died before adding the names.
    first = _commit(0, "c1", "", ["a", "b", "c"])
    assert await store._commit_script("s", k, first) == 1
    assert await _raw(store, "HGET", k.meta, "names_pending") == b"c1"
    assert await _raw(store, "SCARD", k.names) == 0
    # The next commit finds the mark, adds those names, then refuses a duplicate of them.
    with pytest.raises(DuplicateNames) as info:
        await store.commit("s", _commit(1, "c2", "c1", ["d", "b"]))
    assert info.value.names == ["b"]
    assert await _raw(store, "SCARD", k.names) == 3
    assert await _raw(store, "HGET", k.meta, "names_pending") is None
    assert await store.commit("s", _commit(1, "c2", "c1", ["d"])) == 2
    assert await _raw(store, "SCARD", k.names) == 4


async def test_the_script_refuses_names_while_a_mark_stands(store: RedisStore) -> None:
    k = stream_keys(store._prefix, "s")
    assert await store._commit_script("s", k, _commit(0, "c1", "", ["a"])) == 1
    # Straight to the script (no check first): -4, nothing written.
    assert await store._commit_script("s", k, _commit(1, "c2", "c1", ["a"])) == -4
    assert (await store.load("s")).version == 1
    # Through commit: the mark is finished first, then the duplicate is found.
    with pytest.raises(DuplicateNames):
        await store.commit("s", _commit(1, "c2", "c1", ["a"]))


async def test_pieces_of_a_deleted_stream_write_nothing(store: RedisStore) -> None:
    k = stream_keys(store._prefix, "s")
    assert await store._commit_script("s", k, _commit(0, "c1", "", ["a", "b"])) == 1
    assert await store.delete("s")
    await store._add_pending_names(k, "c1", ["a", "b"])  # the late piece of a dead process
    assert await _raw(store, "EXISTS", k.names, k.meta, k.names_pending) == 0


async def test_late_pieces_of_a_deleted_stream_leave_its_new_incarnation_alone(
    store: RedisStore,
) -> None:
    """Marks are commit ids: a stream deleted and created again reaches version 1 again,
    and a slow process still adding the names of the old version 1 must not add them to
    the new stream's names, nor remove the new stream's mark."""
    k = stream_keys(store._prefix, "s")
    assert await store._commit_script("s", k, _commit(0, "old", "", ["old1", "old2"])) == 1
    assert await store.delete("s")
    await store.create("s", {"id": "s", "kind": "features"}, "inc-1", b"s0", "t0", b"{}", b"{}")
    assert await store._commit_script("s", k, _commit(0, "new", "", ["new1"])) == 1
    await store._add_pending_names(k, "old", ["old1", "old2"])  # the old writer, late
    assert await _raw(store, "HGET", k.meta, "names_pending") == b"new"
    assert await _raw(store, "SCARD", k.names) == 0
    # The next commit finishes the new names: new1 is taken, old1 is free.
    with pytest.raises(DuplicateNames):
        await store.commit("s", _commit(1, "c2", "new", ["new1"]))
    assert await store.commit("s", _commit(1, "c2", "new", ["old1"])) == 2


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
        assert 0 < await _raw(st, "PTTL", k.names) <= 60_000
    finally:
        await st.close()


async def test_racing_commits_with_the_same_name_add_it_once(store: RedisStore) -> None:
    got = await asyncio.gather(
        store.commit("s", _commit(0, "x", "", ["same", "x1"])),
        store.commit("s", _commit(0, "y", "", ["same", "y1"])),
        return_exceptions=True,
    )
    wins = [r for r in got if r == 1]
    # The loser is stale (ConcurrentUpdate) or, having finished the winner's names, sees
    # its name taken (DuplicateNames): names never leave a stream, so either is final.
    losses = [r for r in got if isinstance(r, (ConcurrentUpdate, DuplicateNames))]
    assert len(wins) == 1 and len(losses) == 1
    winner = "x1" if got[0] == 1 else "y1"
    k = stream_keys(store._prefix, "s")
    assert sorted(await _raw(store, "SMEMBERS", k.names)) == sorted([b"same", winner.encode()])


async def test_no_redis_command_handles_more_than_a_piece_of_names(
    redis_server_factory: Callable[..., RedisServer],
) -> None:
    """The finding: a commit of 20,000 new names ran 40,000 set operations inside one
    script, and Redis answered nobody else meanwhile (a read waited up to 33 ms). Now no
    script call, and no command outside one, touches more than a piece of names. MONITOR
    shows each script call followed by the commands it ran."""
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
        await client.echo("done")
        watcher.join(30)
        assert not watcher.is_alive()
        touched = [sum(n for name, n in call if name in ("SADD", "SMISMEMBER")) for call in calls]
        assert max(touched) <= NAMES_PIECE
        assert sum(touched) == 2 * len(names)  # each looked up once, added once
        assert await client.scard("p:{s}:names") == 20_000
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
        assert await client.exists("p:{s}:names", "p:{s}:meta") == 0
    finally:
        await st.close()
        await client.aclose()
