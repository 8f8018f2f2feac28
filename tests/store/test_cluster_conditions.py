"""Every cluster condition redis-py reports is StoreUnavailable (503, WebSocket 1013).

The live cluster tests (tests/deploy/test_redis_cluster.py,
tests/faults/test_cluster_failover.py) meet these conditions in a real
failover; here each kind is raised inside the store's guard, so none of them
can slip through as a 500.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from unittest import mock

import pytest
import redis.asyncio as aioredis
from redis import exceptions as rex
from redis.asyncio.connection import AbstractConnection, Connection

from featurestream.config import Settings
from featurestream.errors import StoreUnavailable, StreamNotFound
from featurestream.store.redis import RedisStore, client_fault
from tests.store.test_stores import _commit, _create

pytestmark = pytest.mark.anyio

CONDITIONS = [
    rex.MovedError("3999 127.0.0.1:6381"),
    rex.AskError("3999 127.0.0.1:6381"),
    rex.TryAgainError("Multiple keys request during rehashing of slot"),
    rex.ClusterDownError("The cluster is down"),
    rex.MasterDownError("Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
    rex.SlotNotCoveredError('Slot "3999" is not covered by the cluster.'),
    rex.ReadOnlyError("You can't write against a read only replica."),
    rex.RedisClusterException(
        "Redis Cluster cannot be connected. Please provide at least one reachable node"
    ),
    rex.ResponseError("NOREPLICAS Not enough good replicas to write."),
    rex.ResponseError(
        "Command # 1 (EVALSHA x) of pipeline caused error: CLUSTERDOWN Hash slot not served"
    ),
    # Not cluster conditions, but Redis refusing writes for now: the same answer.
    rex.ResponseError(
        "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to "
        "persist to disk."
    ),
    rex.ResponseError("BUSY Redis is busy running a script."),
    # A master demoted (a failover, the old master back) while a WAIT blocked, or before.
    rex.ResponseError(
        "UNBLOCKED force unblock from blocking operation, instance state changed "
        "(master -> replica?)"
    ),
    rex.ResponseError("ERR WAIT cannot be used with replica instances."),
    rex.ConnectionError("Error 111 connecting to 127.0.0.1:6381. Connection refused."),
    rex.TimeoutError("Timeout reading from 127.0.0.1:6381"),
]


@pytest.fixture
async def offline() -> AsyncIterator[RedisStore]:
    """A store on a port nothing listens on: the guard alone, fed errors by the test."""
    client = aioredis.Redis.from_url("redis://127.0.0.1:1/0")
    yield RedisStore(client)
    await client.aclose()


@pytest.mark.parametrize("condition", CONDITIONS, ids=lambda e: type(e).__name__)
async def test_a_cluster_condition_is_store_unavailable(
    offline: RedisStore, condition: Exception
) -> None:
    with pytest.raises(StoreUnavailable):
        async with offline._guard():
            raise condition


# A bug stays an error (a 500 with its traceback logged, not a 503 clients would retry
# forever): a script error, a CROSSSLOT the code should never cause, an error of the
# store's own code under the guard.
BUGS = [
    rex.ResponseError("ERR Error running script: TASK failed"),
    rex.ClusterCrossSlotError("Keys in request don't hash to the same slot"),
    AttributeError("x"),
    TypeError("y"),
    KeyError("z"),
]


@pytest.mark.parametrize("error", BUGS, ids=lambda e: type(e).__name__)
async def test_other_errors_are_not_hidden(offline: RedisStore, error: Exception) -> None:
    with pytest.raises(type(error)):
        async with offline._guard():
            raise error


async def test_a_call_redis_py_refuses_is_not_hidden(offline: RedisStore) -> None:
    # Only a connection failing under a command counts as an outage: a call to redis-py
    # with wrong arguments, refused inside redis-py before any connection, is a bug.
    with pytest.raises(AttributeError):
        async with offline._guard():
            await offline._redis.zadd("k", [("a", 1)])
    with pytest.raises(IndexError):
        async with offline._guard():
            await offline._redis.execute_command()


@pytest.mark.redis
async def test_a_connection_closed_under_a_command_is_store_unavailable(
    redis_url: str, key_prefix: str
) -> None:
    # redis-py's cluster client closes every node's connections when a topology refresh
    # fails (a failover under way); a command of another task already past its
    # connection check then writes to a socket that is gone: an AttributeError inside
    # redis-py (seen as a WebSocket closed 1011 in tests/faults/test_cluster_failover.py).
    # Here the same happens to the connection of a real Redis, deterministically.
    client = aioredis.Redis.from_url(redis_url)
    store = RedisStore(client, prefix=key_prefix)
    check_health = AbstractConnection.check_health

    async def closed_meanwhile(self: AbstractConnection) -> None:
        await check_health(self)
        await self.disconnect()  # by another task, meanwhile

    try:
        with (
            mock.patch.object(AbstractConnection, "check_health", closed_meanwhile),
            pytest.raises(StoreUnavailable, match="client"),
        ):
            await store.head("s")
        # The client connects again on its next call.
        with pytest.raises(StreamNotFound):
            await store.head("s")
    finally:
        await client.aclose()


async def test_client_fault_names_only_what_redis_py_raised() -> None:
    def ours() -> None:
        raise AttributeError("'NoneType' object has no attribute 'writelines'")

    with pytest.raises(AttributeError) as raised:
        ours()
    assert not client_fault(raised.value)
    with pytest.raises(AttributeError) as raised:
        # Raised inside redis-py: a connection that is not connected has no writer.
        await Connection()._send_packed_command([b"PING"])
    assert client_fault(raised.value)
    # Raised deeper (the event loop's closed transport), on the way through redis-py.
    conn = Connection()
    conn._writer = _ClosedTransport()  # type: ignore[assignment]
    with pytest.raises(RuntimeError) as raised:
        await conn._send_packed_command([b"PING"])
    conn._writer = None  # nothing to close: it never connected
    assert client_fault(raised.value)
    assert client_fault(rex.ResponseError("ERR anything"))
    assert not client_fault(ValueError("no"))


class _ClosedTransport:
    """A stream writer whose transport was closed: its writes raise as uvloop's do
    (asyncio's own loop drops them instead)."""

    def __init__(self, writer: Any = None) -> None:
        self._writer = writer

    def writelines(self, data: Any) -> None:
        raise RuntimeError("unable to perform operation on <TCPTransport closed=True>")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


async def _disconnected(conn: AbstractConnection) -> None:
    await conn.disconnect()  # the writer is gone: AttributeError on None


async def _transport_closed(conn: AbstractConnection) -> None:
    assert conn._writer is not None
    conn._writer.close()
    conn._writer = _ClosedTransport(conn._writer)  # type: ignore[assignment]


@pytest.mark.redis
@pytest.mark.parametrize("close", [_disconnected, _transport_closed], ids=lambda f: f.__name__)
async def test_a_subscription_ends_cleanly_when_its_connection_was_closed_under_it(
    redis_url: str, key_prefix: str, close: Callable[[AbstractConnection], Awaitable[None]]
) -> None:
    # The hub's reader closes a node's pub/sub connection when it breaks (a failover);
    # a session ending at that moment unsubscribes on the connection being closed. Its
    # end must not fail (a WebSocket closed 1011 instead of 1013), and the channel can
    # be subscribed again.
    store = RedisStore.from_settings(Settings(store_url=redis_url, key_prefix=key_prefix))
    send = AbstractConnection._send_packed_command

    async def closed_first(self: AbstractConnection, command: Any) -> None:
        await close(self)  # by the hub's reader, meanwhile
        await send(self, command)

    try:
        await _create(store)
        subscription = store.subscribe("s1")
        await subscription.__aenter__()
        with mock.patch.object(AbstractConnection, "_send_packed_command", closed_first):
            await subscription.__aexit__(None, None, None)
        async with store.subscribe("s1") as sub:
            await store.commit("s1", _commit(0, cid="c0", notify=b"again"))
            assert await asyncio.wait_for(sub.get(), 5) == b"again"
    finally:
        await store.close()
